"""The frameworks a run can train in, and their words (no torch, no MLX: front ends read runs without either)."""

from __future__ import annotations

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


def run_label(framework: str, device: str, always: bool = False) -> str:
    """"MLX · gpu", "MLX · cpu"; a PyTorch run is its device ("mps"), or "PyTorch · mps" where frameworks are compared
    (`always`)."""
    if framework == "mlx":
        return f"MLX \u00b7 {mlx_device_words(device)}"
    return f"PyTorch \u00b7 {device}" if always else device
