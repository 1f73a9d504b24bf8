"""The model registry: built-in benchmark models and models from a user's own .py file.

Every model is randomly initialised (never downloaded weights) and adapts to the data: channels,
image size and number of classes come from a DataSpec, so any model runs on any dataset it can read.

What a model receives (the contract for built-ins and for user files alike):
  - image data: float32 tensors (N, C, H, W), already normalised on the device by the trainer, at the
    size ``input_spec_for`` returns (the trainer resizes smaller images up to it);
  - token data: int64 tensors (N, L) of token ids below the vocabulary size;
  - it returns logits of shape (N, num_classes).

A user's model is a path to a .py file that defines ``build_model(num_classes, input_shape)``, where
``input_shape`` is the shape of one sample: (C, H, W) for images, (seq_len,) for tokens. It must return
a ``torch.nn.Module`` that follows the contract above. Loading the file runs its code, so front ends
show ``user_model_warning(path)`` once before using one.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Callable

import torch
from torch import nn

from ..basics.errors import UserError
from ..basics.spec import DataSpec
from .user import USER_MODEL_WARNING, build_user_model, user_model_path, user_model_warning

__all__ = ["USER_MODEL_WARNING", "ModelInfo", "build_model", "count_parameters", "get_model_info", "input_spec_for",
           "list_models", "parameter_count", "user_model_warning"]

_IMAGE = "image"
_TOKENS = "tokens"
_IMAGE_OR_TOKENS = "image or tokens"


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


@dataclass(frozen=True)
class _Entry:
    """A registered built-in model: its info and the function that builds it for a spec."""

    info: ModelInfo
    build: Callable[[DataSpec], nn.Module]
    square: bool = False  # torchvision's VisionTransformer only takes square images


# ----------------------------------------------------------------------------- small models


def _build_mlp(spec: DataSpec) -> nn.Module:
    """The 1024-512-256 MLP of the "MPS speed test" article: small enough to show per-op launch cost."""
    return nn.Sequential(
        nn.Flatten(),
        nn.Linear(spec.channels * spec.height * spec.width, 1024),
        nn.ReLU(),
        nn.Linear(1024, 512),
        nn.ReLU(),
        nn.Linear(512, 256),
        nn.ReLU(),
        nn.Linear(256, spec.num_classes),
    )


def _build_mnist_cnn(spec: DataSpec) -> nn.Module:
    """The M1 MNIST article's CNN: conv 64 -> pool -> conv 512 -> pool -> dropout 0.25 -> dense 1024.

    A global max pool (Keras' GlobalMaxPooling2D) sits before the dense layers so that any image size
    of 4 px or more works; at 28x28 it reduces the 7x7x512 map to 512 features.
    """
    return nn.Sequential(
        nn.Conv2d(spec.channels, 64, kernel_size=3, padding=1),
        nn.ReLU(),
        nn.MaxPool2d(2),
        nn.Conv2d(64, 512, kernel_size=3, padding=1),
        nn.ReLU(),
        nn.MaxPool2d(2),
        nn.Dropout(0.25),
        nn.AdaptiveMaxPool2d(1),
        nn.Flatten(),
        nn.Linear(512, 1024),
        nn.ReLU(),
        nn.Linear(1024, spec.num_classes),
    )


# ----------------------------------------------------------------------------- torchvision models


def _adapted_conv(conv: nn.Conv2d, channels: int) -> nn.Conv2d:
    """A copy of ``conv`` (same kernel, stride, padding, bias) that takes ``channels`` input channels."""
    new = nn.Conv2d(
        channels,
        conv.out_channels,
        kernel_size=conv.kernel_size,
        stride=conv.stride,
        padding=conv.padding,
        dilation=conv.dilation,
        groups=conv.groups,
        bias=conv.bias is not None,
        device=conv.weight.device,
        dtype=conv.weight.dtype,
    )
    nn.init.kaiming_normal_(new.weight, mode="fan_out", nonlinearity="relu")  # torchvision's convnet init
    if new.bias is not None:
        nn.init.zeros_(new.bias)
    return new


def _first_conv_path(name: str) -> tuple[str, ...]:
    """Attribute path (in module names) of each torchvision model's first convolution."""
    return {
        "resnet18": ("conv1",),
        "resnet50": ("conv1",),
        "vgg16": ("features", "0"),
        "alexnet": ("features", "0"),
        "mobilenet_v3_small": ("features", "0", "0"),
        "efficientnet_b0": ("features", "0", "0"),
    }[name]


def _torchvision_builder(name: str) -> Callable[[DataSpec], nn.Module]:
    """Builder for a torchvision classification convnet, adapted to the spec's channels and classes."""

    def build(spec: DataSpec) -> nn.Module:
        import torchvision.models

        model = getattr(torchvision.models, name)(weights=None, num_classes=spec.num_classes)
        if spec.channels != 3:
            *parents, last = _first_conv_path(name)
            parent = model
            for attr in parents:
                parent = getattr(parent, attr)
            parent._modules[last] = _adapted_conv(parent._modules[last], spec.channels)
        return model

    return build


def _adapt_vit(model: nn.Module, channels: int) -> nn.Module:
    """Give a torchvision VisionTransformer a patch projection that takes ``channels`` channels."""
    if channels != 3:
        old = model.conv_proj
        model.conv_proj = nn.Conv2d(
            channels, old.out_channels, kernel_size=old.kernel_size, stride=old.stride,
            device=old.weight.device, dtype=old.weight.dtype,
        )
        fan_in = channels * old.kernel_size[0] * old.kernel_size[1]
        nn.init.trunc_normal_(model.conv_proj.weight, std=math.sqrt(1 / fan_in))  # as torchvision does
        nn.init.zeros_(model.conv_proj.bias)
    return model


def _build_vit_b_16(spec: DataSpec) -> nn.Module:
    """ViT-B/16 for square images of spec.height pixels (a multiple of 16)."""
    import torchvision.models

    model = torchvision.models.vit_b_16(weights=None, num_classes=spec.num_classes, image_size=spec.height)
    return _adapt_vit(model, spec.channels)


def _build_vit_tiny(spec: DataSpec) -> nn.Module:
    """A 6-layer, 192-wide ViT with 4 px patches, sized for 28-32 px images."""
    from torchvision.models import VisionTransformer

    model = VisionTransformer(
        image_size=spec.height, patch_size=4, num_layers=6, num_heads=3,
        hidden_dim=192, mlp_dim=768, num_classes=spec.num_classes,
    )
    return _adapt_vit(model, spec.channels)


# ----------------------------------------------------------------------------- sequence models


class _RowsAsSequence(nn.Module):
    """Reads images (N, C, H, W) as sequences of H rows, each row's C*W values projected to ``width``."""

    def __init__(self, channels: int, image_width: int, width: int) -> None:
        super().__init__()
        self.proj = nn.Linear(channels * image_width, width)

    def forward(self, images: torch.Tensor) -> torch.Tensor:
        n, c, h, w = images.shape
        rows = images.permute(0, 2, 1, 3).reshape(n, h, c * w)
        return self.proj(rows)


def _input_embedding(spec: DataSpec, width: int) -> nn.Module:
    """Token embedding for token data, a row projection for image data; both give (N, L, width)."""
    if spec.kind == _TOKENS:
        return nn.Embedding(spec.vocab_size, width)
    return _RowsAsSequence(spec.channels, spec.width, width)


def _sequence_length(spec: DataSpec) -> int:
    return spec.seq_len if spec.kind == _TOKENS else spec.height


class LSTMClassifier(nn.Module):
    """A one-layer LSTM that classifies a sequence from its last hidden state."""

    def __init__(self, spec: DataSpec, hidden: int = 256) -> None:
        super().__init__()
        self.embed = _input_embedding(spec, hidden)
        self.lstm = nn.LSTM(hidden, hidden, num_layers=1, batch_first=True)
        self.head = nn.Linear(hidden, spec.num_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        _, (h_n, _) = self.lstm(self.embed(x))
        return self.head(h_n[-1])


class TransformerClassifier(nn.Module):
    """A BERT-style encoder classifier: embeddings + learned positions, post-norm GELU encoder layers,
    and a tanh pooler over the first token (BERT's [CLS]); no token-type embeddings."""

    def __init__(self, spec: DataSpec, layers: int, width: int, heads: int, ff: int) -> None:
        super().__init__()
        self.embed = _input_embedding(spec, width)
        self.position = nn.Embedding(_sequence_length(spec), width)
        self.embed_norm = nn.LayerNorm(width, eps=1e-12)
        self.dropout = nn.Dropout(0.1)
        layer = nn.TransformerEncoderLayer(
            width, heads, dim_feedforward=ff, dropout=0.1, activation="gelu",
            layer_norm_eps=1e-12, batch_first=True, norm_first=False,
        )
        self.encoder = nn.TransformerEncoder(layer, num_layers=layers, enable_nested_tensor=False)
        self.pooler = nn.Sequential(nn.Linear(width, width), nn.Tanh())
        self.head = nn.Linear(width, spec.num_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.embed(x)
        positions = torch.arange(h.shape[1], device=h.device)
        h = self.dropout(self.embed_norm(h + self.position(positions)))
        h = self.encoder(h)
        return self.head(self.dropout(self.pooler(h[:, 0])))


def _build_transformer(spec: DataSpec) -> nn.Module:
    return TransformerClassifier(spec, layers=4, width=256, heads=4, ff=1024)


def _build_transformer_base(spec: DataSpec) -> nn.Module:
    return TransformerClassifier(spec, layers=12, width=768, heads=12, ff=3072)


# ----------------------------------------------------------------------------- registry

_IMAGENET = DataSpec(_IMAGE, 1000, channels=3, height=224, width=224)
_BERT_TOKENS = DataSpec(_TOKENS, 2, seq_len=128, vocab_size=30522)


def _convnet(name: str, description: str, min_size: int = 32) -> _Entry:
    """A torchvision ImageNet convnet; min_size 32 (their total stride) unless it needs more."""
    info = ModelInfo(name, description, _IMAGE, _IMAGENET, min_image_size=min_size, preferred_image_size=224)
    return _Entry(info, _torchvision_builder(name))


_REGISTRY: dict[str, _Entry] = {
    entry.info.name: entry
    for entry in [
        _Entry(
            ModelInfo("mlp", "Small MLP (1024-512-256) from the 'MPS speed test' article; shows per-step overhead.",
                      _IMAGE, DataSpec(_IMAGE, 10, channels=1, height=32, width=32), preferred_image_size=32),
            _build_mlp,
        ),
        _Entry(
            ModelInfo("mnist_cnn", "Two-layer CNN (64 and 512 filters) from the M1 MNIST benchmark article.",
                      _IMAGE, DataSpec(_IMAGE, 10, channels=1, height=28, width=28), min_image_size=4,
                      preferred_image_size=28),
            _build_mnist_cnn,
        ),
        _convnet("resnet18", "ResNet-18 (11.7M parameters), the classic CIFAR/ImageNet training benchmark."),
        _convnet("resnet50", "ResNet-50 (25.6M parameters), the model of PyTorch's MPS launch figures."),
        _convnet("vgg16", "VGG-16 (138M parameters), heavy convolutions and large dense layers."),
        _convnet("alexnet", "AlexNet (61M parameters), the 2012 ImageNet network.", min_size=63),
        _convnet("mobilenet_v3_small", "MobileNetV3-Small (2.5M parameters), a light mobile network."),
        _convnet("efficientnet_b0", "EfficientNet-B0 (5.3M parameters), depthwise convolutions and SiLU."),
        _Entry(
            ModelInfo("vit_b_16", "Vision Transformer ViT-B/16 (86M parameters), 16x16 pixel patches.",
                      _IMAGE, _IMAGENET, min_image_size=16, image_size_multiple=16, preferred_image_size=224),
            _build_vit_b_16, square=True,
        ),
        _Entry(
            ModelInfo("vit_tiny", "Tiny Vision Transformer (6 layers, width 192, 4x4 patches) for 28-32 px images.",
                      _IMAGE, DataSpec(_IMAGE, 10, channels=3, height=32, width=32), min_image_size=4,
                      image_size_multiple=4, preferred_image_size=32),
            _build_vit_tiny, square=True,
        ),
        _Entry(
            ModelInfo("lstm", "One-layer LSTM (256 units) sequence classifier; reads images row by row.",
                      _IMAGE_OR_TOKENS, DataSpec(_TOKENS, 2, seq_len=128, vocab_size=10000),
                      preferred_image_size=32),
            LSTMClassifier,
        ),
        _Entry(
            ModelInfo("transformer", "Small BERT-style encoder (4 layers, width 256); reads images row by row.",
                      _IMAGE_OR_TOKENS, _BERT_TOKENS, preferred_image_size=32),
            _build_transformer,
        ),
        _Entry(
            ModelInfo("transformer_base", "BERT-base-size encoder (12 layers, width 768, 110M parameters).",
                      _IMAGE_OR_TOKENS, _BERT_TOKENS, preferred_image_size=32),
            _build_transformer_base,
        ),
    ]
}

def list_models() -> list[ModelInfo]:
    """All built-in models, in a stable order from small to large families."""
    return [entry.info for entry in _REGISTRY.values()]


def get_model_info(name: str) -> ModelInfo:
    """Info for a built-in model name, or for a path to a user's .py file (checked, not yet run)."""
    entry = _REGISTRY.get(name.strip().lower())
    if entry is not None:
        return entry.info
    path = user_model_path(name, _unknown_model)
    return ModelInfo(
        name=name,
        description=f"Your model from {path.name} (its build_model(num_classes, input_shape)).",
        input_kind=_IMAGE,
        default_spec=DataSpec(_IMAGE, 10, channels=3, height=32, width=32),
    )


def input_spec_for(name: str, data_spec: DataSpec) -> DataSpec:
    """The spec the model receives once the trainer has resized images up to what the model needs.

    Height and width are raised to min_image_size and rounded up to image_size_multiple; ViTs take
    square images, so both sides become the larger one. Token specs pass through unchanged.
    """
    info = get_model_info(name)
    entry = _REGISTRY.get(info.name)
    if entry is not None:
        _check_kind(info, data_spec)
    if data_spec.kind != _IMAGE:
        return data_spec
    height, width = (_fit_side(side, info) for side in (data_spec.height, data_spec.width))
    if entry is not None and entry.square:
        height = width = max(height, width)
    return replace(data_spec, height=height, width=width)


def input_size_for_folder(name: str, report, image_size: int | None = None) -> tuple[int, int]:
    """(width, height) of the images `name` really gets from a checked folder (a FolderReport) in a run:
    decoded at `image_size`, else the model's preferred size, else the folder's own, then fitted to what the
    model needs (input_spec_for). UserError when the model is unknown."""
    info = get_model_info(name)
    spec = input_spec_for(name, report.spec(image_size or info.preferred_image_size))
    return spec.width, spec.height


def build_model(name: str, data_spec: DataSpec) -> nn.Module:
    """A freshly initialised model for ``data_spec`` (normally the result of ``input_spec_for``)."""
    spec = input_spec_for(name, data_spec)  # a no-op for a spec that already came from it
    entry = _REGISTRY.get(name.strip().lower())
    if entry is None:
        return build_user_model(user_model_path(name, _unknown_model), spec)
    return entry.build(spec)


def count_parameters(model: nn.Module) -> int:
    """Number of parameter values in ``model`` (shared parameters counted once); a lazy module's parameters
    count once its first forward pass has given them a shape (until then they count as 0)."""
    return sum(p.numel() for p in model.parameters() if not nn.parameter.is_lazy(p))


def parameter_count(name: str, data_spec: DataSpec) -> int:
    """Parameters of the model for ``data_spec``; built-ins are built on the meta device, so it is instant.

    A user's model is built normally (on the CPU), since its code may not work on the meta device.
    """
    if name.strip().lower() not in _REGISTRY:
        return count_parameters(build_model(name, data_spec))
    with torch.device("meta"):
        return count_parameters(build_model(name, data_spec))


# ----------------------------------------------------------------------------- helpers


def _fit_side(side: int, info: ModelInfo) -> int:
    """``side`` raised to the model's minimum and rounded up to its multiple."""
    side = max(side, info.min_image_size)
    multiple = info.image_size_multiple
    return -(-side // multiple) * multiple


def _check_kind(info: ModelInfo, spec: DataSpec) -> None:
    """Refuse data the model cannot read (token data for an image-only model)."""
    if spec.kind not in info.input_kind.split(" or "):
        readers = ", ".join(m.name for m in list_models() if spec.kind in m.input_kind)
        raise UserError(
            f"Model '{info.name}' takes {info.input_kind} data but the dataset gives {spec.kind}; "
            f"choose one of {readers} or another dataset."
        )


def _unknown_model(name: str) -> UserError:
    choices = ", ".join(_REGISTRY)
    return UserError(
        f"Unknown model '{name}'; choose one of: {choices} or give the path to a .py file "
        "that defines build_model(num_classes, input_shape)."
    )
