"""The built-in architectures, each built for a DataSpec (channels, image size, classes) with random weights: the
MLP and CNN of the MPS articles, torchvision's ImageNet networks with their first convolution adapted to the
channels, Vision Transformers, and sequence classifiers (LSTM, a BERT-style encoder) that read tokens or images
row by row. registry.py names them and says what each takes."""

from __future__ import annotations

import math
from typing import Callable

import torch
from torch import nn

from ..basics.spec import DataSpec

_IMAGE = "image"
_TOKENS = "tokens"

# ----------------------------------------------------------------------------- small models


def build_mlp(spec: DataSpec) -> nn.Module:
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


def build_mnist_cnn(spec: DataSpec) -> nn.Module:
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


def _pair(value) -> tuple[int, int]:
    """A Conv2d's kernel, stride or dilation as the (height, width) pair it is."""
    return (int(value[0]), int(value[1])) if isinstance(value, tuple) else (int(value), int(value))


def _adapted_conv(conv: nn.Conv2d, channels: int) -> nn.Conv2d:
    """A copy of ``conv`` (same kernel, stride, padding, bias) that takes ``channels`` input channels."""
    new = nn.Conv2d(
        channels,
        conv.out_channels,
        kernel_size=_pair(conv.kernel_size),
        stride=_pair(conv.stride),
        padding=conv.padding if isinstance(conv.padding, str) else _pair(conv.padding),
        dilation=_pair(conv.dilation),
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


def torchvision_builder(name: str) -> Callable[[DataSpec], nn.Module]:
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
        if not isinstance(old, nn.Conv2d):
            raise TypeError("a VisionTransformer's conv_proj is a Conv2d")
        kernel = _pair(old.kernel_size)
        new = nn.Conv2d(channels, old.out_channels, kernel_size=kernel, stride=_pair(old.stride),
                        device=old.weight.device, dtype=old.weight.dtype)
        fan_in = channels * kernel[0] * kernel[1]
        nn.init.trunc_normal_(new.weight, std=math.sqrt(1 / fan_in))  # as torchvision does
        if new.bias is not None:
            nn.init.zeros_(new.bias)
        model.conv_proj = new
    return model


def build_vit_b_16(spec: DataSpec) -> nn.Module:
    """ViT-B/16 for square images of spec.height pixels (a multiple of 16)."""
    import torchvision.models

    model = torchvision.models.vit_b_16(weights=None, num_classes=spec.num_classes, image_size=spec.height)
    return _adapt_vit(model, spec.channels)


def build_vit_tiny(spec: DataSpec) -> nn.Module:
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


def build_transformer(spec: DataSpec) -> nn.Module:
    return TransformerClassifier(spec, layers=4, width=256, heads=4, ff=1024)


def build_transformer_base(spec: DataSpec) -> nn.Module:
    return TransformerClassifier(spec, layers=12, width=768, heads=12, ff=3072)
