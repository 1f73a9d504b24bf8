"""The built-in models that matter for "PyTorch or MLX?" written once more in MLX (`mlx.nn`), layer for layer and name
for name the same as architectures.py's, so that a PyTorch model's initial weights move across by name
(`transfer`); and a user's model file's own `build_mlx_model(num_classes, input_shape)`.

Layouts: MLX convolutions take channels-last inputs and keep weights (out, *kernel, in) (PyTorch: channels first, (out,
in, *kernel); a transposed convolution's (in, out, *kernel)): `weight_layouts` converts each; a twin says which image
layout it takes (`input_layout`: "nhwc" for the convnets, "nchw" where no convolution reads the image: the MLP
flattens it, the transformer reads it row by row, both in PyTorch's order). Imported only where MLX runs (a run's
process): MLX is optional (`mpsstudio[mlx]`).
"""

from __future__ import annotations

import math
from pathlib import Path

import mlx.core as mx
import mlx.nn as nn
from typing import Any

from mlx.utils import tree_flatten

from ..basics.errors import UserError
from ..basics.formatting import error_line
from ..basics.spec import DataSpec
from .catalog import mlx_twin_reason



class Flatten(nn.Module):
    def __call__(self, x):
        return x.reshape(x.shape[0], -1)


class GlobalMaxPool(nn.Module):
    """AdaptiveMaxPool2d(1) of NHWC maps: (N, C)."""

    def __call__(self, x):
        return x.max(axis=(1, 2))


def build_mlp(spec: DataSpec) -> nn.Module:
    model = nn.Sequential(Flatten(), nn.Linear(spec.channels * spec.height * spec.width, 1024), nn.ReLU(),
                          nn.Linear(1024, 512), nn.ReLU(), nn.Linear(512, 256), nn.ReLU(),
                          nn.Linear(256, spec.num_classes))
    model.input_layout = "nchw"
    return model


def build_mnist_cnn(spec: DataSpec) -> nn.Module:
    model = nn.Sequential(nn.Conv2d(spec.channels, 64, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2, 2),
                          nn.Conv2d(64, 512, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2, 2), nn.Dropout(0.25),
                          GlobalMaxPool(), Flatten(), nn.Linear(512, 1024), nn.ReLU(), nn.Linear(1024, spec.num_classes))
    model.input_layout = "nhwc"
    return model


class BasicBlock(nn.Module):
    """torchvision's BasicBlock: two 3x3 convolutions with batch norm, and a 1x1 downsample where the shape changes."""

    def __init__(self, inplanes: int, planes: int, stride: int) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(inplanes, planes, 3, stride=stride, padding=1, bias=False)
        self.bn1 = nn.BatchNorm(planes)
        self.conv2 = nn.Conv2d(planes, planes, 3, padding=1, bias=False)
        self.bn2 = nn.BatchNorm(planes)
        if stride != 1 or inplanes != planes:
            self.downsample = nn.Sequential(nn.Conv2d(inplanes, planes, 1, stride=stride, bias=False),
                                            nn.BatchNorm(planes))

    def __call__(self, x):
        out = nn.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        identity = self.downsample(x) if "downsample" in self else x
        return nn.relu(out + identity)


class ResNet18(nn.Module):
    """torchvision's resnet18 (weights=None) in MLX: the same layers under the same names."""

    input_layout = "nhwc"

    def __init__(self, channels: int, num_classes: int) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(channels, 64, 7, stride=2, padding=3, bias=False)
        self.bn1 = nn.BatchNorm(64)
        self.maxpool = nn.MaxPool2d(3, stride=2, padding=1)
        inplanes = 64
        for i, (planes, stride) in enumerate(((64, 1), (128, 2), (256, 2), (512, 2)), start=1):
            setattr(self, f"layer{i}", [BasicBlock(inplanes, planes, stride), BasicBlock(planes, planes, 1)])
            inplanes = planes
        self.fc = nn.Linear(512, num_classes)

    def __call__(self, x):
        x = self.maxpool(nn.relu(self.bn1(self.conv1(x))))
        for i in range(1, 5):
            for block in self[f"layer{i}"]:
                x = block(x)
        return self.fc(x.mean(axis=(1, 2)))


