"""Core ML export: the model as an ML program (.mlpackage) through coremltools, from a torch.export program.

The path that works with today's torch (measured on coremltools 9.0 and torch 2.14: issue 27): `torch.export.export`
then `run_decompositions()` (the default table; `({})` where that fails) into `coremltools.convert(...,
convert_to="mlprogram")`. The trace path (`torch.jit.trace`) is not used: it is deprecated in torch 2.14 and breaks
on numpy >= 2.4 in coremltools 9.0 (coremltools#2633).

The package states its minimum deployment target (macOS 14 / iOS 17), names its input "input" and output "logits",
and carries in its metadata the normalisation its input expects and the class names. Running it needs macOS (Core
ML's own runtime, `MLModel.predict`); elsewhere the result says so and nothing is faked. An operator coremltools
cannot convert gets one sentence naming it and the module it sits in.
"""

from __future__ import annotations

import json
import re
import sys
import tempfile
import warnings
from pathlib import Path

from ...basics.errors import UserError
from ...basics.formatting import error_line, one_line

DEPLOYMENT_TARGET = "macOS14"  # coremltools.target name; also iOS 17 (the same Core ML version, 7)
DEPLOYMENT_WORDS = "macOS 14 / iOS 17 or later"
INPUT, OUTPUT = "input", "logits"
# how coremltools 9.0 names an operator it cannot convert: the torch.export frontend, then the TorchScript one
_UNSUPPORTED = (re.compile(r"Unsupported fx node [^,]+, kind ([\w.]+)"),
                re.compile(r"convert function for op '([^']+)' not implemented"))


def runs_here() -> bool:
    """Whether Core ML can run a package on this machine (macOS; conversion works everywhere coremltools installs)."""
    return sys.platform == "darwin"


def load_coremltools():
    """coremltools, imported quietly (it warns that newer torch versions are untested and that its macOS-only
    bridge is missing off macOS); UserError when it is not installed."""
    import logging

    logger = logging.getLogger("coremltools")
    level = logger.level
    logger.setLevel(logging.ERROR)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            import coremltools as ct
    except ImportError:
        raise UserError("coremltools is not installed, so Core ML export is not available; install MPS Studio's "
                        "dependencies again (make run).") from None
    finally:
        logger.setLevel(level)
    return ct


COMPRESSIONS = ("int8", "palettize4")


class NoFlexibleBatch(UserError):
    """The model does not convert with several batch sizes in one package (coremltools needs the whole shape of
    some operations: AlexNet's adaptive pooling); `reason` is coremltools' or torch.export's own line."""

    def __init__(self, exc: BaseException):
        self.reason = error_line(exc, 240)
        super().__init__(f"This model does not convert with several batch sizes in one Core ML package ("
                         f"{self.reason}); export one batch size per package (--batch-size N, without "
                         "--batch-sizes).")


def export(model, x, reference, target: Path, *, precision: str, about: dict, compress: str | None = None,
           others: dict | None = None) -> tuple[Path, dict, dict]:
    """Convert, write the package at `target` (whole or not at all) and check it where Core ML can run. `x`'s batch
    is the package's default shape; `others` ({batch size: (batch, PyTorch's logits)}) are further batch sizes it
    takes, as enumerated shapes (the Neural Engine runs each enumerated shape, not a range: issue 27).
    `compress`: int8 (linear symmetric weights) or palettize4 (4-bit uniform palettes), its size said beside the
    uncompressed package's."""
    batches = {x.shape[0]: (x, reference), **(others or {})}
    mlmodel = convert(model, batches, x.shape[0], precision=precision, about=about)
    return target, *write(mlmodel, target, batches, precision=precision, compress=compress)


def convert(model, batches: dict, default: int, *, precision: str, about: dict):
    """The model as an ML program taking each batch size of `batches` ({size: (batch, logits)}), `default` its
    default shape, with its input and output named and described; not yet written."""
    ct = load_coremltools()
    mlmodel = _named(ct, _convert(ct, model, batches, default, precision))
    _describe(mlmodel, batches[default][0], about, precision, sorted(batches))
    return mlmodel


