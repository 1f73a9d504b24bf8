"""The environment record every result carries, a short machine label, and the rows of `mpsstudio doctor`."""

from __future__ import annotations

import os
import platform
import sys
from dataclasses import dataclass

import torch

from ... import __version__
from . import devices

# Environment variables that change what a run measures; recorded only when set. The PYTORCH_*MPS* ones are every
# such name in libtorch_cpu.dylib of the pinned torch (benchmarks/apple_ledger.py checks the list against it), and
# PYTORCH_MPS_METAL_VERSION, which torch 2.15 reads.
MPS_ENV_VARS = (
    "PYTORCH_ENABLE_MPS_FALLBACK",
    "PYTORCH_MPS_HIGH_WATERMARK_RATIO",
    "PYTORCH_MPS_LOW_WATERMARK_RATIO",
    "PYTORCH_MPS_FAST_MATH",
    "PYTORCH_MPS_PREFER_METAL",
    "PYTORCH_MPS_DISABLE_PREFILL_ATTENTION",  # other attention kernels
    "PYTORCH_MPS_LOG_PROFILE_INFO",  # profiling and logging slow what they watch
    "PYTORCH_MPS_TRACE_SIGNPOSTS",
    "PYTORCH_DEBUG_MPS_ALLOCATOR",
    "PYTORCH_MPS_METAL_VERSION",
)
RESULT_ENV_VARS = (
    *MPS_ENV_VARS,
    "OMP_NUM_THREADS",
    "MKL_NUM_THREADS",
    "CUDA_VISIBLE_DEVICES",
    "PYTORCH_CUDA_ALLOC_CONF",
    # NVLink multicast kept off on shared multi-GPU hosts (they change what collectives do)
    "NCCL_NVLS_ENABLE",
    "TORCH_SYMM_MEM_DISABLE_MULTICAST",
    "NVSHMEM_DISABLE_NVLS",
)


def os_label() -> str:
    """The OS and its version: "macOS 14.5", "Linux 6.1.0-18-amd64", "Windows 11"."""
    if sys.platform == "darwin":
        return f"macOS {devices.macos_version() or platform.release()}"
    return f"{platform.system() or sys.platform} {platform.release()}".strip()


def torchvision_version() -> str | None:
    """The installed torchvision version, without importing it when package metadata is there."""
    from importlib import metadata

    try:
        return metadata.version("torchvision")
    except metadata.PackageNotFoundError:
        pass
    try:  # a frozen app may lack the metadata
        import torchvision
    except Exception:  # a broken torchvision raises all sorts (e.g. missing compiled ops)
        return None
    return str(torchvision.__version__)


def cuda_gpu_names() -> list[str]:
    """Names of the visible CUDA GPUs ([] when none)."""
    return [d.name for d in devices.cuda_devices() if d.available]


def _cudnn_version() -> int | None:
    try:
        return torch.backends.cudnn.version() if torch.backends.cudnn.is_available() else None
    except RuntimeError:
        return None


def macos_build() -> str:
    """The macOS build ("23F79": MPSGraph and Metal ship with it, so two Macs of one version can differ), or ""."""
    return devices.sysctl("kern.osversion") if sys.platform == "darwin" else ""


def cuda_driver() -> str | None:
    """The NVIDIA driver's version ("580.95.05") through NVML, None without CUDA or NVML."""
    if torch.version.cuda is None or not torch.cuda.is_available():
        return None
    try:
        from .energy.nvml import load_nvml

        nvml = load_nvml()
        nvml.nvmlInit()
        try:
            version = nvml.nvmlSystemGetDriverVersion()
        finally:
            nvml.nvmlShutdown()
    except Exception:  # no NVML library, no driver, an old nvidia-ml-py: not known, not an error
        return None
    return version.decode(errors="replace") if isinstance(version, bytes) else str(version)


def environment() -> dict:
    """Everything a result needs to be trusted and compared elsewhere; plain JSON types only. What can change a
    run's numbers is compared field by field (analysis/contrast.py, ENVIRONMENT)."""
    return {
        "os": os_label(),
        "macos_build": macos_build() or None,
        "platform": platform.platform(),
        "machine": platform.machine(),
        "hostname": platform.node(),
        "cpu": devices.cpu_name(),
        "chip": devices.apple_chip_name(),
        "gpus": cuda_gpu_names(),
        "python": platform.python_version(),
        "torch": str(torch.__version__),
        "torch_git": getattr(torch.version, "git_version", None),
        "torchvision": torchvision_version(),
        "cuda": torch.version.cuda,
        "cudnn": _cudnn_version(),
        "cuda_driver": cuda_driver(),
        "mps_built": bool(torch.backends.mps.is_built()),
        "mps_available": bool(torch.backends.mps.is_available()),
        "threads": torch.get_num_threads(),
        "interop_threads": torch.get_num_interop_threads(),
        "tf32_matmul": bool(torch.backends.cuda.matmul.allow_tf32),
        "tf32_cudnn": bool(torch.backends.cudnn.allow_tf32),
        "env": {name: os.environ[name] for name in RESULT_ENV_VARS if name in os.environ},
        "mpsstudio": __version__,
        # the interpreter that ran (another Python environment: RunConfig.python); its folder's name is what a
        # report shows (never the path: a user name may be in it)
        "python_executable": sys.executable,
        "python_env": os.path.basename(os.path.normpath(sys.prefix)),
    }


