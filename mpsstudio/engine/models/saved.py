"""A trained model kept as files: its weights (`torch.save` of the state_dict, tensors only) and a small JSON of
what rebuilding and feeding it needs (model name, input shape, classes, normalisation).

The weights load with `torch.load(path, weights_only=True)`: plain tensors, no pickled code. The run's own
process writes them (the model lives there); the window keeps the last Run's models in the cache folder and
copies one where the user asks (`copy_saved`).
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

from ..basics.errors import UserError
from ..basics.files import atomic_path, check_name_length, check_writable_file, write_atomic
from ..basics.formatting import printable
from ..basics.summary_fields import RunSummary

FORMAT = "mpsstudio.model"
VERSION = 1


def meta_path(weights: str | Path) -> Path:
    """model.pt -> model.json (beside it)."""
    return Path(weights).with_suffix(".json")


def check_target(path: str | Path) -> Path:
    """Where weights may be written: a file name in an existing, writable folder, whose JSON (beside it, same
    name, .json) can be written too; UserError (one sentence) before the run otherwise."""
    target = check_writable_file(str(path), "--save-model")
    _not_json(target)
    meta = meta_path(target)
    # room for the description's name and for the -cuda0-2 a run on several devices adds
    longer = max(target.name, meta.name, key=lambda n: len(n.encode("utf-8", "surrogatepass")))
    check_name_length(longer, "--save-model", spare_bytes=10)
    if meta.exists() and (not meta.is_file() or not os.access(meta, os.W_OK)):
        raise UserError(f"{printable(meta)} (the model's description, written beside its weights) cannot be "
                        "written; choose another name for the model.")
    return target


def _not_json(weights: Path) -> None:
    if weights.suffix.lower() == ".json":
        raise UserError(f"{printable(weights.name)} would be the weights and their description at once; give the "
                        "weights another suffix, e.g. model.pt (model.json is written beside it).")


def save(model, path: str | Path, meta: dict) -> int:
    """Write `model`'s state_dict (moved to the CPU) to `path` and `meta` to the JSON beside it, each atomically;
    returns the bytes of the weights. OSError when the disk refuses (the caller says so in a sentence)."""
    import torch

    path = Path(path)
    state = {k: v.detach().to("cpu") for k, v in model.state_dict().items()}
    with atomic_path(path) as part:
        torch.save(state, part)
        size = part.stat().st_size
    doc = {"format": FORMAT, "version": VERSION, "weights": path.name, **meta}
    if hasattr(model, "save_pretrained") and meta.get("model"):  # a Hugging Face folder's: its own format too
        save_pretrained(model, Path(str(meta["model"])), pretrained_path(path))
        doc["pretrained"] = pretrained_path(path).name
        doc["load_with"] = (f"PeftModel.from_pretrained(AutoModelForCausalLM.from_pretrained(base), "
                            f"'{pretrained_path(path).name}') (LoRA: the adapter only)"
                            if hasattr(model, "peft_config") else
                            f"AutoModel...from_pretrained('{pretrained_path(path).name}') (model and tokenizer)")
    write_atomic(meta_path(path), json.dumps(doc, indent=1, allow_nan=False))
    return size


def pretrained_path(weights: str | Path) -> Path:
    """model.pt -> model.hf: the folder save_pretrained writes beside a Hugging Face model's weights."""
    return Path(weights).with_suffix(".hf")


TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json", "chat_template.jinja",
                   "chat_template.json", "vocab.json", "merges.txt", "tokenizer.model", "vocab.txt",
                   "added_tokens.json", "spiece.model", "generation_config.json")


def save_pretrained(model, source: Path, target: Path) -> None:
    """The trained model as save_pretrained writes it (safetensors; LoRA: its adapter and adapter_config.json),
    with the source folder's tokenizer files beside it: a folder transformers (and peft) load as it is. Written
    beside, then moved into place (a crash never leaves half a folder at `target`)."""
    staged = target.with_name(f"{target.name}.part-{os.getpid()}")
    shutil.rmtree(staged, ignore_errors=True)
    try:
        model.save_pretrained(str(staged), safe_serialization=True)
        for name in TOKENIZER_FILES:
            file = source / name
            if file.is_file() and not (staged / name).exists():
                shutil.copyfile(file, staged / name)
        if target.is_dir():
            shutil.rmtree(target)
        staged.rename(target)
    finally:
        shutil.rmtree(staged, ignore_errors=True)


def normalization(data) -> dict:
    """How a model's image input is made from pixels, as training made it (the description's, an export's)."""
    return {"mean": list(data.mean), "std": list(data.std), "scale": "pixels / 255, then (x - mean) / std"}


