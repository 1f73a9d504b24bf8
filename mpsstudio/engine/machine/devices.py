"""Devices a run can use (CPU, Apple GPU via MPS, CUDA GPUs): discovery, why one cannot be used, sync and memory
(which precisions each runs: precision.py).

Every "reason" string here is a short phrase for the user (no trailing full stop), "" when nothing is wrong.
"""

from __future__ import annotations

import os
import platform
import re
import subprocess
import sys
from dataclasses import asdict, dataclass

import psutil
import torch

from . import footprint
from .apple import macos_name, macos_text, mps_min_macos, torch_limit_for
from ..basics.errors import UserError


# ---------------------------------------------------------------- host facts


def sysctl(name: str) -> str:
    """The value of a macOS sysctl key, or "" when it cannot be read (not macOS, no such key, timeout)."""
    try:
        done = subprocess.run(["sysctl", "-n", name], capture_output=True, text=True, timeout=2, check=False)
    except (OSError, subprocess.SubprocessError):
        return ""
    return done.stdout.strip() if done.returncode == 0 else ""


def macos_version() -> str:
    """The macOS version ("14.5"), or "" when not on macOS."""
    return platform.mac_ver()[0] if sys.platform == "darwin" else ""


def cpu_name() -> str:
    """The CPU model name: /proc/cpuinfo on Linux, machdep.cpu.brand_string on macOS, else platform.processor()."""
    name = ""
    if sys.platform.startswith("linux"):
        name = _cpuinfo_model_name()
    elif sys.platform == "darwin":
        name = sysctl("machdep.cpu.brand_string")
    return name or platform.processor() or platform.machine() or "unknown CPU"


def _cpuinfo_model_name() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as f:
            for line in f:
                key, _, value = line.partition(":")
                if key.strip() == "model name":
                    return value.strip()
    except OSError:
        pass
    return ""


def is_rosetta() -> bool:
    """True when this (x86_64) Python runs translated by Rosetta on an Apple Silicon Mac."""
    return sys.platform == "darwin" and sysctl("sysctl.proc_translated") == "1"


def is_apple_silicon() -> bool:
    """True on an Apple Silicon Mac, also when this Python runs under Rosetta."""
    return sys.platform == "darwin" and (platform.machine() == "arm64" or is_rosetta())


def apple_chip_name() -> str:
    """The Apple chip ("Apple M1 Pro") on Apple Silicon, else ""."""
    return cpu_name() if is_apple_silicon() else ""


def apple_gpu_cores() -> int | None:
    """The Apple GPU's core count from the IORegistry ("gpu-core-count" of AGXAccelerator), None elsewhere."""
    if not is_apple_silicon():
        return None
    try:
        done = subprocess.run(["ioreg", "-rc", "AGXAccelerator", "-d", "1"], capture_output=True, text=True,
                              timeout=2.0)
    except (OSError, subprocess.SubprocessError):
        return None
    match = re.search(r'"gpu-core-count"\s*=\s*(\d+)', done.stdout or "")
    return int(match.group(1)) if match else None


def _version_tuple(text: str) -> tuple[int, ...]:
    """(2, 6, 0) from "2.6.0+cu124" or "14.5"; stops at the first part that is not a number."""
    parts: list[int] = []
    for piece in text.split("+")[0].split("."):
        digits = "".join(ch for ch in piece if ch.isdigit()) if piece[:1].isdigit() else ""
        if not digits:
            break
        parts.append(int(digits))
    return tuple(parts)


def torch_at_least(major: int, minor: int) -> bool:
    """Whether the running torch (read now, so tests can patch it) is at least major.minor."""
    return _version_tuple(str(torch.__version__))[:2] >= (major, minor)


def macos_at_least(major: int, minor: int = 0) -> bool:
    return _version_tuple(macos_version())[:2] >= (major, minor)


# ---------------------------------------------------------------- reasons


