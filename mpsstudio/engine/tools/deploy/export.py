"""Export: the user's model as a file another program loads, checked before it is kept.

Formats: TorchScript (`torch.jit.trace`, .pt), a torch.export program (`torch.export.save`, .pt2) and a Core ML ML
program (.mlpackage, coreml.py). The model is built as a run builds it (same input spec for the dataset, same
seed), with weights from a saved model (`--weights`: the state_dict and the JSON beside it) or, without them, as
freshly built (said so: its outputs mean nothing until trained). Every export is loaded back where this machine can
run it and its outputs are compared with the PyTorch model's on a fixed batch (max abs and relative error, top-1
agreement); a Core ML package can only be run on macOS, which the result says. Nothing half-written is left at
the destination: files are written beside it and renamed, a package folder is swapped in whole.

Runs in a run's process (process.run_tool("export", ...)): a user's model file is only ever imported there.
"""

from __future__ import annotations

import contextlib
import json
import os
import warnings
from collections.abc import Callable
from pathlib import Path

import torch

from ...basics.config import RunConfig
from ...basics.errors import UserError
from ...basics.files import atomic_path
from ...basics.formatting import error_line, fmt_bytes, printable
from ...basics.spec import DataSpec
from ...models.saved import normalization
from .artifacts import agreement, no_attention_fast_path

FORMATS = {"torchscript": ".pt", "exported-program": ".pt2", "coreml": ".mlpackage"}
PRECISIONS = ("fp32", "fp16")
SEED = 0  # the model as a run builds it, and the check batch


def export(config: RunConfig, fmt: str, out: str, *, weights: str | None = None, precision: str = "fp32",
           batch_size: int = 1, model_given: bool = True, compress: str | None = None,
           batch_sizes: list[int] | None = None, progress: Callable[[str, float], None] | None = None,
           staged: bool = False) -> dict:
    """Export `config.model` (for `config.dataset`) to `out` in format `fmt`; the result (what was written, from
    which weights, and the check). With `weights` and not `model_given`, the model is the one the weights' JSON
    names. `batch_sizes` (Core ML): the batch sizes the package takes, `batch_size` its default. `staged`: the
    finished export is left beside `out` (the result's "staged") for the front end to land (basics.files.land)
    once it has the answer: an export the user stopped, even at its last moment, never lands. UserError, one
    sentence, for anything the user can fix."""
    from ...basics.files import staged_path

    say = progress or (lambda message, fraction: None)
    check_request(fmt, precision, batch_size, compress, batch_sizes)
    final = check_target(out, fmt)
    check_not_weights(final, weights)
    target = staged_path(final) if staged else final
    say("building the model", 0.1)
    model, spec, about = build(config, weights, say, model_given)
    declared = _declared(config) if model_given else None
    if declared is not None and declared.make_batch and str(config.dataset).lower() == "synthetic":
        from ...models.hf_folder import is_model_folder

        if is_model_folder(config.model):
            raise UserError(f"An export takes a model of one tensor input that returns logits, and {about['model']} "
                            "is a Hugging Face folder, whose model takes its task's batch and returns transformers' "
                            "output object; export it with transformers' own exporters (optimum, or coremltools "
                            "over a wrapper that returns the logits).")
        raise UserError(f"An export takes a model with one tensor input, and {about['model']} takes what its file's "
                        "make_batch makes; export a model of one input.")
    x = example(spec, batch_size)
    reference = logits_of(model, x, spec)
    say(f"exporting to {fmt}", 0.4)
    if fmt == "coreml":
        from . import coreml

        batches = {b: example(spec, b) for b in sorted(set(batch_sizes or ()) - {batch_size})}
        others = {b: (xb, logits_of(model, xb, spec)) for b, xb in batches.items()}
        written, check, extra = coreml.export(model, x, reference, target, precision=precision, about=about,
                                              compress=compress, others=others)
    else:
        written, check, extra = _export_torch(fmt, model, x, reference, target)
    size = _size(written)
    result = {
        "format": fmt, "path": str(final), "bytes": size, "precision": precision,
        "model": about["model"], "dataset": about["dataset"], "weights": about["weights"], "weights_note": about["weights_note"],
        "input": {"name": extra.get("input_name", "input"), "shape": list(x.shape), "dtype": str(x.dtype).replace(
            "torch.", ""), "kind": spec.kind}, "output": {"name": extra.get("output_name", "logits"),
                                                          "shape": list(reference.shape)},
        "normalization": about["normalization"], "classes": about["classes"], "check": check, **extra,
    }
    if staged:
        result["staged"] = str(written)
    result["sentence"] = sentence(result)
    say("done", 1.0)
    return result


def _declared(config: RunConfig):
    from ...models import registry as models

    return models.get_model_info(config.model).declared