def describe(config, data, model_spec, run_id: str, summary: RunSummary) -> dict:
    """What rebuilding and feeding the trained model needs, for the JSON beside its weights."""
    spec = model_spec
    inputs = ({"kind": "image", "channels": spec.channels, "height": spec.height, "width": spec.width}
              if spec.kind == "image" else {"kind": spec.kind, "seq_len": spec.seq_len, "vocab_size": spec.vocab_size})
    return {
        "model": config.model, "num_classes": spec.num_classes, "input": inputs,
        "classes": [str(c) for c in data.classes][:spec.num_classes],
        "normalization": normalization(data),
        "dataset": config.dataset, "run_id": run_id, "device": config.device, "precision": config.precision,
        "epochs_trained": summary.stopped_early_epoch or (config.epochs if config.steps is None else None),
        # the weights are the best epoch's where the run kept it (keep_best), else the last epoch's
        "weights_of_epoch": summary.best_epoch if config.keep_best else "last",
        "monitor": summary.monitor, "best_value": summary.best_value,
        "last_val_accuracy": summary.val_accuracy, "last_val_loss": summary.val_loss,
        "load_with": "torch.load(weights, weights_only=True), then model.load_state_dict(...)",
    }


def copy_saved(weights: str | Path, dest: str | Path) -> Path:
    """Copy kept weights and their JSON to `dest` (a .pt path; its JSON goes beside it); returns dest.
    UserError (one sentence) when the kept model is gone or the destination cannot be written."""
    weights, dest = Path(weights), Path(dest)
    _not_json(dest)
    if not weights.is_file() or not meta_path(weights).is_file():
        raise UserError("This run's trained weights are no longer kept (only the last Run's models are); run it "
                        "again to save its model.")
    try:
        doc = json.loads(meta_path(weights).read_text(encoding="utf-8"))
        doc["weights"] = dest.name
        with atomic_path(dest) as part:
            shutil.copyfile(weights, part)
        folder = pretrained_path(weights)
        if doc.get("pretrained") and folder.is_dir():  # a Hugging Face model's own folder goes with it
            staged = pretrained_path(dest).with_name(f"{pretrained_path(dest).name}.part-{os.getpid()}")
            shutil.rmtree(staged, ignore_errors=True)
            shutil.copytree(folder, staged)
            shutil.rmtree(pretrained_path(dest), ignore_errors=True)
            staged.rename(pretrained_path(dest))
            doc["pretrained"] = pretrained_path(dest).name
        write_atomic(meta_path(dest), json.dumps(doc, indent=1))
    except OSError as exc:
        raise UserError(f"{printable(dest)} cannot be written ({exc.strerror or type(exc).__name__}); choose "
                        "another folder.") from None
    except ValueError:
        raise UserError("The kept description of this model is damaged; run it again to save its model.") from None
    return dest


def kept_weights(run) -> Path:
    """The trained weights a stored run saved (its summary's `saved_model`, with the JSON beside them naming this
    run); UserError (one sentence) when it saved none, they are gone, or another run's have replaced them."""
    rid = printable(run.id)[:64]
    kept = run.summary.saved_model
    if run.config.mode != "train" or not isinstance(kept, str) or not kept:
        why = run.summary.saved_model_error
        why = f" ({printable(why)})" if isinstance(why, str) and why else ""
        raise UserError(f"Run {rid} kept no trained weights{why}; train with bench --save-model FILE.pt (or Save "
                        "Trained Model… in the window), then export --weights FILE.pt.")
    weights = Path(kept)
    try:
        doc = json.loads(meta_path(weights).read_text(encoding="utf-8")) if weights.is_file() else None
    except (OSError, UnicodeDecodeError, ValueError, RecursionError):
        doc = {}
    if doc is None:
        raise UserError(f"Run {rid}'s trained weights are no longer at {printable(weights)} (moved or removed; "
                        "the window keeps only the last Run's models); run it again with --save-model.")
    if not isinstance(doc, dict) or doc.get("run_id") != run.id:
        other = doc.get("run_id") if isinstance(doc, dict) and isinstance(doc.get("run_id"), str) else None
        if other:
            raise UserError(f"{printable(weights.name)} now holds the weights of run {printable(other)[:64]}, saved "
                            f"over run {rid}'s; export those with --weights, or run this one again with "
                            "--save-model.")
        raise UserError(f"The description beside {printable(weights.name)} is damaged or names no run; run {rid} "
                        "again with --save-model.")
    return weights
