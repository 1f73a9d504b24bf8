"""A Hugging Face model folder as a model: `--model path/to/folder` where the folder holds a `config.json` (and
`model.safetensors`, and tokenizer files), as `save_pretrained` writes it. Read here without transformers (the JSON
and the file names only: front ends ask before anything loads); hf_model.py builds it, in a run's process.

What a folder is refused for, each in one sentence: no config.json, a config that is not JSON, an architecture whose
task MPS Studio does not know (sequence classification, causal LM, masked LM, image classification), code of its own
(`auto_map`: remote code never runs here), and weights only as a pickle (`pytorch_model.bin`: loading a pickle runs
code; safetensors hold data only). Nothing is ever downloaded: the folder is loaded with `local_files_only`.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from ..basics.errors import UserError
from ..basics.formatting import error_line, printable

TASKS = {"ForSequenceClassification": "sequence classification", "ForCausalLM": "causal LM",
         "LMHeadModel": "causal LM", "ForMaskedLM": "masked LM", "ForImageClassification": "image classification"}
FINETUNES = ("full", "lora", "head")  # every weight; LoRA adapters (peft); the task head only, the body frozen
MAX_CONFIG_BYTES = 8 * 1024**2
INSTALL_HF = "install them with pip install 'mpsstudio[hf]'"
SYNTHETIC_ONLY = ("A model folder trains on batches made for its task (token ids and their labels, or pixel values) "
                  "here; use --dataset synthetic.")


def is_model_folder(name: str) -> bool:
    """A folder holding config.json: a Hugging Face model (a folder of class subfolders is a dataset)."""
    try:
        path = Path(name).expanduser()
        return path.is_dir() and (path / "config.json").is_file()
    except (OSError, ValueError):
        return False


@dataclass(frozen=True)
class HfFolder:
    """What a model folder's config says: its architecture and task, the input it takes and its labels."""

    path: Path
    architecture: str
    task: str
    model_type: str
    vocab_size: int
    max_positions: int
    num_labels: int
    image_size: int
    channels: int
    weights: str  # "model.safetensors" (or its index)

    @property
    def vision(self) -> bool:
        return self.task == "image classification"

    def default_seq_len(self) -> int:
        """A quarter of the positions it was made for, at least 16 and at most 512 (said with the run)."""
        return max(16, min(512, self.max_positions // 4)) if self.max_positions else 128

    def describe(self) -> str:
        what = (f"{self.channels}x{self.image_size}x{self.image_size} images" if self.vision else
                f"tokens (vocabulary {self.vocab_size:,}, up to {self.max_positions:,} positions)")
        return f"Hugging Face {self.architecture} ({self.task}) from {self.path.name}: {what}."


def _number(config: dict, *keys: str, default: int = 0) -> int:
    for key in keys:
        value = config.get(key)
        if isinstance(value, int) and not isinstance(value, bool) and value > 0:
            return value
    return default


def read_folder(name: str) -> HfFolder:
    """The folder's config read and checked (nothing in it runs); UserError naming what is wrong."""
    path = Path(name).expanduser()
    shown = printable(path.name or str(path))
    if not path.is_dir():
        raise UserError(f"The model folder '{printable(str(name))}' was not found; check the path.")
    config_file = path / "config.json"
    if not config_file.is_file():
        raise UserError(f"'{shown}' has no config.json, so it is not a Hugging Face model folder; give the folder "
                        "save_pretrained wrote (config.json and model.safetensors).")
    try:
        if config_file.stat().st_size > MAX_CONFIG_BYTES:
            raise ValueError(f"{config_file.stat().st_size:,} bytes")
        config = json.loads(config_file.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise UserError(f"The config.json in '{shown}' cannot be read ({error_line(exc, 120)}); it must be the JSON "
                        "save_pretrained writes.") from None
    if not isinstance(config, dict):
        raise UserError(f"The config.json in '{shown}' is not a JSON object; it must be the JSON save_pretrained "
                        "writes.")
    if config.get("auto_map"):
        raise UserError(f"'{shown}' needs code of its own (config.json's auto_map: remote code), which MPS Studio "
                        "never runs; use a model transformers knows (its config's architectures without auto_map).")
    architectures = config.get("architectures")
    arch = architectures[0] if isinstance(architectures, list) and architectures and isinstance(
        architectures[0], str) else ""
    task = next((words for suffix, words in TASKS.items() if arch.endswith(suffix)), "")
    if not task:
        known = ", ".join(sorted({f"*{s}" for s in TASKS}))
        raise UserError(f"'{shown}' is a {printable(arch or 'model without architectures')}, whose task MPS Studio "
                        f"does not know; it trains {known}.")
    if (path / "model.safetensors").is_file() or (path / "model.safetensors.index.json").is_file():
        weights = "model.safetensors"
    elif any(path.glob("*.bin")) or any(path.glob("*.pt")) or any(path.glob("*.pth")):
        raise UserError(f"'{shown}' holds its weights only as a pickle (pytorch_model.bin), and loading a pickle runs "
                        "code; save them as safetensors (model.save_pretrained(folder) does by default) and try "
                        "again.")
    else:
        raise UserError(f"'{shown}' has no weights (model.safetensors); save the model with save_pretrained.")
    labels = config.get("id2label")
    num_labels = len(labels) if isinstance(labels, dict) and len(labels) >= 2 else _number(config, "num_labels",
                                                                                            default=2)
    return HfFolder(path=path, architecture=arch, task=task, model_type=str(config.get("model_type") or ""),
                    vocab_size=_number(config, "vocab_size"),
                    max_positions=_number(config, "max_position_embeddings", "n_positions", "max_seq_len",
                                          "n_ctx"),
                    num_labels=max(2, num_labels), image_size=_number(config, "image_size", default=224),
                    channels=_number(config, "num_channels", default=3), weights=weights)


def finetune_of(options: dict) -> tuple[str, int, int, bool]:
    """(mode, LoRA rank, LoRA alpha, gradient checkpointing) of a run's options; UserError for values outside."""
    mode = options.get("finetune", "full")
    if mode not in FINETUNES:
        raise UserError(f"Unknown fine-tuning {printable(str(mode))[:40]!r}; choose full, lora or head.")
    rank, alpha = options.get("lora_rank", 8), options.get("lora_alpha", 16)
    for value, what in ((rank, "LoRA rank"), (alpha, "LoRA alpha")):
        if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= 4096:
            raise UserError(f"The {what} must be a whole number from 1 to 4,096, not {printable(repr(value))[:40]}.")
    checkpointing = options.get("checkpointing", False)
    if not isinstance(checkpointing, bool):
        raise UserError("'checkpointing' must be true or false.")
    return mode, rank, alpha, checkpointing


def stored_parameters(folder: HfFolder) -> int:
    """The values the folder's safetensors hold, read from their headers (an 8-byte length, then JSON: each tensor's
    shape); nothing is loaded. 0 where a header cannot be read."""
    import math

    files = [folder.path / "model.safetensors"]
    index = folder.path / "model.safetensors.index.json"
    if index.is_file():
        try:
            shards = json.loads(index.read_text(encoding="utf-8")).get("weight_map", {}).values()
            files = [folder.path / name for name in sorted(set(shards)) if "/" not in name and "\\" not in name]
        except (OSError, ValueError, AttributeError):
            return 0
    total = 0
    for file in files:
        try:
            with open(file, "rb") as f:
                size = int.from_bytes(f.read(8), "little")
                if not 0 < size <= MAX_CONFIG_BYTES * 4:
                    return 0
                header = json.loads(f.read(size))
        except (OSError, ValueError):
            return 0
        total += sum(math.prod(t["shape"]) for k, t in header.items()
                     if k != "__metadata__" and isinstance(t, dict) and isinstance(t.get("shape"), list))
    return total