def check_not_weights(target: Path, weights: str | None) -> None:
    """UserError when the export would be written over the weights it is made from (or their JSON)."""
    if not weights:
        return
    from ...models.saved import meta_path

    for source in (Path(weights), meta_path(weights)):
        try:
            same = source.exists() and target.exists() and os.path.samefile(source, target)
        except OSError:
            same = False
        if same or source.expanduser().absolute() == target.expanduser().absolute():
            what = "weights file" if source == Path(weights) else "weights' JSON"
            raise UserError(f"--out {printable(target.name)} is the {what} the export is made from; choose another "
                            "path (the weights stay as they are).")


MAX_ENUMERATED = 16  # batch sizes in one Core ML package


def check_request(fmt: str, precision: str, batch_size, compress: str | None, batch_sizes=None) -> None:
    """UserError (one sentence) for settings that do not go together; the CLI asks before a process starts."""
    if fmt not in FORMATS:
        raise UserError(f"The export format must be one of {', '.join(FORMATS)}, not {printable(fmt)!r}.")
    if precision not in PRECISIONS:
        raise UserError(f"Export precision must be fp32 or fp16, not {printable(precision)!r}.")
    if compress and fmt != "coreml":
        raise UserError("--compress is for Core ML packages (--format coreml).")
    if fmt != "coreml" and precision != "fp32":
        raise UserError(f"{fmt} exports keep the model's own precision; --precision fp16 is for --format coreml.")
    if not isinstance(batch_size, int) or isinstance(batch_size, bool) or not 1 <= batch_size <= 4096:
        raise UserError(f"--batch-size for an export must be a whole number from 1 to 4,096, not {batch_size}.")
    if batch_sizes:
        if fmt != "coreml":
            raise UserError(f"--batch-sizes is for Core ML packages (--format coreml); a {fmt} export takes the "
                            "batch size it was captured with.")
        if not isinstance(batch_sizes, (list, tuple)) or not all(
                isinstance(b, int) and not isinstance(b, bool) and 1 <= b <= 4096 for b in batch_sizes):
            raise UserError("--batch-sizes must be whole numbers from 1 to 4,096 separated by commas.")
        if len(set(batch_sizes) | {batch_size}) > MAX_ENUMERATED:
            raise UserError(f"A Core ML package takes at most {MAX_ENUMERATED} batch sizes; name fewer in "
                            "--batch-sizes.")


# -- the model --------------------------------------------------------------------------------------------------

def build(config: RunConfig, weights: str | None, say, model_given: bool = True
          ) -> tuple[torch.nn.Module, DataSpec, dict]:
    """The model in eval mode on the CPU, the spec of one input, and what the result says about its origin."""
    from ...models import registry as models

    if weights:
        meta = _saved_meta(weights)
        spec = _spec_from_meta(meta)
        name = config.model if model_given or not meta.get("model") else str(meta["model"])
        if meta.get("model") and name != meta["model"]:
            raise UserError(f"{printable(Path(weights).name)} holds weights of {printable(meta['model'])}, not of "
                            f"{printable(name)}; pass --model {printable(meta['model'])} or other weights.")
        torch.manual_seed(SEED)
        model = models.build_model(name, spec)
        _load_weights(model, weights)
        about = {"model": name, "dataset": str(meta.get("dataset") or config.dataset),
                 "weights": str(Path(weights).resolve()),
                 "weights_note": f"trained weights from {Path(weights).name}",
                 "normalization": meta.get("normalization") if isinstance(meta.get("normalization"), dict) else None,
                 "classes": [str(c) for c in meta.get("classes", [])][:spec.num_classes]
                 if isinstance(meta.get("classes"), list) else []}
        return model.eval(), spec, about
    from .. import toolkit

    setup = toolkit.prepare(config.with_device("cpu"), say)
    model = toolkit.build(setup)  # as a run builds it (seeded)
    data = setup.data
    about = {"model": config.model, "dataset": data.name, "weights": None,
             "weights_note": "no trained weights given (--weights): the model as freshly built (random weights, "
                             f"seed {config.seed}); its outputs mean nothing until it is trained",
             "normalization": normalization(data) if setup.model_spec.kind == "image" else None,
             "classes": [str(c) for c in data.classes][:setup.model_spec.num_classes]}
    return model.eval(), setup.model_spec, about