def mps_unavailable_reason() -> str:
    """Why MPS cannot be used here, or "" when it can; platform first, since that is what a user can act on."""
    if torch.backends.mps.is_built() and torch.backends.mps.is_available():
        return ""
    if sys.platform != "darwin":
        return "not an Apple Silicon Mac"
    if platform.machine() != "arm64":
        if is_rosetta():
            return "this Python runs under Rosetta (x86_64); install an arm64 Python and PyTorch to use the Apple GPU"
        return "not an Apple Silicon Mac"
    version = macos_version()
    # Pythons built against old SDKs report Big Sur and later as "10.16"; that says nothing about the minimum.
    needed = mps_min_macos(str(torch.__version__))
    if version and version != "10.16" and not macos_at_least(*needed):
        return (f"macOS {macos_text(needed)} or newer is needed for the Apple GPU with PyTorch "
                f"{torch.__version__.split('+')[0]} (this Mac runs macOS {version})")
    if not torch.backends.mps.is_built():
        return "this PyTorch was built without MPS"
    return (
        f"PyTorch reports MPS unavailable even though this is an Apple Silicon Mac on macOS {version or '?'} "
        "with MPS built in (a virtual machine, or a broken PyTorch install)"
    )


def mps_fix(reason: str) -> str:
    """The one thing to do about why MPS cannot be used (mps_unavailable_reason, or a failed probe), with the
    command where there is one; "" where nothing can be done (not an Apple Silicon Mac)."""
    frozen = getattr(sys, "frozen", False)  # the .app: it carries its own PyTorch, so pip is no fix there
    if not reason or reason == "not an Apple Silicon Mac":
        return ""
    if "Rosetta" in reason:
        if frozen:
            return ("In Finder, select MPS Studio, choose File \u2192 Get Info and untick \u201cOpen using Rosetta\u201d, "
                    "then open it again.")
        return ("Install an arm64 Python (python.org's macOS installer, or Homebrew in /opt/homebrew), then "
                "`python3 -m pip install torch torchvision` with it; `python3 -c \"import platform; "
                "print(platform.machine())\"` must print arm64.")
    if reason.startswith("macOS"):
        update = (f"Update to {macos_name(mps_min_macos(str(torch.__version__)))} or later in System Settings "
                  "\u2192 General \u2192 Software Update, then press Check Again")
        major, minor, *_ = (*_version_tuple(macos_version()), 0, 0)
        limit = torch_limit_for((major, minor))
        if frozen or limit is None:
            return update + "."
        return (update + f"; or keep this macOS with a PyTorch that runs the Apple GPU there: `python3 -m pip "
                f"install 'torch<{limit}' torchvision`.")
    if "built without MPS" in reason:
        return "Reinstall PyTorch from PyPI: `python3 -m pip install --upgrade --force-reinstall torch`."
    if "not working" in reason:
        return ("Quit other programs that use the GPU heavily and press Check Again; in a virtual machine the "
                "Apple GPU does not work.")
    if frozen:
        return "Run MPS Studio on the Mac itself: the Apple GPU does not work in a virtual machine."
    return ("Run MPS Studio on the Mac itself (the Apple GPU does not work in a virtual machine), or reinstall "
            "PyTorch: `python3 -m pip install --upgrade --force-reinstall torch`.")


def mps_banner(devices: list) -> str:
    """The sentence the window shows when this is a Mac whose Apple GPU cannot be used: why, and the fix; ""
    elsewhere (a Linux or Windows machine has no Apple GPU to explain)."""
    if sys.platform != "darwin":
        return ""
    mps = next((d for d in devices if d.kind == "mps"), None)
    if mps is None or mps.available:
        return ""
    fix = mps_fix(mps.reason)
    reason = mps.reason.split(";")[0] if fix else mps.reason  # the fix says what the reason's advice says
    return f"The Apple GPU (MPS) cannot be used: {reason}." + (f" {fix}" if fix else "")


