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

from dataclasses import dataclass, replace
from typing import Callable

import torch
from torch import nn

from ..basics.errors import UserError
from ..basics.spec import DataSpec
from . import architectures
from .hf_folder import is_model_folder, read_folder
from .catalog import BUILT_IN, CONVNETS, IMAGE, IMAGE_OR_TOKENS, SQUARE, TOKENS, ModelInfo
from .user import (USER_MODEL_WARNING, Declared, build_user_model, declared, user_function, user_model_path,
                   user_model_warning)

__all__ = ["USER_MODEL_WARNING", "ModelInfo", "build_model", "count_parameters", "get_model_info", "input_spec_for",
           "list_models", "parameter_count", "user_model_warning"]

_IMAGE, _TOKENS, _IMAGE_OR_TOKENS = IMAGE, TOKENS, IMAGE_OR_TOKENS


@dataclass(frozen=True)
class _Entry:
    """A registered built-in model: its info and the function that builds it for a spec."""

    info: ModelInfo
    build: Callable[[DataSpec], nn.Module]
    square: bool = False  # torchvision's VisionTransformer only takes square images


# ----------------------------------------------------------------------------- registry

_BUILDERS: dict[str, Callable[[DataSpec], nn.Module]] = {
    "mlp": architectures.build_mlp,
    "mnist_cnn": architectures.build_mnist_cnn,
    **{name: architectures.torchvision_builder(name) for name in CONVNETS},
    "vit_b_16": architectures.build_vit_b_16,
    "vit_tiny": architectures.build_vit_tiny,
    "lstm": architectures.LSTMClassifier,
    "transformer": architectures.build_transformer,
    "transformer_base": architectures.build_transformer_base,
}
_REGISTRY: dict[str, _Entry] = {info.name: _Entry(info, _BUILDERS[info.name], square=info.name in SQUARE)
                                for info in BUILT_IN}


def list_models() -> list[ModelInfo]:
    """All built-in models, in a stable order from small to large families."""
    return [entry.info for entry in _REGISTRY.values()]


def get_model_info(name: str) -> ModelInfo:
    """Info for a built-in model name, or for a path to a user's .py file (checked, not yet run)."""
    entry = _REGISTRY.get(name.strip().lower())
    if entry is not None:
        return entry.info
    if is_model_folder(name):
        return folder_info(name)
    path = user_model_path(name, _unknown_model)
    said = declared(path)
    spec = spec_of(said.input_shape or USER_DEFAULT_SHAPE, said.num_classes or USER_DEFAULT_CLASSES, said.vocab_size)
    return ModelInfo(
        name=name,
        description=f"Your model from {path.name} (its build_model(num_classes, input_shape)).",
        input_kind=spec.kind,
        default_spec=spec,
        preferred_image_size=spec.height if spec.kind == _IMAGE and said.input_shape else None,
        declared=said,
    )


def folder_info(name: str) -> ModelInfo:
    """A Hugging Face model folder's info (its config read, nothing loaded): its input at the default sequence length
    or its image size; it makes its own batches and its loss is the one transformers computes."""
    folder = read_folder(name)
    if folder.vision:
        spec = spec_of((folder.channels, folder.image_size, folder.image_size), folder.num_labels)
    else:
        spec = spec_of((folder.default_seq_len(),), folder.num_labels, max(2, folder.vocab_size))
    return ModelInfo(name=name, description=folder.describe(), input_kind=spec.kind, default_spec=spec,
                     preferred_image_size=folder.image_size if folder.vision else None,
                     declared=Declared(spec.sample_shape, folder.num_labels, spec.vocab_size or None, True, True),
                     folder=True)


USER_DEFAULT_SHAPE = (3, 32, 32)  # what a user's model gets when neither its file nor the setup says
USER_DEFAULT_CLASSES = 10
DEFAULT_VOCAB = 10_000


def spec_of(shape: tuple[int, ...], num_classes: int, vocab_size: int | None = None) -> DataSpec:
    """The DataSpec of a declared input: (C, H, W) images or (L,) tokens."""
    if len(shape) == 3:
        return DataSpec(_IMAGE, num_classes, channels=shape[0], height=shape[1], width=shape[2])
    return DataSpec(_TOKENS, num_classes, seq_len=shape[0], vocab_size=vocab_size or DEFAULT_VOCAB)


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


def build_model(name: str, data_spec: DataSpec, options: dict | None = None) -> nn.Module:
    """A freshly initialised model for ``data_spec`` (normally the result of ``input_spec_for``); a model folder's
    own weights, fine-tuned as the run's `options` say (hf_model.build)."""
    spec = input_spec_for(name, data_spec)  # a no-op for a spec that already came from it
    entry = _REGISTRY.get(name.strip().lower())
    if entry is None and is_model_folder(name):
        from . import hf_model

        return hf_model.build(read_folder(name), spec, options or {})
    if entry is None:
        return build_user_model(user_model_path(name, _unknown_model), spec)
    return entry.build(spec)


def own_functions(name: str) -> tuple[Callable | None, Callable | None]:
    """(make_batch, loss) of a user's model file that defines them (loading it runs its code: a run's process
    only), (None, None) for a built-in model or a file that defines neither."""
    if name.strip().lower() in _REGISTRY:
        return None, None
    if is_model_folder(name):
        raise ValueError("a model folder's batches depend on the run's sequence length: run/feed.feed_for makes them")
    info = get_model_info(name)
    if info.declared is None or not (info.declared.make_batch or info.declared.loss):
        return None, None
    path = user_model_path(name, _unknown_model)
    return user_function(path, "make_batch"), user_function(path, "loss")


def count_parameters(model: nn.Module, trainable: bool = False) -> int:
    """Number of parameter values in ``model`` (shared parameters counted once; `trainable`: only those that train);
    a lazy module's parameters count once its first forward pass has given them a shape (until then they count as 0)."""
    return sum(p.numel() for p in model.parameters() if not nn.parameter.is_lazy(p) and (p.requires_grad or not trainable))


def parameter_count(name: str, data_spec: DataSpec) -> int:
    """Parameters of the model for ``data_spec``; built-ins are built on the meta device, so it is instant.

    A user's model is built normally (on the CPU), since its code may not work on the meta device.
    """
    if name.strip().lower() not in _REGISTRY:
        return count_parameters(build_model(name, data_spec))
    with torch.device("meta"):
        return count_parameters(build_model(name, data_spec))


def macs_per_sample(name: str, data_spec: DataSpec) -> int | None:
    """Multiply-accumulates of one sample's forward pass of a built-in model, counted (not measured) by PyTorch's
    FlopCounterMode on the meta device (no memory, no compute; matrix products and convolutions, the ops it counts);
    None for a user's model (its code runs only in a run's process) or when the count fails."""
    if name.strip().lower() not in _REGISTRY:
        return None
    from torch.utils.flop_counter import FlopCounterMode

    try:
        with torch.device("meta"):
            model = build_model(name, data_spec)
            if data_spec.kind == _IMAGE:
                x = torch.zeros((1, *data_spec.sample_shape))
            else:
                x = torch.zeros((1, *data_spec.sample_shape), dtype=torch.long)
            with FlopCounterMode(display=False) as counter, torch.no_grad():
                model(x)
        return int(counter.get_total_flops()) // 2
    except Exception:
        return None


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