class RowsAsSequence(nn.Module):
    """Images (N, C, H, W) as sequences of H rows, each row's C*W values projected (architectures._RowsAsSequence)."""

    def __init__(self, channels: int, image_width: int, width: int) -> None:
        super().__init__()
        self.proj = nn.Linear(channels * image_width, width)

    def __call__(self, images):
        n, c, h, w = images.shape
        return self.proj(images.transpose(0, 2, 1, 3).reshape(n, h, c * w))


class SelfAttention(nn.Module):
    """PyTorch's MultiheadAttention (batch first): one packed input projection (`in_proj_weight`, `in_proj_bias`),
    attention weights dropped out in training, then `out_proj`."""

    def __init__(self, width: int, heads: int, dropout: float) -> None:
        super().__init__()
        self.heads = heads
        scale = math.sqrt(1 / width)  # (its values come from PyTorch's by transfer)
        self.in_proj_weight = mx.random.uniform(-scale, scale, (3 * width, width))
        self.in_proj_bias = mx.zeros((3 * width,))
        self.out_proj = nn.Linear(width, width)
        self.dropout = nn.Dropout(dropout)

    def __call__(self, x):
        n, length, width = x.shape
        qkv = x @ self.in_proj_weight.T + self.in_proj_bias
        q, k, v = (t.reshape(n, length, self.heads, -1).transpose(0, 2, 1, 3) for t in mx.split(qkv, 3, axis=-1))
        scores = (q * (q.shape[-1] ** -0.5)) @ k.transpose(0, 1, 3, 2)
        weights = self.dropout(mx.softmax(scores, axis=-1))
        out = (weights @ v).transpose(0, 2, 1, 3).reshape(n, length, width)
        return self.out_proj(out)


class EncoderLayer(nn.Module):
    """PyTorch's TransformerEncoderLayer (post-norm, GELU, batch first) under its own names."""

    def __init__(self, width: int, heads: int, ff: int, dropout: float) -> None:
        super().__init__()
        self.self_attn = SelfAttention(width, heads, dropout)
        self.linear1 = nn.Linear(width, ff)
        self.linear2 = nn.Linear(ff, width)
        self.norm1 = nn.LayerNorm(width, eps=1e-12)
        self.norm2 = nn.LayerNorm(width, eps=1e-12)
        self.dropout = nn.Dropout(dropout)
        self.dropout1 = nn.Dropout(dropout)
        self.dropout2 = nn.Dropout(dropout)

    def __call__(self, x):
        x = self.norm1(x + self.dropout1(self.self_attn(x)))
        return self.norm2(x + self.dropout2(self.linear2(self.dropout(nn.gelu(self.linear1(x))))))


class Encoder(nn.Module):
    def __init__(self, layers: int, *args) -> None:
        super().__init__()
        self.layers = [EncoderLayer(*args) for _ in range(layers)]

    def __call__(self, x):
        for layer in self.layers:
            x = layer(x)
        return x


class TransformerClassifier(nn.Module):
    """architectures.TransformerClassifier in MLX: embeddings and learned positions, post-norm encoder layers, a tanh
    pooler over the first token."""

    input_layout = "nchw"

    def __init__(self, spec: DataSpec, layers: int, width: int, heads: int, ff: int) -> None:
        super().__init__()
        tokens = spec.kind == "tokens"
        self.embed = nn.Embedding(spec.vocab_size, width) if tokens else RowsAsSequence(spec.channels, spec.width,
                                                                                          width)
        self.position = nn.Embedding(spec.seq_len if tokens else spec.height, width)
        self.embed_norm = nn.LayerNorm(width, eps=1e-12)
        self.dropout = nn.Dropout(0.1)
        self.encoder = Encoder(layers, width, heads, ff, 0.1)
        self.pooler = nn.Sequential(nn.Linear(width, width), nn.Tanh())
        self.head = nn.Linear(width, spec.num_classes)

    def __call__(self, x):
        h = self.embed(x)
        h = self.dropout(self.embed_norm(h + self.position(mx.arange(h.shape[1]))))
        h = self.encoder(h)
        return self.head(self.dropout(self.pooler(h[:, 0])))