def write(mlmodel, target: Path, batches: dict, *, precision: str, compress: str | None = None) -> tuple[dict, dict]:
    """(check, what the result says about it): the package written at `target` whole, compressed first if asked,
    and checked on each batch where Core ML runs; not written (UserError) when its outputs do not agree."""
    from .artifacts import agreement, package_path

    ct = load_coremltools()
    extra: dict = {"batch_sizes": sorted(batches)}
    if compress:
        mlmodel, extra["compression"] = _compressed(ct, mlmodel, compress)
        mlmodel.short_description += f", weights {compress}"
    with package_path(target) as part:
        mlmodel.save(str(part))
        check = _check(ct, part, batches, compress or precision, agreement)
        if check["ok"] is False:
            raise UserError(f"The Core ML package does not agree with PyTorch: {check['reason']}; it was not "
                            f"written ({target.name} is unchanged).")
    if compress:
        extra["compression"]["bytes"] = package_bytes(target)
    return check, {"input_name": INPUT, "output_name": OUTPUT, "minimum_deployment_target": DEPLOYMENT_WORDS,
                   "coremltools": ct.__version__, "runs_here": runs_here(), **extra}


def _convert(ct, model, batches: dict, default: int, precision: str):
    """The ML program: from torch.export with the batch dimension dynamic when there are several sizes (captured
    on the largest batch: a batch of 1 would be specialised), the input an enumerated shape of them."""
    import numpy as np
    import torch

    from .artifacts import no_attention_fast_path

    sizes = sorted(batches)
    x = batches[sizes[-1]][0]
    flexible = len(sizes) > 1
    rest = list(x.shape[1:])
    dtype = np.float32 if x.dtype.is_floating_point else np.int32
    shape = (ct.EnumeratedShapes(shapes=[[b, *rest] for b in sizes], default=[default, *rest]) if flexible
             else [default, *rest])
    if not flexible:
        x = batches[default][0]
    with no_attention_fast_path(), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            dynamic = ({0: torch.export.Dim("batch", min=1, max=max(4096, sizes[-1]))},) if flexible else None
            program = torch.export.export(model, (x,), dynamic_shapes=dynamic)
        except Exception as exc:
            if flexible:
                raise NoFlexibleBatch(exc) from None
            raise UserError(f"torch.export could not capture this model for Core ML ({error_line(exc, 300)}); "
                            "keep it in PyTorch or change the part it names.") from None
        # the default decompositions first, an empty table where those fail; with a flexible batch the empty table
        # first: the default one turns a linear layer on (batch, tokens, features) into a batched matmul whose
        # weight coremltools then expands and stores per token (vit_b_16: 7.9 GiB instead of 0.17)
        failures: list[Exception] = []
        tables: tuple[dict | None, dict | None] = ({}, None) if flexible else (None, {})
        for table in tables:
            try:
                decomposed = program.run_decompositions() if table is None else program.run_decompositions(table)
                # skip_model_load: on macOS convert would otherwise compile and load the package for the
                # machine's compute units (coremltools 9.0 converters/_converters_entry.py), time nobody uses here
                mlmodel = ct.convert(decomposed, convert_to="mlprogram", skip_model_load=True,
                                     inputs=[ct.TensorType(name=INPUT, shape=shape, dtype=dtype)],
                                     minimum_deployment_target=getattr(ct.target, DEPLOYMENT_TARGET),
                                     compute_precision=(ct.precision.FLOAT16 if precision == "fp16"
                                                        else ct.precision.FLOAT32))
            except Exception as exc:  # coremltools raises many kinds; the other table may do
                failures.append(exc)
                continue
            grown = _weights_grown(mlmodel, model)
            if flexible and grown > MAX_GROWTH:
                failures.append(ValueError(f"with a flexible batch its constants come to {grown:.0f}x the model's "
                                           "weights (expanded per batch or token)"))
                continue
            return mlmodel
    unsupported = [f for f in failures if any(p.search(str(f)) for p in _UNSUPPORTED)]
    if len(unsupported) == len(failures):  # no table converts this operator
        # named as the default table names it (core ATen: aten::i0, where the empty table keeps aten::special_i0)
        raise UserError(unsupported_sentence(str(unsupported[-1 if flexible else 0]), program))
    failure = failures[-1]
    if flexible:
        raise NoFlexibleBatch(failure)
    raise UserError(f"coremltools could not convert this model ({error_line(failure, 300)}); keep it in "
                    "PyTorch, or export it as TorchScript or a torch.export program.")