def identity() -> dict:
    """Which machine this is, as a result records it (os, CPU, chip, host, and the CUDA GPUs where CUDA is already
    up in this process: never started for it) with its label: for a run that ended before its environment was read,
    so that it is listed under the same machine as the finished runs, not "unknown machine"."""
    gpus = cuda_gpu_names() if torch.cuda.is_available() and torch.cuda.is_initialized() else []
    env: dict = {"os": os_label(), "cpu": devices.cpu_name(), "chip": devices.apple_chip_name(), "gpus": gpus,
                 "hostname": platform.node()}
    env["machine_label"] = machine_label(env)
    env["identity_only"] = True  # nothing of the run's own environment was read (analysis/energy says "not started")
    return env


def machine_label(env: dict) -> str:
    """A short name for the machine a result came from, e.g. "Apple M1 Pro, macOS 14.5"."""
    if env.get("chip"):
        return f"{env['chip']}, {env.get('os', '')}".rstrip(", ")
    gpus = env.get("gpus") or []
    host = env.get("hostname") or "unknown host"
    if gpus:
        count = f"{len(gpus)}x " if len(gpus) > 1 else ""
        return f"{count}{gpus[0]} on {host}"
    system = (env.get("os") or "").split(" ")[0] or "unknown OS"
    return f"{env.get('cpu') or 'unknown CPU'} ({system})"


def doctor(checks: dict | None = None) -> list[tuple[str, str]]:
    """Plain-words rows for `mpsstudio doctor`: what is installed and what can run, with reasons.

    `checks`: the accelerators' functional checks (probe.py) when the caller has them (the window does them in a
    run process); without, they are done here."""
    mps_reason = devices.mps_unavailable_reason()
    rows = [
        ("MPS Studio", __version__),
        ("Python", platform.python_version()),
        ("PyTorch", str(torch.__version__)),
        ("torchvision", torchvision_version() or "not installed"),
        ("System", os_label()),
        ("macOS", devices.macos_version() or "not macOS"),
        ("CPU", devices.cpu_name()),
        ("CPU threads", str(torch.get_num_threads())),
        ("MPS built", "yes" if torch.backends.mps.is_built() else "no: this PyTorch has no MPS support"),
        ("MPS available", "yes" if not mps_reason else f"no: {mps_reason}"),
        *_working_rows(checks),
        ("CUDA", _cuda_row()),
        ("CPU fallback for MPS", _fallback_row()),
    ]
    if devices.apple_chip_name():
        rows.insert(6, ("Apple chip", devices.apple_chip_name()))
    rows += [(f"Set: {name}", os.environ[name]) for name in RESULT_ENV_VARS if name in os.environ]
    return rows


def _working_rows(checks: dict | None) -> list[tuple[str, str]]:
    """One row per accelerator that reports itself available: does it pass the functional check (probe.py)?"""
    from . import probe

    if checks is None:
        checks = probe.check_all(devices.discover_devices())
    rows = []
    for device_id, check in checks.items():
        rows.append((f"{device_id} works", f"yes: {check.detail}" if check.ok else f"NO, {probe.NOT_WORKING}: "
                     f"{check.detail}"))
    return rows


def _cuda_row() -> str:
    reason = devices.cuda_unavailable_reason()
    if reason:
        return f"no: {reason}"
    names = cuda_gpu_names()
    plural = "GPU" if len(names) == 1 else "GPUs"
    return f"{len(names)} {plural}: {', '.join(names)} (CUDA {torch.version.cuda})"


def _fallback_row() -> str:
    return ("set per run (on by default; --no-mps-fallback, or Advanced in the window, turns it off), in the run's "
            "own process: with it, an op MPS lacks runs on the CPU, slowly; without it, the run stops there")


@dataclass
class SetupRow:
    """One line of the setup window: what, its value, ok (True ✓, False ✗, None: a fact, neither) and the fix."""

    name: str
    value: str
    ok: bool | None = None
    fix: str = ""