def worth_showing(devices: list) -> list:
    """The devices a setup lists: on a Mac, CUDA only where it exists (a row saying a Mac has no CUDA is noise)."""
    if sys.platform != "darwin":
        return list(devices)
    return [d for d in devices if d.kind != "cuda" or d.available]


def cuda_unavailable_reason() -> str:
    """Why CUDA cannot be used here, or "" when at least one GPU is usable."""
    if torch.version.cuda is None and getattr(torch.version, "hip", None) is None:
        return "this PyTorch was built without CUDA"
    if torch.cuda.is_available() and torch.cuda.device_count() > 0:
        return ""
    hidden = os.environ.get("CUDA_VISIBLE_DEVICES")
    if hidden is not None:
        return f"no NVIDIA GPU or driver found (CUDA_VISIBLE_DEVICES={hidden!r})"
    return "no NVIDIA GPU or driver found"


# ---------------------------------------------------------------- the device


@dataclass
class Device:
    """One place to run: its identity, whether it can be used (and why not), and cheap readings."""

    id: str
    kind: str
    available: bool
    reason: str = ""
    name: str = ""
    memory_total: int | None = None
    threads: int | None = None
    torch_device: str = ""

    def __post_init__(self) -> None:
        if not self.torch_device:
            self.torch_device = self.id

    @property
    def index(self) -> int:
        """The CUDA ordinal ("cuda:1" -> 1); 0 for everything else."""
        _, _, idx = self.id.partition(":")
        return int(idx) if idx.isdigit() else 0

    def synchronize(self) -> None:
        """Wait until all queued work on the device is done, so a clock read afterwards is true."""
        if self.kind == "cuda":
            torch.cuda.synchronize(self.index)
        elif self.kind == "mps":
            torch.mps.synchronize()

    def memory(self) -> dict[str, int]:
        """A cheap memory reading in bytes (allocator counters, never a host sync), with the run process's own
        memory (`process`, its footprint on macOS: footprint.py) and the machine's swap (`swap_used`)."""
        if self.kind == "mps":
            reading = {
                "current_allocated": int(torch.mps.current_allocated_memory()),
                "driver_allocated": int(torch.mps.driver_allocated_memory()),
                "recommended_max": int(torch.mps.recommended_max_memory()),
            }
            peak = footprint.mps_peak()
            if peak is not None:
                reading["peak"] = peak
        elif self.kind == "cuda":
            peak = int(torch.cuda.max_memory_allocated(self.index))
            reading = {
                "allocated": int(torch.cuda.memory_allocated(self.index)),
                "reserved": int(torch.cuda.memory_reserved(self.index)),
                "peak_allocated": peak,
                "peak": peak,
            }
        else:
            reading = {}
        process, _ = footprint.process_memory()
        if self.kind == "cpu":
            reading["rss"] = process if process is not None else 0
        if process is not None:
            reading["process"] = process  # footprint.process_memory says which figure (env["process_memory"])
        swap = footprint.swap_used()
        if swap is not None:
            reading["swap_used"] = swap
        return reading

    def memory_lines(self, reading: dict) -> dict[str, int | None]:
        """The memory plot's other lines beside the run's own figure (in_use): the driver's memory on MPS (what
        Metal holds, the tensors' and its caches) or the caching allocator's reserve on CUDA, the process's memory
        and the machine's swap, each None where not read."""
        driver = {"mps": "driver_allocated", "cuda": "reserved"}.get(self.kind)
        return {"memory_driver": reading.get(driver) if driver else None, "memory_process": reading.get("process"),
                "swap_used": reading.get("swap_used")}

    def reset_peak(self) -> None:
        """Start a new peak-memory window: CUDA's allocator peak, MPS's through the accelerator stats where the loaded
        torch keeps them (footprint.mps_peak)."""
        if self.kind == "cuda":
            torch.cuda.reset_peak_memory_stats(self.index)
        elif self.kind == "mps" and footprint.mps_peak() is not None:
            torch.accelerator.reset_peak_memory_stats(0)

    def memory_measure(self) -> str:
        """What a run's memory figure on this device is (analysis/summary.MEMORY_MEASURES): the CPU process's growth,
        the peak PyTorch's allocator kept (CUDA; MPS where torch keeps one), or, on an MPS whose torch keeps none, the
        tensors in use read at window ends (not a peak: a step's activations are freed by then)."""
        if self.kind == "cpu":
            return "rss_growth"
        if self.kind == "mps" and footprint.mps_peak() is None:
            return "in_use_at_window_ends"
        return "peak_allocated"

    def in_use(self, reading: dict[str, int]) -> int:
        """The one number to plot and compare from a memory() reading."""
        key = {"mps": "current_allocated", "cuda": "allocated"}.get(self.kind, "rss")
        return int(reading.get(key, 0))

    def to_dict(self) -> dict:
        return asdict(self)