MAX_GROWTH = 2.0  # a package may hold at most this many times the model's parameters and buffers in constants


def _weights_grown(mlmodel, model) -> float:
    """How many times the model's own numbers (parameters and buffers) the converted program's constants hold."""
    own = sum(p.numel() for p in model.parameters()) + sum(b.numel() for b in model.buffers())
    program = getattr(mlmodel, "_mil_program", None)
    if program is None or own == 0:
        return 1.0
    held = sum(getattr(op.outputs[0].val, "size", 0) or 0 for f in program.functions.values()
               for op in f.operations if op.op_type == "const")
    return held / (own + 1_000_000)  # small models: rounding, masks and index tables are not growth


def _compressed(ct, mlmodel, how: str):
    """The model with compressed weights (coremltools.optimize.coreml), and the sizes of both packages."""
    from coremltools.optimize.coreml import (OpLinearQuantizerConfig, OpPalettizerConfig, OptimizationConfig,
                                             linear_quantize_weights, palettize_weights)

    if how not in COMPRESSIONS:
        raise UserError(f"--compress must be one of {', '.join(COMPRESSIONS)}, not {how!r}.")
    with tempfile.TemporaryDirectory() as tmp:  # the uncompressed package's size, for the comparison
        plain = Path(tmp) / "plain.mlpackage"
        mlmodel.save(str(plain))
        before = package_bytes(plain)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if how == "int8":
            config = OptimizationConfig(global_config=OpLinearQuantizerConfig(mode="linear_symmetric", dtype="int8"))
            smaller = linear_quantize_weights(mlmodel, config=config)
        else:
            config = OptimizationConfig(global_config=OpPalettizerConfig(mode="uniform", nbits=4))
            smaller = palettize_weights(mlmodel, config=config)
    return smaller, {"method": how, "uncompressed_bytes": before}


def package_bytes(path: Path) -> int:
    """The bytes of the files of a package folder."""
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


def unsupported_sentence(message: str, program) -> str:
    """"aten::i0 in `head.act` has no Core ML conversion: ..." from coremltools' NotImplementedError."""
    found = next((m for m in (p.search(message) for p in _UNSUPPORTED) if m), None)
    if not found:
        return (f"coremltools cannot convert part of this model ({one_line(message, 200)}); keep it in PyTorch, or "
                "export it as TorchScript or a torch.export program.")
    op = found.group(1)
    where = _module_of(op, program)
    at = f" in `{where}`" if where else ""
    return (f"aten::{op}{at} has no Core ML conversion (coremltools {_version()}): replace it or keep the model in "
            "PyTorch (TorchScript and torch.export programs take it).")


def _module_of(op: str, program) -> str:
    """The module path of the first node calling `op` in the exported graph ("" when it cannot be told)."""
    try:
        for node in program.graph.nodes:
            if node.op != "call_function":
                continue
            name = getattr(node.target, "__name__", str(node.target)).split(".")[0]
            if name in (op, f"special_{op}") or name.endswith(f"_{op}"):
                stack = node.meta.get("nn_module_stack") or {}
                if stack:
                    path = list(stack.values())[-1][0]
                    return re.sub(r"^L\['self'\]\.?", "", str(path)).replace("._modules['", ".").replace("']", "")
                return ""
    except Exception:
        return ""
    return ""


