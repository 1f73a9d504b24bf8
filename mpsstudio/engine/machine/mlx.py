"""MLX beside PyTorch: whether this installation can run MLX (an optional dependency: `pip install 'mpsstudio[mlx]'`),
which of its devices a named device means, and an MLX run's device: clock reads wait for MLX's queue
(`mx.synchronize`), memory is MLX's allocator's.

A run's framework is "torch" or "mlx" (RunConfig.framework). MLX's devices are its CPU and its GPU: Metal on a Mac
(the run's device "mps"), CUDA where MLX's CUDA build is installed ("cuda"). Every MLX call here is a row of the Apple
API ledger (docs/architecture.md: `mlx-*`), checked against the macOS wheels of mlx and mlx-metal.
"""

from __future__ import annotations

import functools
import os
import platform
import re
from dataclasses import dataclass

from ..basics.errors import UserError
from ..basics.frameworks import FRAMEWORK_WORDS, INSTALL_MLX
from . import devices

__all__ = ["FRAMEWORK_WORDS", "INSTALL_MLX", "TF32_VAR", "MlxDevice", "Arithmetic", "arithmetic", "env_flag",
           "mlx_reason", "mlx_variables", "mlx_version", "resolve", "set_tf32", "status", "tf32_class_path"]

# MLX's switch for TF32-class fp32 matrix products (mlx/utils.h `env::enable_tf32`: get_var("MLX_ENABLE_TF32", 1), read
# once, at the process's first matrix product on a GPU); its Metal kernels take that path only where the GPU has the
# NAX units (device.cpp `is_nax_available`: macOS 26.2+, architecture generation 17+, 18+ for a phone's 'p').
TF32_VAR = "MLX_ENABLE_TF32"
NAX_MACOS = (26, 2)
_tf32_in_process: bool | None = None  # what this process's MLX took (its C++ side reads the variable once)


@functools.cache
def mlx_reason() -> str:
    """Why MLX cannot run here ("" when it can): not installed, or installed without a backend (on Linux `pip install
    mlx` alone has none: MLX's CPU backend is the `mlx[cpu]` extra)."""
    try:
        import mlx.core as mx
    except ImportError as exc:
        if getattr(exc, "name", "") in ("mlx", "mlx.core") and "mlx" in str(exc) and "No module named" in str(exc):
            return f"MLX is not installed; {INSTALL_MLX}"
        cause = exc.__cause__ or exc.__context__  # nanobind's "error while initializing the extension" hides it
        said = str(exc).rstrip(".")[:160] + (f": {str(cause)[:160]}" if cause is not None else "")
        return f"MLX is installed but does not load ({said}); reinstall it: {INSTALL_MLX}"
    try:
        mx.eval(mx.array([1.0]) + 1)
    except Exception as exc:  # a Linux `pip install mlx` without a backend raises here
        return f"MLX is installed but cannot compute ({str(exc)[:160]}); {INSTALL_MLX}"
    return ""


def mlx_version() -> str | None:
    """MLX's version where it runs, else None."""
    if mlx_reason():
        return None
    import mlx.core as mx

    return str(getattr(mx, "__version__", "unknown"))


def _gpu_reason(kind: str) -> str:
    """Why MLX's GPU is not the device `kind` here ("" when it is): Metal for mps, CUDA for cuda."""
    import mlx.core as mx

    if kind == "mps":
        return "" if mx.metal.is_available() else "MLX's Metal GPU is not available here (it needs Apple silicon)"
    cuda = getattr(mx, "cuda", None)
    if cuda is not None and cuda.is_available():
        return ""
    return ("MLX here has no CUDA backend (its CUDA build is the mlx[cuda13] extra, Linux only)" if kind == "cuda"
            else f"MLX has no device {kind}")


def status(kind: str) -> str:
    """Why MLX cannot run on a device of `kind` (cpu, mps, cuda) here, "" when it can."""
    reason = mlx_reason()
    if reason or kind == "cpu":
        return reason
    return _gpu_reason(kind)