_BUILDERS = {"mlp": build_mlp, "mnist_cnn": build_mnist_cnn,
             "resnet18": lambda spec: ResNet18(spec.channels, spec.num_classes),
             "transformer": lambda spec: TransformerClassifier(spec, layers=4, width=256, heads=4, ff=1024)}


def build_twin(name: str, spec: DataSpec, user_function) -> nn.Module:
    """The MLX twin of model `name` for `spec` (random weights: `transfer` gives it PyTorch's); `user_function(path,
    name)` reads a model file's function (models/user.py). UserError where there is none."""
    key = name.strip().lower()
    if key in _BUILDERS:
        return _BUILDERS[key](spec)
    why = mlx_twin_reason(name)
    if why:
        raise UserError(why + ".")
    build = user_function(Path(name).expanduser(), "build_mlx_model")
    if build is None:
        raise UserError(f"{Path(name).name} has no build_mlx_model(num_classes, input_shape); define one that returns "
                        "the same model as an mlx.nn.Module, its layers named as build_model's, to run it in MLX.")
    try:
        model = build(spec.num_classes, spec.sample_shape)
    except (Exception, SystemExit) as error:
        raise UserError(f"build_mlx_model in '{Path(name).name}' raised {error_line(error, 200)}; fix the function "
                        "and try again.") from error
    if not isinstance(model, nn.Module):
        raise UserError(f"build_mlx_model in '{Path(name).name}' returned {type(model).__name__}, not an "
                        "mlx.nn.Module; return the model.")
    return model


def layout_of(model: nn.Module) -> str:
    """The image layout a twin takes: its `input_layout` ("nchw" or "nhwc"; MLX's own NHWC unless it says)."""
    layout = getattr(model, "input_layout", "nhwc")
    return layout if layout in ("nchw", "nhwc") else "nhwc"


# ---------------------------------------------------------------- names and layouts


def sequential_prefixes(model: nn.Module) -> list[str]:
    """The names of the model's nn.Sequential modules: MLX names their layers "<name>.layers.<i>" where PyTorch says
    "<name>.<i>"."""
    return [name for name, module in model.named_modules() if isinstance(module, nn.Sequential)]


def torch_name(mlx_name: str, prefixes: list[str]) -> str:
    """The PyTorch name of an MLX parameter or module ("pooler.layers.0.weight" -> "pooler.0.weight")."""
    for prefix in sorted(prefixes, key=len, reverse=True):
        head = f"{prefix}.layers" if prefix else "layers"
        if mlx_name == head or mlx_name.startswith(head + "."):
            rest = mlx_name[len(head) + 1:]
            return f"{prefix}.{rest}" if prefix and rest else (rest or prefix)
    return mlx_name


def weight_layouts(torch_model) -> dict[str, tuple[int, ...]]:
    """The axes each convolution weight of a PyTorch model takes in MLX (its permutation, by parameter name): MLX keeps
    a convolution's weight as (out, *kernel, in) where PyTorch's is (out, in, *kernel) (Conv1d/2d/3d: OIK -> OKI,
    OIHW -> OHWI, OIDHW -> ODHWI) and a transposed convolution's (in, out, *kernel) (ConvTranspose1d/2d/3d ->
    (out, *kernel, in)). UserError for a layer MLX has no such layout for (a grouped transposed convolution)."""
    import torch

    conv, transposed = torch.nn.modules.conv._ConvNd, torch.nn.modules.conv._ConvTransposeNd
    layouts: dict[str, tuple[int, ...]] = {}
    for name, module in torch_model.named_modules():
        weight = getattr(module, "weight", None)
        if not isinstance(module, conv) or not isinstance(weight, torch.Tensor):
            continue
        key, nd = f"{name}.weight" if name else "weight", weight.ndim
        if isinstance(module, transposed):
            if module.groups != 1:
                raise UserError(f"{name or 'the model'} ({type(module).__name__}, groups={module.groups}) has no MLX "
                                "layout here: a grouped transposed convolution's weight cannot be converted; use "
                                "groups=1 or run it in PyTorch alone (--framework torch).")
            layouts[key] = (1, *range(2, nd), 0)  # (I, O, *K) -> (O, *K, I)
        else:
            layouts[key] = (0, *range(2, nd), 1)  # (O, I, *K) -> (O, *K, I)
    return layouts