def _saved_meta(weights: str) -> dict:
    from ...models.saved import FORMAT, meta_path

    path = Path(weights)
    if not path.is_file():
        raise UserError(f"{printable(weights)} is not a file; pass the .pt file of a saved model (Save Trained "
                        "Model… or bench --save-model), with its .json beside it.")
    meta = meta_path(path)
    try:
        doc = json.loads(meta.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise UserError(f"{printable(meta.name)} is missing beside {printable(path.name)}: it says what the weights "
                        "need (model, input, classes); save the model again with MPS Studio.") from None
    except (OSError, UnicodeDecodeError, ValueError, RecursionError):
        raise UserError(f"{printable(meta.name)} beside {printable(path.name)} is not readable JSON; save the model "
                        "again with MPS Studio.") from None
    if not isinstance(doc, dict) or doc.get("format") != FORMAT:
        raise UserError(f"{printable(meta.name)} is not the description of a model saved by MPS Studio.")
    return doc



def _whole(value, most: int) -> int | None:
    """`value` where it is a whole number from 1 to `most` (not a bool), else None."""
    return value if isinstance(value, int) and not isinstance(value, bool) and 1 <= value <= most else None

def _spec_from_meta(meta: dict) -> DataSpec:
    inputs, n = meta.get("input"), meta.get("num_classes")
    try:
        if not isinstance(inputs, dict) or isinstance(n, bool) or not isinstance(n, int) or not 1 <= n <= 100_000:
            raise ValueError
        if inputs.get("kind") == "image":
            c, h, w = (_whole(inputs.get(k), 8192) for k in ("channels", "height", "width"))
            if c is None or h is None or w is None:
                raise ValueError
            return DataSpec("image", n, channels=c, height=h, width=w)
        if inputs.get("kind") == "tokens":
            seq, vocab = _whole(inputs.get("seq_len"), 10_000_000), _whole(inputs.get("vocab_size"), 10_000_000)
            if seq is None or vocab is None:
                raise ValueError
            return DataSpec("tokens", n, seq_len=seq, vocab_size=vocab)
    except ValueError:
        pass
    raise UserError("The saved model's description has no usable input shape or class count; save it again with "
                    "MPS Studio.")


def _load_weights(model: torch.nn.Module, weights: str) -> None:
    try:
        state = torch.load(weights, map_location="cpu", weights_only=True)
    except Exception:  # a pickle with code, a damaged file, not a torch file at all
        raise UserError(f"{printable(Path(weights).name)} cannot be loaded as weights: it is not a plain state_dict "
                        "of tensors (only those are loaded, never code); pass the .pt file MPS Studio saved.") from None
    if not isinstance(state, dict):
        raise UserError(f"{printable(Path(weights).name)} does not hold a state_dict; pass the .pt file MPS Studio "
                        "saved.")
    try:
        model.load_state_dict(state, strict=True)
    except (RuntimeError, TypeError) as exc:
        raise UserError(f"The weights in {printable(Path(weights).name)} do not fit this model ("
                        f"{error_line(exc, 200, with_type=False)}); pass the model they were trained for.") from None


def example(spec: DataSpec, batch_size: int) -> torch.Tensor:
    """The fixed batch the export is traced with and checked on (seeded: the same every time)."""
    from ..toolkit import synthetic_batch

    return synthetic_batch(spec, batch_size, torch.device("cpu"), seed=SEED)[0]


# -- TorchScript and torch.export -------------------------------------------------------------------------------

def _export_torch(fmt: str, model, x, reference, target: Path) -> tuple[Path, dict, dict]:
    try:
        with _quiet(), no_attention_fast_path():
            if fmt == "torchscript":
                program = torch.jit.trace(model, (x,), check_trace=True)
            else:
                program = torch.export.export(model, (x,))
    except Exception as exc:
        raise UserError(f"{fmt} could not capture this model ({error_line(exc, 300)}); keep it as a state_dict or "
                        f"try another format.") from None
    # the fixed batch and its negation: a trace follows one path through data-dependent branches (`if x.sum() >
    # 0`), which the other batch takes the other way
    other = -x if x.dtype.is_floating_point else x.flip(0)
    with atomic_path(target) as part:
        if fmt == "torchscript":
            torch.jit.save(program, str(part))
            loaded = torch.jit.load(str(part))
        else:
            torch.export.save(program, str(part))
            loaded = torch.export.load(str(part)).module()
        with torch.no_grad(), no_attention_fast_path():
            check = agreement(reference, _tensor(loaded(x)), "fp32")
            if check["ok"]:
                second = agreement(model(other).float(), _tensor(loaded(other)), "fp32")
                if not second["ok"]:
                    check = {**second, "reason": f"on a second batch {second['reason']} (a branch on the data "
                             "that the export followed one way only)"}
        check["how"] = f"loaded back from the file and run here on two fixed batches of {x.shape[0]}"
        if not check["ok"]:
            raise UserError(f"The {fmt} export does not agree with PyTorch: {check['reason']}; it was not written "
                            f"({printable(target.name)} is unchanged). Try another format or keep the model in "
                            "PyTorch.")
    return target, check, {"input_name": "x", "output_name": "output"}


def _tensor(out) -> torch.Tensor:
    if not isinstance(out, torch.Tensor):
        raise UserError(f"The exported model returns {type(out).__name__}, not a tensor of logits.")
    return out.float()


def logits_of(model, x, spec: DataSpec) -> torch.Tensor:
    """The model's output on `x`, which must be logits (N, classes): what every export names `logits`."""
    try:
        with torch.no_grad():
            out = model(x)
    except Exception as exc:
        raise UserError(f"The model failed on a batch of {x.shape[0]} ({error_line(exc, 200)}); fix its forward "
                        "and try again.") from None
    if not isinstance(out, torch.Tensor):
        raise UserError(f"The model's forward returns {type(out).__name__}, not a tensor of logits (N, classes); "
                        "return the logits tensor to export it.")
    if tuple(out.shape) != (x.shape[0], spec.num_classes):
        raise UserError(f"The model's forward returns a tensor of shape {list(out.shape)}, not logits "
                        f"[{x.shape[0]}, {spec.num_classes}] (batch, classes); return one logit per class.")
    return out.float()


@contextlib.contextmanager
def _quiet():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # deprecation and tracer warnings: the check below is what counts
        yield


# -- the check --------------------------------------------------------------------------------------------------

def sentence(r: dict) -> str:
    check = r["check"]
    packed = r.get("compression")
    squeeze = (f", weights {packed['method']}: {fmt_bytes(r['bytes'])} against {fmt_bytes(packed['uncompressed_bytes'])}"
               " uncompressed" if packed else f", {fmt_bytes(r['bytes'])}")
    sizes = r.get("batch_sizes") or []
    takes = f", batch {', '.join(map(str, sizes))}" if len(sizes) > 1 else ""
    wrote = f"Exported {r['model']} to {r['path']} ({r['format']}{squeeze}, {r['precision']}{takes})"
    if check.get("ok") is None:
        verdict = f"not checked here: {check.get('reason')}"
    elif check["ok"]:
        verdict = (f"it agrees with PyTorch (max error {check['max_rel_err']:.1g} of the largest output, top-1 "
                   f"{check['top1_agreement']:.0%})")
    else:
        verdict = f"it does NOT agree with PyTorch: {check['reason']}"
    return f"{wrote}; {verdict}. Weights: {r['weights_note']}."


# -- where it goes ----------------------------------------------------------------------------------------------

def check_target(out: str, fmt: str) -> Path:
    """Where the export may be written: a name in an existing folder this user can write, with the format's suffix;
    UserError (one sentence) before any work otherwise."""
    from ...basics.files import check_writable_file

    suffix = FORMATS[fmt]
    if not isinstance(out, str) or not out.strip():
        raise UserError("--out needs a path to write the export to.")
    if not out.lower().endswith(suffix):
        raise UserError(f"A {fmt} export is written to a {suffix} path, not {printable(Path(out).name)}; name it "
                        f"e.g. model{suffix}.")
    if fmt != "coreml":
        return check_writable_file(out, "--out")
    from ...basics.files import check_name_length

    try:
        target = Path(out).expanduser().absolute()
        check_name_length(target.name, "--out", spare_bytes=20)  # the package is written beside it first
        if not target.parent.is_dir():
            raise UserError(f"The folder {printable(target.parent)} does not exist; create it or choose another "
                            "--out.")
        if not os.access(target.parent, os.W_OK):
            raise UserError(f"The folder {printable(target.parent)} cannot be written; choose another --out.")
        if target.is_symlink() or (target.exists() and not (target / "Manifest.json").is_file()):
            raise UserError(f"{printable(target)} exists and is not a Core ML package (a folder with a "
                            "Manifest.json); choose another --out, nothing there is replaced.")
    except (OSError, RuntimeError, ValueError) as exc:  # a name too long for the file system, an unknown ~user
        raise UserError(f"{printable(out)} cannot be used for --out ({getattr(exc, 'strerror', None) or exc}); "
                        "choose another path.") from None
    return target


def _size(path: Path) -> int:
    if path.is_dir():
        return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())
    return path.stat().st_size


def run_tool(config: RunConfig, payload: dict, *, progress=None, should_stop=None, checkpoint=None) -> dict:
    """The export as the tool table carries it out in a run process (tools/registry.py): a library's own failure
    is one sentence, nothing half-written."""
    try:
        return export(config, str(payload.get("format")), str(payload.get("out")),
                      weights=payload.get("weights") or None, precision=str(payload.get("precision", "fp32")),
                      batch_size=payload.get("batch_size", 1), model_given=bool(payload.get("model_given", True)),
                      compress=payload.get("compress") or None, batch_sizes=payload.get("batch_sizes") or None,
                      progress=progress, staged=bool(payload.get("staged")))
    except UserError:
        raise
    except Exception as exc:
        raise UserError(f"The export failed ({error_line(exc, 300)}); nothing was written.") from None