def env_flag(value: str | None, default: int) -> int:
    """An MLX integer variable as MLX reads it (mlx/utils.cpp `get_var`: C's atoi when set, else the default):
    leading blanks and a sign, then digits; anything else reads as 0 ("false", "yes" and "" all turn a switch off)."""
    if value is None:
        return default
    match = re.match(r"\s*([+-]?\d+)", value)
    return int(match.group(1)) if match else 0


def mlx_variables() -> dict[str, str]:
    """The MLX_* variables of this process (recorded with every MLX run: they change what MLX computes)."""
    return {name: value for name, value in sorted(os.environ.items()) if name.startswith("MLX_")}


def _arch_generation(arch: str) -> tuple[int, str]:
    """(generation, kind letter) of an MLX GPU architecture ("applegpu_g17s" -> (17, "s")), as device.cpp reads it:
    the two characters before the last, each 0 where not a digit."""
    if len(arch) < 3:
        return 0, arch[-1:] if arch else ""
    tens, ones = arch[-3], arch[-2]
    return (int(tens) if tens.isdigit() else 0) * 10 + (int(ones) if ones.isdigit() else 0), arch[-1]


def _macos() -> tuple[int, int]:
    parts = (platform.mac_ver()[0] or "0").split(".")
    try:
        return int(parts[0]), int(parts[1]) if len(parts) > 1 else 0
    except ValueError:
        return 0, 0


def tf32_class_path(kind: str, arch: str | None = None) -> bool:
    """Whether MLX's fp32 matrix products (matmul, convolution, attention) can take TF32-class kernels on this device
    when MLX_ENABLE_TF32 allows them: on a Mac GPU with NAX units (macOS 26.2+, architecture generation 17+, 18+ for
    a 'p'), on MLX's CUDA GPU (cuBLAS's TF32 compute); never on its CPU."""
    if kind == "cuda":
        return True
    if kind != "mps":
        return False
    if arch is None:
        import mlx.core as mx

        arch = str(os.environ.get("MLX_METAL_GPU_ARCH") or mx.device_info(mx.gpu).get("architecture", ""))
    generation, letter = _arch_generation(arch)
    return _macos() >= NAX_MACOS and generation >= (18 if letter == "p" else 17)


@dataclass(frozen=True)
class Arithmetic:
    """What an MLX run's fp32 matrix products are: `tf32` what the run asked (RunConfig.tf32), `path` whether this
    device has the TF32-class kernels; `words` as a run's details say it."""

    tf32: bool
    path: bool

    @property
    def reduced(self) -> bool:
        """fp32 matrix products in TF32-class precision (10-bit mantissa inputs)."""
        return self.tf32 and self.path

    @property
    def words(self) -> str:
        if self.reduced:
            return "TF32-class fp32 matrix products (MLX_ENABLE_TF32=1, MLX's default on this GPU)"
        if self.path:
            return "full fp32 matrix products (MLX_ENABLE_TF32=0; MLX's default on this GPU is TF32-class: --tf32)"
        return "full fp32 matrix products (this device has no TF32-class path)"

    def record(self) -> dict:
        return {"tf32": self.tf32, "tf32_class_path": self.path, "reduced": self.reduced, "words": self.words}


def set_tf32(tf32: bool) -> None:
    """Set MLX_ENABLE_TF32 for this process's MLX before its first matrix product (RunConfig.tf32: off unless chosen,
    like with like with PyTorch's fp32). MLX reads it once a process: a second run here that asks otherwise on a GPU
    is refused (a warm worker keys on it; process/warm.py)."""
    global _tf32_in_process
    if _tf32_in_process is not None and _tf32_in_process != tf32:
        raise UserError("MLX in this process already took MLX_ENABLE_TF32="
                        f"{int(_tf32_in_process)} (it reads it once); run this one in a fresh process.")
    os.environ[TF32_VAR] = "1" if tf32 else "0"


