"""Which precisions a device runs: fp32 everywhere, fp16 and bf16 autocast where the device and this PyTorch support
them (checked, never assumed: CPU autocast is probed, emulated bf16 on a pre-Ampere GPU is refused), and whether fp16
training has a GradScaler there."""

from __future__ import annotations

import re
import warnings
from functools import lru_cache

import torch

from ..basics.config import PRECISIONS
from .devices import Device, macos_at_least, macos_version, torch_at_least


def precision_unsupported_reason(device: Device, precision: str) -> str:
    """Why this precision (fp32, or fp16/bf16 autocast) cannot run on the device, or "" when it can."""
    if precision not in PRECISIONS:
        return f"unknown precision {precision!r}; choose fp32, fp16 or bf16"
    if precision == "fp32":
        return ""
    if device.kind == "mps":
        return _mps_precision_reason(precision)
    if device.kind == "cuda":
        return _cuda_precision_reason(device, precision)
    if not _cpu_autocast_works(precision):
        return f"{precision} autocast does not run on the CPU with PyTorch {torch.__version__}"
    return ""


# Apple GPUs before M3 (Apple GPU families 7 and 8) have no bfloat16 arithmetic: Metal converts bf16 to fp32 to
# compute (transformers' is_torch_bf16_gpu_available says "Emulated in software by Metal using fp32 for hardware without
# native support (like M1/M2)"); torch's MPS gates bf16 on macOS 14 alone (MPSDevice.h's AppleGPUFamily 7 = M1,
# 8 = M2). Said, not refused: it runs, and saves memory; its speed is the measurement's to show (not measured here).
EMULATED_BF16_CHIPS = re.compile(r"\bApple M[12]\b")
MPS_BF16_EMULATED = ("bf16 on this {chip}'s GPU is emulated: M1 and M2 GPUs have no bfloat16 arithmetic, so Metal "
                     "converts it to fp32 to compute; expect bf16's memory saving, not a speedup from the arithmetic")


def precision_caveat(device: Device, precision: str | None) -> str:
    """What a precision a device runs means there beyond "supported" ("" where nothing): bf16 emulated on an M1/M2."""
    chip = device.name or ""
    if device.kind == "mps" and precision == "bf16" and EMULATED_BF16_CHIPS.search(chip):
        return MPS_BF16_EMULATED.format(chip=chip)
    return ""


def _mps_precision_reason(precision: str) -> str:
    if precision == "fp16":
        if not torch_at_least(2, 5):
            return f"fp16 autocast on MPS needs PyTorch 2.5 or newer (this is {torch.__version__})"
        return ""
    missing = []
    if not torch_at_least(2, 6):
        missing.append(f"PyTorch 2.6 or newer (this is {torch.__version__})")
    if not macos_at_least(14):
        missing.append(f"macOS 14 or newer (this Mac runs {macos_version() or 'no macOS'})")
    return "bf16 autocast on MPS needs " + " and ".join(missing) if missing else ""


def _cuda_precision_reason(device: Device, precision: str) -> str:
    if precision == "bf16":
        # Emulated bf16 on pre-Ampere GPUs runs, but slowly; a benchmark must not present it as supported.
        with torch.cuda.device(device.index):
            try:
                native = torch.cuda.is_bf16_supported(including_emulation=False)
            except TypeError:  # torch without the including_emulation argument
                native = torch.cuda.is_bf16_supported()
        if not native:
            return f"{device.name or device.id} has no native bf16 (an Ampere or newer GPU is needed)"
    return ""


@lru_cache(maxsize=None)
def _cpu_autocast_works(precision: str) -> bool:
    """Probe with a tiny matmul: unsupported CPU autocast dtypes only warn and fall back to fp32."""
    dtype = torch.float16 if precision == "fp16" else torch.bfloat16
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            with torch.autocast("cpu", dtype=dtype):
                out = torch.ones(2, 2) @ torch.ones(2, 2)
    except (RuntimeError, TypeError, ValueError):
        return False
    return out.dtype == dtype


def grad_scaler_supported(device: Device) -> bool:
    """Whether torch.amp.GradScaler works for the device (fp16 training needs it to avoid underflow)."""
    if device.kind == "cuda":
        return True
    if device.kind == "mps":
        return torch_at_least(2, 8)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return bool(torch.amp.GradScaler("cpu").is_enabled())
    except (RuntimeError, TypeError, ValueError, AttributeError):
        return False
