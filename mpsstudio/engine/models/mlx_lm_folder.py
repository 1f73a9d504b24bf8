"""A Hugging Face causal LM folder in MLX, through mlx-lm (`mlx_lm.utils.load_model`: the folder's config.json and
safetensors, its architecture's class in `mlx_lm/models/`, never a custom model file), or the reason it cannot be.

What mlx-lm cannot read as save_pretrained wrote it is said, never guessed around, except where the difference is
only in how the same tensors are named: transformers 5 writes a GPT-2 folder's weights under `transformer.` and no
`n_ctx` in its config, where mlx-lm 0.32's gpt2 expects the hub's checkpoint layout (weights without the prefix,
`n_ctx`). Such a folder is read with the prefix removed and `n_ctx` = `n_positions` (said in `Loaded.notes`); its
tensors, and mlx-lm's own sanitize (Conv1D transposes), are unchanged.

The names mlx-lm gives parameters are transformers' own, but for GPT-2 (`model.` for `transformer.`, Conv1D
weights transposed): `torch_name` maps one to the other for parity (run/mlx/lm_parity.py). mlx-lm is optional
(`mpsstudio[mlx]`); MLX is imported only when a folder is loaded.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..basics.errors import UserError
from ..basics.formatting import error_line, fmt_bytes, printable

INSTALL_MLX_LM = ("install mlx-lm (pip install 'mpsstudio[mlx]'; on Linux 'mlx-lm[cpu]'), or run the folder in "
                  "PyTorch alone (--framework torch)")
GPT2_PREFIX = "transformer."
LORA_NAMES = ((".lora_a", ".lora_A.default.weight"), (".lora_b", ".lora_B.default.weight"))  # mlx-lm's, peft's
PEFT_PREFIX = "base_model.model."  # peft's wrapper of a model: its parameters' names begin so
# parameters transformers keeps as Conv1D (weight stored in x out), which mlx-lm's sanitize transposes to Linear's
GPT2_CONV1D = ("attn.c_attn.weight", "attn.c_proj.weight", "mlp.c_fc.weight", "mlp.c_proj.weight")
QUANTIZE_BITS = (4, 8)  # mlx-lm's `convert -q --q-bits`: its affine mode, as MLX users quantize
QUANTIZE_GROUP = 64  # mlx-lm's default group size of the affine mode


@dataclass
class Loaded:
    model: Any  # the mlx-lm model (an mlx.nn.Module)
    model_type: str
    notes: list[str] = field(default_factory=list)


def mlx_lm_module():
    """mlx_lm.utils; UserError where mlx-lm is not installed, or is and cannot be imported (a package it needs
    missing or broken: named, as the import said it)."""
    try:
        import mlx_lm.utils
    except ImportError as exc:
        if isinstance(exc, ModuleNotFoundError) and exc.name in ("mlx_lm", "mlx"):
            raise UserError(f"The MLX side of a model folder needs mlx-lm; {INSTALL_MLX_LM}.") from None
        raise UserError(f"mlx-lm is installed but could not be imported ({error_line(exc, 160)}); reinstall it "
                        "(pip install 'mpsstudio[mlx]'), or run the folder in PyTorch alone (--framework torch).") from None
    return mlx_lm.utils


def mlx_lm_version() -> str:
    import mlx_lm

    return str(getattr(mlx_lm, "__version__", "?"))


def architecture_reason(path: Path) -> str:
    """Why mlx-lm cannot build this folder's architecture ("" when it can), without loading its weights, and without
    importing mlx-lm where its models folder has a module of the type's name (a front end plans with it)."""
    import importlib.util

    try:
        config = json.loads((path / "config.json").read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        return f"its config.json could not be read ({error_line(exc, 120)})"
    model_type = config.get("model_type") if isinstance(config, dict) else None
    if not isinstance(model_type, str) or not model_type:
        return "its config.json names no model_type"
    if config.get("model_file") is not None:
        return "its config.json asks for a custom model file, which is code from the folder: it is never run"
    spec = importlib.util.find_spec("mlx_lm")  # found, not imported
    if spec is None or not spec.submodule_search_locations:
        return f"mlx-lm is not installed; {INSTALL_MLX_LM}"
    if model_type.isidentifier() and any((Path(where) / "models" / f"{model_type}.py").is_file()
                                         for where in spec.submodule_search_locations):
        return ""
    utils = mlx_lm_module()
    module = getattr(utils, "MODEL_REMAPPING", {}).get(model_type, model_type)
    if not module.isidentifier() or importlib.util.find_spec(f"mlx_lm.models.{module}") is None:
        return f"mlx-lm {mlx_lm_version()} has no {printable(model_type)} architecture (mlx_lm/models has none of that name)"
    return ""


def plan_reason(name: str, options: dict) -> str:
    """Why a model folder cannot run in MLX ("" where it can), read from its config and the run's options alone: a
    front end plans with it before any process starts."""
    from .hf_folder import finetune_of, read_folder

    folder = read_folder(name)
    if folder.task != "causal LM":
        return (f"'{printable(folder.path.name)}' is a {folder.task} model, and MLX runs a model folder through "
                "mlx-lm, which trains causal language models")
    mode, _, _, checkpointing = finetune_of(options)
    bits = quantize_of(options)
    if bits and mode != "lora":
        return (f"a model quantized to {bits} bits trains LoRA adapters on its frozen weights (mlx-lm's QLoRA), not "
                f"{'every weight' if mode == 'full' else 'a head'}: fine-tune it with --finetune lora, or drop "
                "--quantize")
    if mode == "head":
        return "head-only fine-tuning is PyTorch's here; mlx-lm fine-tunes LoRA adapters or every weight"
    if checkpointing:
        return "gradient checkpointing is PyTorch's here"
    why = architecture_reason(folder.path)
    return f"'{printable(folder.path.name)}' {why}" if why.startswith("its ") else why


def quantize_of(options: dict) -> int | None:
    """The bits the MLX side's weights are quantized to (options["quantize"]: 4 or 8), None where they are not;
    UserError for another value."""
    bits = options.get("quantize")
    if bits is None:
        return None
    if isinstance(bits, bool) or bits not in QUANTIZE_BITS:
        raise UserError(f"--quantize takes 4 or 8 bits (mlx-lm's), not {printable(repr(bits))[:40]}.")
    return int(bits)


@dataclass
class Quantized:
    """What quantizing a model did: the bits and group, the layers quantized and those left as they were (too narrow
    for a group, or kept by the model's own rule), and the bytes its parameters take before and after."""
    bits: int
    group_size: int
    layers: int
    kept: int
    bytes_before: int
    bytes_after: int

    def record(self) -> dict:
        return {"bits": self.bits, "group_size": self.group_size, "mode": "affine", "layers": self.layers,
                "kept": self.kept, "bytes_before": self.bytes_before, "bytes_after": self.bytes_after}


def quantize(loaded: Loaded, bits: int) -> Quantized:
    """The model's layers quantized as mlx-lm's `convert -q` quantizes them (`nn.quantize` in its affine mode, groups
    of 64, every layer that can be quantized whose input width a group divides, the model's own quant_predicate
    kept): the weights packed in `bits`, each group's scale and bias in the float type of the rest, frozen (a
    QuantizedLinear trains no weight). LoRA's adapters (LoRALinear) stay as they are and their base is quantized, as
    mlx-lm's QLoRA has it. UserError where no layer can be quantized."""
    import mlx.core as mx
    import mlx.nn as nn

    model = loaded.model
    before = parameter_bytes(model)
    own = getattr(model, "quant_predicate", None)
    chosen: list[str] = []
    refused: list[str] = []

    def predicate(path, module):
        if not hasattr(module, "to_quantized"):
            return False
        fits = getattr(module, "weight", None) is not None and module.weight.shape[-1] % QUANTIZE_GROUP == 0
        if fits and own is not None:
            fits = bool(own(path, module))
        (chosen if fits else refused).append(path)
        return fits

    nn.quantize(model, group_size=QUANTIZE_GROUP, bits=bits, class_predicate=predicate)
    if not chosen:
        raise UserError(f"No layer of '{printable(loaded.model_type)}' is {QUANTIZE_GROUP} wide or a multiple of it, "
                        f"so none can be quantized in mlx-lm's groups of {QUANTIZE_GROUP}; drop --quantize.")
    mx.eval(model.parameters())
    return Quantized(bits=bits, group_size=QUANTIZE_GROUP, layers=len(chosen), kept=len(refused),
                     bytes_before=before, bytes_after=parameter_bytes(model))


def quantized_words(q: dict) -> str:
    """"(affine, groups of 64) in 16 layers, parameters 453 KiB -> 83.7 KiB": what Quantized.record says of a model,
    as a run's note and generate's say it."""
    kept = f" ({q['kept']} kept as they were: too narrow for a group)" if q["kept"] else ""
    return (f"(affine, groups of {q['group_size']}) in {q['layers']} layers{kept}, parameters "
            f"{fmt_bytes(q['bytes_before'])} -> {fmt_bytes(q['bytes_after'])}")


def parameter_bytes(model) -> int:
    """The bytes an MLX model's parameters take (packed weights, scales and biases of a quantized layer included)."""
    return sum(v.nbytes for _, v in _flat_arrays(model))


def load(path: Path) -> Loaded:
    """The folder's model in mlx-lm, its weights the folder's (every parameter loaded: strict) in float32 as
    PyTorch's side loads them (hf_model.build): mlx-lm keeps the type a folder stores (bf16 for most of the hub's),
    so a "fp32" run of a bf16 folder would otherwise compute in bf16 and fail parity for it. UserError with the
    reason where mlx-lm cannot."""
    utils = mlx_lm_module()
    shown = printable(path.name)
    why = architecture_reason(path)
    if why:
        raise UserError(f"'{shown}' cannot be run in MLX: {why}; run it in PyTorch alone (--framework torch).")
    config = json.loads((path / "config.json").read_text(encoding="utf-8"))
    notes: list[str] = []
    extra: dict = {}
    classes = None
    if config.get("model_type") == "gpt2":
        if "n_ctx" not in config and isinstance(config.get("n_positions"), int):
            extra["n_ctx"] = config["n_positions"]
            notes.append("its config has no n_ctx (transformers 5 writes none): mlx-lm's gpt2 was given n_positions")
        classes = _gpt2_classes(utils, notes)
    try:
        if classes is None:
            model, _ = utils.load_model(path, strict=True, model_config=extra or None, trust_remote_code=False)
        else:
            model, _ = utils.load_model(path, strict=True, model_config=extra or None, trust_remote_code=False,
                                        get_model_classes=classes)
    except (Exception, SystemExit) as exc:
        raise UserError(f"mlx-lm could not load '{shown}' ({error_line(exc, 200)}); run it in PyTorch alone "
                        "(--framework torch).") from exc
    stored = _float_types(model)
    if stored - {"float32"}:
        model.set_dtype(_mx().float32)  # floating parameters only (nn.Module.set_dtype's default predicate)
        notes.append(f"its weights are stored in {', '.join(sorted(stored))}: read in float32, as PyTorch's side reads "
                     "them; the run's precision casts from there")
    return Loaded(model=model, model_type=str(config.get("model_type")), notes=notes)


def _mx():
    import mlx.core as mx

    return mx


def _float_types(model) -> set[str]:
    """The floating types an MLX model's parameters are stored in ("float32", "bfloat16", ...)."""
    mx = _mx()
    return {str(v.dtype).removeprefix("mlx.core.") for _, v in _flat_arrays(model)
            if mx.issubdtype(v.dtype, mx.floating)}


def _flat_arrays(model) -> list[tuple[str, Any]]:
    """An MLX model's parameters as (dotted name, array) pairs."""
    return _pairs(model.parameters())


def _gpt2_classes(utils, notes: list[str]):
    """mlx-lm's gpt2 classes, its sanitize first removing transformers 5's `transformer.` prefix."""
    from mlx_lm.models import gpt2

    class Model(gpt2.Model):
        def sanitize(self, weights):
            if any(k.startswith(GPT2_PREFIX) for k in weights):
                notes.append("its weights are named as transformers 5 saves GPT-2 (transformer.*): read without the "
                             "prefix, as mlx-lm's gpt2 names them")
                weights = {k.removeprefix(GPT2_PREFIX): v for k, v in weights.items()}
            weights.pop("lm_head.weight", None)  # tied to the embedding, as in mlx-lm's gpt2
            return super().sanitize(weights)

    return lambda config: (Model, gpt2.ModelArgs)


def torch_name(mlx_name: str, model_type: str, lora: bool = False) -> str:
    """A parameter's name in transformers (in peft's wrapper where `lora`) for its name in mlx-lm: a LoRA adapter's
    `X.lora_a` / `X.lora_b` is peft's `X.lora_A.default.weight` / `X.lora_B.default.weight`, the layer it adapts
    (`X.linear.*`) peft's `X.base_layer.*`."""
    name = mlx_name
    if lora:
        for ours, theirs in LORA_NAMES:
            if name.endswith(ours):
                name = name.removesuffix(ours) + theirs
        name = name.replace(".linear.", ".base_layer.")
    if model_type == "gpt2" and name.startswith("model."):
        name = GPT2_PREFIX + name.removeprefix("model.")
    return PEFT_PREFIX + name if lora else name


def transposed(torch_name_: str, model_type: str) -> bool:
    """The parameter is stored transposed in transformers against mlx-lm: GPT-2's Conv1D against Linear, and LoRA's
    adapters (peft's Linear weights, out x in, against mlx-lm's in x out matrices)."""
    if torch_name_.endswith(tuple(theirs for _, theirs in LORA_NAMES)):
        return True
    return model_type == "gpt2" and torch_name_.replace(".base_layer.", ".").endswith(GPT2_CONV1D)


def add_lora(loaded: Loaded, torch_model, rank: int, alpha: int, targets: list[str]) -> int:
    """peft's LoRA in mlx-lm's own tuner (`linear_to_lora_layers`: every block, the same target projections, rank,
    scale alpha / rank as peft's, no dropout), the rest of the model frozen, and the adapters given peft's initial
    values (its A random, its B zero), so both start from the same weights. Returns the trainable parameters."""
    import mlx.core as mx
    import numpy as np
    from mlx.utils import tree_unflatten
    from mlx_lm.tuner.utils import linear_to_lora_layers

    model, kind = loaded.model, loaded.model_type
    layers = blocks(model)
    if not layers:
        raise UserError(f"mlx-lm's {printable(kind)} model has no decoder blocks to add LoRA to; fine-tune it in "
                        "full, or run it in PyTorch alone (--framework torch).")
    keys = sorted({path for path, _ in layers[0].named_modules() if path and path.rsplit(".", 1)[-1] in targets})
    model.freeze()
    linear_to_lora_layers(model, len(layers), {"rank": rank, "scale": alpha / rank, "dropout": 0.0, "keys": keys})
    theirs = {name: p for name, p in torch_model.named_parameters() if p.requires_grad}
    given = []
    for name, value in _trainable(model):
        tname = torch_name(name, kind, lora=True)
        if tname not in theirs:
            raise UserError(f"mlx-lm's LoRA adapter {printable(name)} has no counterpart in peft's ({printable(tname)}"
                            "); run the folder in PyTorch alone (--framework torch).")
        array = theirs[tname].detach().float().cpu().numpy()
        given.append((name, mx.array(array.T if transposed(tname, kind) else array)))
        if tuple(given[-1][1].shape) != tuple(value.shape):
            raise UserError(f"mlx-lm's LoRA adapter {printable(name)} is {tuple(value.shape)} and peft's "
                            f"{tuple(np.shape(array))}; run the folder in PyTorch alone (--framework torch).")
    if len(given) != len(theirs):
        raise UserError(f"peft trains {len(theirs):,} LoRA tensors and mlx-lm {len(given):,}: not the same adapters; "
                        "run the folder in PyTorch alone (--framework torch).")
    model.update(tree_unflatten(given))
    mx.eval(model.parameters())
    return sum(v.size for _, v in _trainable(model))


def blocks(model) -> list:
    """The decoder blocks of an mlx-lm model, in order (`model.layers`: Llama, Qwen, Mistral, ...; `model.h`: GPT-2),
    for naming the first block whose output differs; [] where neither is there."""
    inner = getattr(model, "model", model)
    for name in ("layers", "h"):
        found = getattr(inner, name, None)
        if isinstance(found, list):
            return found
    return []


def _trainable(model) -> list[tuple[str, Any]]:
    """An MLX model's trainable arrays as (dotted name, array) pairs."""
    return _pairs(model.trainable_parameters())


def _pairs(tree) -> list[tuple[str, Any]]:
    """A tree of MLX arrays as (dotted name, array) pairs (mlx.utils.tree_flatten)."""
    from mlx.utils import tree_flatten

    pairs: Any = tree_flatten(tree)
    return list(pairs)