def _version() -> str:
    try:
        import coremltools

        return coremltools.__version__
    except Exception:
        return "?"


def _named(ct, mlmodel):
    """The input named "input" and the output "logits" (coremltools names them after the graph: x, addmm_3)."""
    spec = mlmodel.get_spec()
    old_in, old_out = spec.description.input[0].name, spec.description.output[0].name
    if old_in != INPUT:
        ct.utils.rename_feature(spec, old_in, INPUT)
    if old_out != OUTPUT:
        ct.utils.rename_feature(spec, old_out, OUTPUT)
    return ct.models.MLModel(spec, weights_dir=mlmodel.weights_dir, skip_model_load=True)


def _describe(mlmodel, x, about: dict, precision: str, sizes: list[int]) -> None:
    mlmodel.short_description = f"{about.get('model') or 'model'} exported by MPS Studio ({precision})"
    norm = about.get("normalization")
    shape = ["N", *x.shape[1:]] if len(sizes) > 1 else list(x.shape)
    n = f"; N is one of {', '.join(map(str, sizes))}" if len(sizes) > 1 else ""
    if x.dtype.is_floating_point:
        how = (f"float32 {shape} (N, C, H, W): pixels / 255, then (x - mean) / std with mean {norm['mean']} "
               f"and std {norm['std']}{n}" if isinstance(norm, dict) and "mean" in norm else f"float32 {shape}{n}")
    else:
        how = f"int32 token ids {shape} (N, L){n}"
    mlmodel.input_description[INPUT] = how
    mlmodel.output_description[OUTPUT] = "logits, one per class (softmax gives probabilities)"
    meta = mlmodel.user_defined_metadata
    meta["mpsstudio.model"] = str(about.get("model") or "")
    meta["mpsstudio.weights"] = str(about.get("weights_note") or "")
    meta["mpsstudio.classes"] = json.dumps(about.get("classes") or [])
    meta["mpsstudio.normalization"] = json.dumps(norm) if norm else ""


def predictor(target: Path, unit: str):
    """(run, load seconds): `run(x)` predicts a torch batch with the package at `target` on compute unit `unit` (a
    `coremltools.ComputeUnit` name: CPU_ONLY, CPU_AND_GPU, CPU_AND_NE, ALL) and returns the logits as a tensor.
    macOS only: `MLModel` compiles the package as it loads (the load seconds include that)."""
    import time

    import numpy as np
    import torch

    ct = load_coremltools()
    started = time.perf_counter()
    model = ct.models.MLModel(str(target), compute_units=getattr(ct.ComputeUnit, unit))
    load_s = time.perf_counter() - started

    def run(x):
        got = model.predict({INPUT: x.numpy().astype(np.float32 if x.dtype.is_floating_point else np.int32)})
        return torch.from_numpy(np.asarray(got[OUTPUT], dtype=np.float32))
    return run, load_s


def _check(ct, target: Path, batches: dict, precision: str, agreement) -> dict:
    """The package's outputs against PyTorch's at each batch size it takes, on macOS (the worst of them is the
    check); elsewhere the sentence why not."""
    if not runs_here():
        return {"ok": None, "max_abs_err": None, "max_rel_err": None, "top1_agreement": None,
                "reason": "Core ML runs a package only on macOS; it was converted and written here, not run"}
    checks = []
    try:
        run, _ = predictor(target, "CPU_ONLY")
        for b, (x, reference) in sorted(batches.items()):
            checks.append(agreement(reference, run(x), precision))
    except Exception as exc:
        return {"ok": False, "max_abs_err": None, "max_rel_err": None, "top1_agreement": None,
                "reason": f"Core ML could not run the package ({error_line(exc, 200)})"}
    check = next((c for c in checks if not c["ok"]), None) or max(checks, key=lambda c: c["max_rel_err"])
    sizes = ", ".join(map(str, sorted(batches)))
    check["how"] = f"run by Core ML on the CPU on the fixed batch{'es' if len(batches) > 1 else ''} of {sizes}"
    return check