def to_mlx_layout(name: str, value, layouts: dict[str, tuple[int, ...]]):
    """A PyTorch tensor's values in MLX's layout (numpy): a convolution's weight permuted as `layouts` says
    (weight_layouts), everything else as it is."""
    array = value.detach().cpu().float().numpy() if hasattr(value, "detach") else value
    order = layouts.get(name)
    if order is not None and array.ndim == len(order):
        array = array.transpose(order)
    return array


def transfer(torch_model, twin: nn.Module) -> int:
    """Copy the PyTorch model's parameters and buffers into the twin by name and layout; the count of values copied.
    UserError naming the first name that has no counterpart or whose shape differs (a twin that is not the same
    model is never run)."""
    prefixes = sequential_prefixes(twin)
    layouts = weight_layouts(torch_model)
    ours = {torch_name(name, prefixes): (name, value) for name, value in flat(twin.parameters())}
    theirs = {name: value for name, value in torch_model.state_dict().items() if not name.endswith("num_batches_tracked")}
    missing = [n for n in theirs if n not in ours]
    extra = [n for n in ours if n not in theirs]
    if missing or extra:
        first = (f"PyTorch's {missing[0]} has no counterpart in the MLX model" if missing else
                 f"the MLX model's {ours[extra[0]][0]} has no counterpart in PyTorch's")
        raise UserError(f"The MLX twin is not the same model: {first} ({len(missing)} PyTorch names and {len(extra)} "
                        "MLX names unmatched); name the MLX layers as build_model's.")
    modules = dict(torch_model.named_modules())
    pairs, count = [], 0
    for name, (mlx_name, current) in ours.items():
        array = to_mlx_layout(name, theirs[name], layouts)
        if tuple(array.shape) != tuple(current.shape):
            owner = modules.get(name.rpartition(".")[0])
            kind = type(owner).__name__ if owner is not None else "parameter"
            expected = (f"MLX's {_LAYOUT_WORDS.get(len(array.shape), 'channels-last')} layout expected" if name in layouts
                        else f"no layout conversion is known for a {kind}'s {array.ndim}-D {name.rpartition('.')[2]}, "
                             "so the same shape is expected (conversions: Conv1d/2d/3d, ConvTranspose1d/2d/3d)")
            raise UserError(f"The MLX twin is not the same model: {name} is {tuple(theirs[name].shape)} in PyTorch "
                            f"and {tuple(current.shape)} in MLX ({expected}); give the layer the same shape.")
        pairs.append((mlx_name, mx.array(array).astype(current.dtype)))
        count += array.size
    twin.load_weights(pairs, strict=True)
    mx.eval(twin.parameters())
    return count


_LAYOUT_WORDS = {3: "OKI", 4: "OHWI", 5: "ODHWI"}


def parameter_count(twin: nn.Module) -> int:
    """Trainable values of the twin (as PyTorch counts its parameters: batch norm's running statistics are not)."""
    return sum(v.size for _, v in flat(twin.trainable_parameters()))


def flat(tree) -> list[tuple[str, Any]]:
    """An MLX tree of arrays as (dotted name, array) pairs (mlx.utils.tree_flatten)."""
    pairs: Any = tree_flatten(tree)
    return list(pairs)
