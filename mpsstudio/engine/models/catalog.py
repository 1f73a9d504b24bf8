"""The built-in models as a front end lists them: names, descriptions, the input each takes by default, without torch
(the registry, registry.py, pairs each with the function that builds it). `mpsstudio models` reads this, so it
answers without importing torch."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from ..basics.spec import DataSpec

if TYPE_CHECKING:
    from .user import Declared

IMAGE = "image"
TOKENS = "tokens"
IMAGE_OR_TOKENS = "image or tokens"


@dataclass(frozen=True)
class ModelInfo:
    """What a front end shows about a model and what the data pipeline needs to feed it."""

    name: str
    description: str
    input_kind: str
    default_spec: DataSpec
    min_image_size: int = 1
    image_size_multiple: int = 1
    preferred_image_size: int | None = None
    declared: "Declared | None" = None  # a user's file: what it says of its input (models/user.py)
    folder: bool = False  # a Hugging Face model folder (models/hf_folder.py): its batches are made for its task


_IMAGENET = DataSpec(IMAGE, 1000, channels=3, height=224, width=224)
_BERT_TOKENS = DataSpec(TOKENS, 2, seq_len=128, vocab_size=30522)


def _convnet(name: str, description: str, min_size: int = 32) -> ModelInfo:
    """A torchvision ImageNet convnet; min_size 32 (their total stride) unless it needs more."""
    return ModelInfo(name, description, IMAGE, _IMAGENET, min_image_size=min_size, preferred_image_size=224)


BUILT_IN: tuple[ModelInfo, ...] = (
    ModelInfo("mlp", "Small MLP (1024-512-256) from the 'MPS speed test' article; shows per-step overhead.",
              IMAGE, DataSpec(IMAGE, 10, channels=1, height=32, width=32), preferred_image_size=32),
    ModelInfo("mnist_cnn", "Two-layer CNN (64 and 512 filters) from the M1 MNIST benchmark article.",
              IMAGE, DataSpec(IMAGE, 10, channels=1, height=28, width=28), min_image_size=4, preferred_image_size=28),
    _convnet("resnet18", "ResNet-18 (11.7M parameters), the classic CIFAR/ImageNet training benchmark."),
    _convnet("resnet50", "ResNet-50 (25.6M parameters), the model of PyTorch's MPS launch figures."),
    _convnet("vgg16", "VGG-16 (138M parameters), heavy convolutions and large dense layers."),
    _convnet("alexnet", "AlexNet (61M parameters), the 2012 ImageNet network.", min_size=63),
    _convnet("mobilenet_v3_small", "MobileNetV3-Small (2.5M parameters), a light mobile network."),
    _convnet("efficientnet_b0", "EfficientNet-B0 (5.3M parameters), depthwise convolutions and SiLU."),
    ModelInfo("vit_b_16", "Vision Transformer ViT-B/16 (86M parameters), 16x16 pixel patches.",
              IMAGE, _IMAGENET, min_image_size=16, image_size_multiple=16, preferred_image_size=224),
    ModelInfo("vit_tiny", "Tiny Vision Transformer (6 layers, width 192, 4x4 patches) for 28-32 px images.",
              IMAGE, DataSpec(IMAGE, 10, channels=3, height=32, width=32), min_image_size=4, image_size_multiple=4,
              preferred_image_size=32),
    ModelInfo("lstm", "One-layer LSTM (256 units) sequence classifier; reads images row by row.",
              IMAGE_OR_TOKENS, DataSpec(TOKENS, 2, seq_len=128, vocab_size=10000), preferred_image_size=32),
    ModelInfo("transformer", "Small BERT-style encoder (4 layers, width 256); reads images row by row.",
              IMAGE_OR_TOKENS, _BERT_TOKENS, preferred_image_size=32),
    ModelInfo("transformer_base", "BERT-base-size encoder (12 layers, width 768, 110M parameters).",
              IMAGE_OR_TOKENS, _BERT_TOKENS, preferred_image_size=32),
)
CONVNETS = ("resnet18", "resnet50", "vgg16", "alexnet", "mobilenet_v3_small", "efficientnet_b0")
SQUARE = ("vit_b_16", "vit_tiny")  # torchvision's VisionTransformer only takes square images



# The built-ins written once more in MLX (models/mlx_twins.py): the question's models (PyTorch or MLX?)
MLX_TWINS = ("mlp", "mnist_cnn", "resnet18", "transformer")


def mlx_twin_reason(name: str, options: dict | None = None) -> str:
    """Why `name` cannot run in MLX ("" where it can): a built-in without a twin, a model folder mlx-lm cannot run
    with the run's `options` (models/mlx_lm_folder.plan_reason). A model file is checked when its build_mlx_model is
    loaded (a run's process)."""
    from .hf_folder import is_model_folder

    if is_model_folder(name):
        from .mlx_lm_folder import plan_reason

        return plan_reason(name, options or {})
    key = name.strip().lower()
    if key in MLX_TWINS or key.endswith(".py"):
        return ""
    return (f"{name} has no MLX twin; MLX runs take {', '.join(MLX_TWINS)}, or a model file that defines "
            "build_mlx_model(num_classes, input_shape) beside build_model")
