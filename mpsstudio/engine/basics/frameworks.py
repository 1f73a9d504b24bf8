"""The frameworks a run can train in, and their words (no torch, no MLX: front ends read runs without either)."""

from __future__ import annotations

from .errors import UserError

FRAMEWORKS = ("torch", "mlx")
FRAMEWORK_WORDS = {"torch": "PyTorch", "mlx": "MLX"}
# the extra installs mlx on a Mac (Metal) and mlx[cpu] on Linux (MLX's CPU backend; its CUDA build is mlx[cuda13])
INSTALL_MLX = "install it with pip install 'mpsstudio[mlx]'"


def framework_words(framework: str) -> str:
    """"PyTorch", "MLX" (an unknown name as it is)."""
    return FRAMEWORK_WORDS.get(framework, str(framework))


def mlx_device_words(device: str) -> str:
    """MLX's name for a run's device: its "cpu", or its "gpu" (Metal on a Mac, CUDA where MLX's CUDA build is)."""
    return "cpu" if device == "cpu" else "gpu"


def run_label(framework: str, device: str, always: bool = False, quantize=None) -> str:
    """"MLX · gpu", "MLX · cpu", "MLX · gpu · 4-bit" (`quantize`: the bits of its weights); a PyTorch run is its
    device ("mps"), or "PyTorch · mps" where frameworks are compared (`always`)."""
    if framework == "mlx":
        return f"MLX \u00b7 {mlx_device_words(device)}" + (f" \u00b7 {quantize}-bit" if quantize in (4, 8) else "")
    return f"PyTorch \u00b7 {device}" if always else device


def quantize_words(config) -> str:
    """" with 4-bit weights" for an MLX run whose weights mlx-lm quantized ("" otherwise)."""
    bits = config.options.get("quantize") if isinstance(config.options, dict) else None
    return f" with {bits}-bit weights" if config.framework == "mlx" and bits in (4, 8) else ""


def check_mlx(config) -> None:
    """What an MLX run (a RunConfig) cannot be: PyTorch's own settings have no MLX counterpart here; UserError."""
    torch_only = [(config.is_script, "a training script trains in the framework it imports"),
                  (config.distributed, "runs on several GPUs are PyTorch's DDP"),
                  (config.channels_last, "channels_last is PyTorch's memory format (MLX keeps images channels-last "
                                       "always)"),
                  (config.tf32_conv and not config.tf32, "TF32 in convolutions only is a PyTorch setting for CUDA "
                   "(--tf32 turns on MLX's TF32-class fp32 products: MLX_ENABLE_TF32=1)"),
                  (config.resident, "'resident' keeps PyTorch tensors on the device"),
                  (config.accumulate > 1, "gradient accumulation is PyTorch's loop here"),
                  (config.early_stop_patience is not None or config.keep_best,
                   "early stopping and the best epoch are PyTorch's loop here"),
                  (config.python is not None, "another Python environment runs PyTorch only")]
    why = next((words for hit, words in torch_only if hit), None)
    if why:
        raise UserError(f"MLX runs cannot take this setting: {why}; drop it, or run PyTorch alone "
                        "(--framework torch).")
