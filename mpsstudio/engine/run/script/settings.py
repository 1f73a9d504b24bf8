"""What a script trains with, read from PyTorch at its first measured step, never the engine's defaults: its
optimizer's class and learning rate (from the optimizer hook), autocast's dtype at the model's call, the weights'
dtype, TF32 and cuDNN's flags as the script left them, whether the model is compiled (torch.compile's module) and
in channels_last. What cannot be seen stays None: "not known"."""

from __future__ import annotations

import math

import torch

from ...basics.config import RunConfig

_PRECISION = {torch.bfloat16: "bf16", torch.float16: "fp16", torch.float32: "fp32"}


def flags() -> dict:
    """TF32 and cuDNN's switches as they are now (the script may have set them)."""
    out: dict[str, bool | str] = {"tf32_matmul": bool(torch.backends.cuda.matmul.allow_tf32),
           "tf32_cudnn": bool(torch.backends.cudnn.allow_tf32),
           "cudnn_benchmark": bool(torch.backends.cudnn.benchmark)}
    try:
        out["matmul_precision"] = torch.get_float32_matmul_precision()
    except (AttributeError, RuntimeError):
        pass
    return out


def learning_rate(optimizer) -> float | None:
    """The optimizer's learning rate now (its first group's: a scheduler changes it step by step), None if unreadable."""
    try:
        value = float(optimizer.param_groups[0]["lr"])
    except (AttributeError, IndexError, KeyError, TypeError, ValueError, RuntimeError):
        return None
    return value if math.isfinite(value) and value >= 0 else None


def seen(optimizers: list, model: torch.nn.Module | None, model_input: torch.Tensor | None,
         autocast: tuple[bool, torch.dtype | None] | None, switches: dict) -> dict:
    """The script's settings as plain values (JSON), from what the counter saw at the first measured step."""
    out: dict = dict(switches)
    if optimizers:
        out["optimizer"] = "+".join(type(o).__name__ for o in optimizers)[:80]
        if out.get("lr") is None:  # read at the first measured step where it could be (runner.measuring)
            out["lr"] = learning_rate(optimizers[0])
    if autocast is not None:
        enabled, dtype = autocast
        out["autocast"] = (_PRECISION.get(dtype, str(dtype).replace("torch.", "")) if dtype is not None
                           else None) if enabled else None
    if model is not None:
        weights = next((p.dtype for p in model.parameters() if p.dtype.is_floating_point), None)
        out["weights"] = str(weights).replace("torch.", "") if weights is not None else None
        out["compiled"] = hasattr(model, "_orig_mod") and type(model).__name__ == "OptimizedModule"
    if model_input is not None and model_input.dim() == 4 and model_input.dtype.is_floating_point:
        out["channels_last"] = bool(model_input.is_contiguous(memory_format=torch.channels_last)
                                    and not model_input.is_contiguous())
    return out


def precision(found: dict) -> str | None:
    """fp32, bf16 or fp16 as the run's precision: autocast's dtype when it was on, else the weights'; None when
    neither was seen (or the weights are another dtype)."""
    if "autocast" in found and found["autocast"]:
        return found["autocast"] if found["autocast"] in ("bf16", "fp16") else None
    weights = found.get("weights")
    return {"bfloat16": "bf16", "float16": "fp16", "float32": "fp32"}.get(weights) if weights else None


def changes(config: RunConfig, found: dict) -> dict:
    """What the run's config says the script used: its optimizer, learning rate, precision, TF32 (both switches on,
    or convolutions only), torch.compile and channels_last; None where not seen (a script run's config has no
    defaults of ours)."""
    name = found.get("optimizer")
    cuda = config.device.startswith("cuda")
    tf32 = bool(cuda and found.get("tf32_matmul") and found.get("tf32_cudnn"))
    return {"optimizer": name.lower() if isinstance(name, str) else None, "lr": found.get("lr"),
            "precision": precision(found), "tf32": tf32, "tf32_conv": bool(cuda and found.get("tf32_cudnn") and not tf32),
            "compile": bool(found.get("compiled")), "channels_last": bool(found.get("channels_last"))}


def words(found: dict, device: str) -> list[str]:
    """The settings as a person reads them ("optimizer AdamW, lr 0.0006", "bf16 autocast", ...)."""
    out = []
    if found.get("optimizer"):
        lr = found.get("lr")
        out.append(f"optimizer {found['optimizer']}" + (f", lr {lr:g}" if isinstance(lr, (int, float)) else ""))
    else:
        out.append("optimizer not known")
    if "autocast" in found:
        out.append(f"{found['autocast']} autocast" if found["autocast"] else "no autocast")
    if found.get("weights"):
        out.append(f"weights in {found['weights']}")
    if device.startswith("cuda"):
        matmul, cudnn = found.get("tf32_matmul"), found.get("tf32_cudnn")
        if matmul and cudnn:
            out.append("TF32 on (matrix products and convolutions)")
        elif cudnn:
            out.append("TF32 in convolutions only (PyTorch's default)")
        elif matmul:
            out.append("TF32 in matrix products only")
        else:
            out.append("TF32 off")
        if found.get("cudnn_benchmark"):
            out.append("cuDNN benchmark on")
    if found.get("compiled"):
        out.append("torch.compile")
    if found.get("channels_last"):
        out.append("channels_last")
    return out