def cuda_uuid(device: Device) -> str | None:
    """The CUDA GPU's UUID (how NVML finds the same GPU whatever CUDA_VISIBLE_DEVICES renumbers), None elsewhere."""
    if device.kind != "cuda":
        return None
    try:
        index = torch.device(device.torch_device or device.id).index or 0
        return str(torch.cuda.get_device_properties(index).uuid)
    except Exception:
        return None


def cpu_device() -> Device:
    """The CPU: always available."""
    return Device(
        id="cpu",
        kind="cpu",
        available=True,
        name=cpu_name(),
        memory_total=int(psutil.virtual_memory().total),
        threads=torch.get_num_threads(),
    )


def mps_device() -> Device:
    """The Apple GPU, available or not (with the reason)."""
    reason = mps_unavailable_reason()
    memory_total = None
    if sys.platform == "darwin":
        memsize = sysctl("hw.memsize")
        memory_total = int(memsize) if memsize.isdigit() else int(psutil.virtual_memory().total)
    return Device(
        id="mps", kind="mps", available=not reason, reason=reason, name=apple_chip_name(), memory_total=memory_total
    )


def cuda_devices() -> list[Device]:
    """One device per visible CUDA GPU, or a single unavailable "cuda" entry saying why there is none."""
    reason = cuda_unavailable_reason()
    if reason:
        return [Device(id="cuda", kind="cuda", available=False, reason=reason)]
    return [
        Device(
            id=f"cuda:{i}",
            kind="cuda",
            available=True,
            name=torch.cuda.get_device_name(i),
            memory_total=int(torch.cuda.get_device_properties(i).total_memory),
        )
        for i in range(torch.cuda.device_count())
    ]


def discover_devices() -> list[Device]:
    """Every device kind this app knows, available or not: cpu, mps, then cuda:N (or one unavailable cuda)."""
    return [cpu_device(), mps_device(), *cuda_devices()]


def resolve_device(spec: str) -> Device:
    """The usable device for a user's spec ("cpu", "mps", "cuda", "cuda:1"); UserError if unknown or unavailable."""
    text = spec.strip().lower()
    if text == "cpu":
        return cpu_device()
    if text == "mps":
        device = mps_device()
    elif text == "cuda":
        device = cuda_devices()[0]
    elif text.startswith("cuda:") and text[5:].isdigit():
        device = _resolve_cuda(f"cuda:{int(text[5:])}")
    else:
        raise UserError(f"Unknown device {spec.strip()!r}; use cpu, mps or cuda (cuda:N for a specific GPU).")
    if not device.available:
        raise UserError(f"{device.id} is not available: {device.reason}.")
    return device


def _resolve_cuda(device_id: str) -> Device:
    devices = cuda_devices()
    for device in devices:
        if device.id == device_id:
            return device
    if not devices[0].available:
        return Device(id=device_id, kind="cuda", available=False, reason=devices[0].reason)
    count = len(devices)
    plural = "GPU" if count == 1 else "GPUs"
    return Device(
        id=device_id,
        kind="cuda",
        available=False,
        reason=f"this machine has {count} CUDA {plural} (cuda:0 to cuda:{count - 1})",
    )