def setup_rows(checks: dict | None = None) -> list[SetupRow]:
    """The PyTorch setup as the window shows it: doctor()'s facts with ✓/✗ and a fix for each ✗, plus on a Mac
    what changes results (chip and GPU cores, unified memory, power source, Low Power Mode, thermal state)."""
    from . import host, probe

    mac = sys.platform == "darwin"
    if checks is None:
        checks = probe.check_all(devices.discover_devices())
    mps_reason = devices.mps_unavailable_reason()
    rows = [SetupRow("MPS Studio", __version__),
            SetupRow("Python", f"{platform.python_version()} ({platform.machine() or '?'})",
                     False if devices.is_rosetta() else None,
                     devices.mps_fix(mps_reason) if devices.is_rosetta() else ""),
            SetupRow("PyTorch", str(torch.__version__)),
            SetupRow("torchvision", torchvision_version() or "not installed", None if torchvision_version() else False,
                     "" if torchvision_version() else "`python3 -m pip install torchvision` (image datasets and "
                                                      "models need it)."),
            SetupRow("System", os_label())]
    if mac or not mps_reason:
        rows.append(SetupRow("Apple GPU (MPS)", "available" if not mps_reason else f"not available: {mps_reason}",
                             not mps_reason, devices.mps_fix(mps_reason)))
    else:
        rows.append(SetupRow("Apple GPU (MPS)", f"not here: {mps_reason}"))
    for device_id, check in checks.items():
        rows.append(SetupRow(f"{device_id} works", check.detail if check.ok else f"{probe.NOT_WORKING}: {check.detail}",
                             check.ok, "" if check.ok else devices.mps_fix(f"{probe.NOT_WORKING}: {check.detail}")
                             if device_id == "mps" else "Check the driver with `nvidia-smi`; restart the machine if "
                             "it lists no GPU."))
    cuda_reason = devices.cuda_unavailable_reason()
    if not (mac and cuda_reason):  # a Mac has no CUDA: no row saying so
        rows.append(SetupRow("CUDA", _cuda_row(), True if not cuda_reason else None))
    rows.append(SetupRow("CPU", f"{devices.cpu_name()} · {torch.get_num_threads()} threads"))
    if mac:
        rows += _mac_rows(host.conditions())
    rows += [SetupRow(f"Set: {name}", os.environ[name]) for name in RESULT_ENV_VARS if name in os.environ]
    return rows


def _mac_rows(conditions: dict) -> list[SetupRow]:
    """The Mac facts that change results."""
    import psutil

    chip = devices.apple_chip_name() or devices.cpu_name()
    cores = devices.apple_gpu_cores()
    rows = [SetupRow("Chip", chip + (f" · {cores}-core GPU" if cores else "")),
            SetupRow("Unified memory", f"{psutil.virtual_memory().total / 1024**3:.0f} GiB, shared by CPU and GPU")]
    unreadable = str(conditions.get("unreadable") or "")

    def unknown(reader: str) -> str:
        return f"unknown ({reader} could not be read)" if f"{reader} (" in unreadable else "unknown"
    battery = conditions.get("on_battery")
    rows.append(SetupRow("Power source", unknown("the battery state") if battery is None else "battery" if battery
                         else "power adapter",
                         None if battery is None else not battery,
                         "Plug in the power adapter: on battery macOS may slow the chip, and results vary."
                         if battery else ""))
    low = conditions.get("low_power_mode")
    rows.append(SetupRow("Low Power Mode", unknown("pmset -g") if low is None else "on" if low else "off",
                         None if low is None else not low,
                         "Turn Low Power Mode off (System Settings → Battery) before measuring." if low else ""))
    thermal = conditions.get("thermal")
    from .host import thermal_reader

    calm = thermal in ("nominal", "thermal state fair")  # "fair" is slightly elevated, fans running: not throttled
    shown = "fair (slightly elevated: the fans may run; not throttled)" if thermal == "thermal state fair" else thermal
    rows.append(SetupRow("Thermal state", shown or unknown(thermal_reader()[1]),
                         None if thermal is None else calm,
                         "Let the Mac cool down (or give it air) before measuring: a throttled chip runs slower."
                         if thermal and not calm else ""))
    return rows


def setup_report(rows: list[SetupRow]) -> str:
    """The rows as plain text, for Copy Report (an issue, a forum post)."""
    mark = {True: "\u2713", False: "\u2715", None: "\u2022"}  # the window's marks
    lines = [f"{mark[r.ok]} {r.name}: {r.value}" + (f"\n    fix: {r.fix}" if r.fix else "") for r in rows]
    return "MPS Studio · PyTorch setup\n" + "\n".join(lines) + "\n"
