"""MLX beside PyTorch: whether this installation can run MLX (an optional dependency: `pip install 'mpsstudio[mlx]'`),
which of its devices a named device means, and an MLX run's device: clock reads wait for MLX's queue
(`mx.synchronize`), memory is MLX's allocator's.

A run's framework is "torch" or "mlx" (RunConfig.framework). MLX's devices are its CPU and its GPU: Metal on a Mac
(the run's device "mps"), CUDA where MLX's CUDA build is installed ("cuda"). Every MLX call here is a row of the Apple
API ledger (docs/architecture.md: `mlx-*`), checked against the macOS wheels of mlx and mlx-metal.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

from ..basics.errors import UserError
from ..basics.frameworks import FRAMEWORK_WORDS, INSTALL_MLX
from . import devices

__all__ = ["FRAMEWORK_WORDS", "INSTALL_MLX", "MlxDevice", "mlx_reason", "mlx_version", "resolve", "status"]


@functools.cache
def mlx_reason() -> str:
    """Why MLX cannot run here ("" when it can): not installed, or installed without a backend (on Linux `pip install
    mlx` alone has none: MLX's CPU backend is the `mlx[cpu]` extra)."""
    try:
        import mlx.core as mx
    except ImportError as exc:
        if getattr(exc, "name", "") in ("mlx", "mlx.core") and "mlx" in str(exc) and "No module named" in str(exc):
            return f"MLX is not installed; {INSTALL_MLX}"
        return f"MLX is installed but does not load ({str(exc)[:160]}); reinstall it: {INSTALL_MLX}"
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


@dataclass
class MlxDevice(devices.Device):
    """A device as MLX uses it: the same identity as PyTorch's (so its energy meter and history are the device's),
    with clock reads waiting for MLX's queue and memory read from MLX's allocator."""

    framework: str = "mlx"

    def mx_device(self):
        import mlx.core as mx

        return mx.cpu if self.kind == "cpu" else mx.gpu

    def synchronize(self) -> None:
        """Wait until MLX's queued work on this device is done (`mx.synchronize`: every stream of the default device,
        which a run sets to this one)."""
        import mlx.core as mx

        mx.synchronize()

    def memory(self) -> dict[str, int]:
        """The process's readings (resident size on the CPU, swap) and MLX's allocator: active (arrays held), peak,
        cache (freed buffers kept for reuse)."""
        import mlx.core as mx

        reading = super().memory()
        reading.update(mlx_active=int(mx.get_active_memory()), mlx_peak=int(mx.get_peak_memory()),
                       mlx_cache=int(mx.get_cache_memory()))
        return reading

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