def arithmetic(kind: str, tf32: bool) -> Arithmetic:
    """The run's fp32 arithmetic in MLX on a device of `kind`, once set_tf32 set the switch; on a GPU the first
    matrix product fixes it for the process."""
    global _tf32_in_process
    path = tf32_class_path(kind)
    if kind != "cpu":
        _tf32_in_process = tf32
    return Arithmetic(tf32=bool(env_flag(os.environ.get(TF32_VAR), 1)) and tf32, path=path)


@dataclass
class MlxDevice(devices.Device):
    """A device as MLX uses it: the same identity as PyTorch's (so its energy meter and history are the device's),
    with clock reads waiting for MLX's queue and memory read from MLX's allocator."""

    framework: str = "mlx"

    def mx_device(self):
        import mlx.core as mx

        return mx.cpu if self.kind == "cpu" else mx.gpu

    def synchronize(self) -> None:
        """Wait until MLX's queued work is done (`mx.synchronize()`: the default stream of the default device, which a
        run sets to this one; each step's `mx.eval` has already waited for its own work)."""
        import mlx.core as mx

        mx.synchronize()

    def memory(self) -> dict[str, int]:
        """The process's readings (resident size on the CPU, swap) and MLX's allocator: active (arrays held), peak,
        cache (freed buffers kept for reuse)."""
        import mlx.core as mx

        reading = super().memory()
        reading.update(mlx_active=int(mx.get_active_memory()), mlx_peak=int(mx.get_peak_memory()),
                       mlx_cache=int(mx.get_cache_memory()))
        if self.kind != "cpu":  # the run's peak is MLX's on a GPU; on the CPU the process's growth, as PyTorch's
            reading["peak"] = reading["mlx_peak"]
        return reading

    def memory_measure(self) -> str:
        return "rss_growth" if self.kind == "cpu" else "mlx_peak"

    def memory_lines(self, reading: dict) -> dict[str, int | None]:
        lines = super().memory_lines(reading)
        if self.kind != "cpu":  # what MLX's allocator holds beyond the arrays (the driver line of a GPU run)
            lines["memory_driver"] = reading.get("mlx_active", 0) + reading.get("mlx_cache", 0)
        return lines

    def reset_peak(self) -> None:
        import mlx.core as mx

        mx.reset_peak_memory()

    def in_use(self, reading: dict[str, int]) -> int:
        """On the CPU the process's resident size, as a PyTorch CPU run (MLX's CPU arrays live in it); on a GPU the
        arrays MLX's allocator holds (as PyTorch's allocator figure)."""
        if self.kind == "cpu":
            return super().in_use(reading)
        return int(reading.get("mlx_active", 0))


def resolve(name: str) -> MlxDevice:
    """The MLX device for a named device (cpu, mps, cuda); UserError when MLX cannot run there, with the reason."""
    kind = name.strip().lower().split(":")[0]
    if kind not in ("cpu", "mps", "cuda"):
        raise UserError(f"Unknown device {name.strip()!r}; use cpu, mps or cuda.")
    reason = status(kind)
    if reason:
        raise UserError(f"MLX cannot run on {kind}: {reason}.")
    try:  # the device PyTorch names the same, where PyTorch sees it (the CPU always) ...
        base = devices.resolve_device(name)
    except UserError:  # ... else MLX's GPU in MLX's own words
        import mlx.core as mx

        info = mx.device_info(mx.gpu) if hasattr(mx, "device_info") else {}
        base = devices.Device(id=kind, kind=kind, available=True, name=str(info.get("device_name", "MLX GPU")))
    fields = {k: getattr(base, k) for k in ("id", "kind", "available", "reason", "name", "memory_total", "threads",
                                            "torch_device")}
    return MlxDevice(**fields)
