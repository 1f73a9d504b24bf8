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
import math
import os
import re
import stat
from dataclasses import dataclass, replace
from pathlib import Path

from ..basics.errors import UserError
from ..basics.formatting import error_line, printable

TASKS = {"ForSequenceClassification": "sequence classification", "ForCausalLM": "causal LM",
         "LMHeadModel": "causal LM", "ForMaskedLM": "masked LM", "ForImageClassification": "image classification"}
FINETUNES = ("full", "lora", "head")  # every weight; LoRA adapters (peft); the task head only, the body frozen
MAX_CONFIG_BYTES = 8 * 1024**2
MAX_DEPTH = 32  # JSON nesting a config may have (save_pretrained writes 3 or 4 levels)
MAX_DIMENSION = 1 << 20  # any size field of a config (layers, widths, vocabulary, heads)
MAX_POSITIONS = 1 << 31  # a context length (a rotary model's allocates nothing for it)
# Models whose input is sound (their sequence classifiers take waveforms or spectrograms, not token ids): refused
AUDIO_TYPES = {"wav2vec2", "wav2vec2-conformer", "wav2vec2-bert", "hubert", "wavlm", "unispeech", "unispeech-sat", "sew",
               "sew-d", "data2vec-audio", "whisper", "audio-spectrogram-transformer", "clap", "mctct",
               "speech_to_text", "speecht5", "seamless_m4t", "encodec", "mimi", "moonshine"}
AUDIO_FIELDS = ("num_mel_bins", "conv_dim", "feat_extract_norm", "sampling_rate")
# Every failure a reader of a user's file can meet on hostile content: one sentence each, never a traceback
READ_ERRORS = (OSError, ValueError, RecursionError, TypeError, AttributeError, OverflowError, KeyError, IndexError)
# Fields that give a transformer's size (the first one a config has): hidden width, layers, feed-forward width
WIDTH = ("hidden_size", "n_embd", "d_model", "dim", "embed_dim")
LAYERS = ("num_hidden_layers", "n_layer", "num_layers", "n_layers")
FEED_FORWARD = ("intermediate_size", "n_inner", "ffn_dim", "hidden_dim", "d_ff")
INSTALL_HF = "install them with pip install 'mpsstudio[hf]'"
SYNTHETIC_ONLY = ("A model folder trains on batches made for its task (--dataset synthetic), or a causal LM on your "
                  "text: a .txt, .jsonl or .parquet file, or a folder of them.")


def is_model_folder(name: str) -> bool:
    """A folder holding config.json: a Hugging Face model (a folder of class subfolders is a dataset)."""
    try:
        path = Path(name).expanduser()
        config = path / "config.json"
        return path.is_dir() and (config.exists() or config.is_symlink())  # read_folder refuses what is not a file
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
    stored: int = 0  # the values its safetensors hold, from their headers (read_folder checks them once)

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


def regular_file(path: Path, inside: Path) -> bool:
    """Whether `path` is a regular file within the folder `inside` (links followed): never a FIFO, a device or a link
    out of the folder, whose reading could block or read what is not the model's."""
    try:
        resolved = path.resolve()
        return stat.S_ISREG(os.stat(resolved).st_mode) and resolved.is_relative_to(inside.resolve())
    except (OSError, ValueError, RuntimeError):
        return False


def _depth(value, limit: int) -> int:
    """The nesting depth of a parsed JSON value, counted without recursion (stops past `limit`)."""
    deepest, stack = 0, [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if depth > limit:
            return depth
        deepest = max(deepest, depth)
        children = item.values() if isinstance(item, dict) else item if isinstance(item, list) else ()
        stack.extend((child, depth + 1) for child in children if isinstance(child, (dict, list)))
    return deepest


def read_json(file: Path, folder: Path, what: str) -> object:
    """A JSON file of a model folder, checked as a file (regular, in the folder, at most MAX_CONFIG_BYTES) and as JSON
    (at most MAX_DEPTH levels); UserError naming what is wrong."""
    shown = printable(folder.name or str(folder))
    if not regular_file(file, folder):
        raise UserError(f"The {what} in '{shown}' is not a regular file inside the folder (a pipe, a device or a link "
                        "out of it); MPS Studio reads only the folder's own files.")
    try:
        size = file.stat().st_size
        if size > MAX_CONFIG_BYTES:
            raise ValueError(f"{size:,} bytes, more than {MAX_CONFIG_BYTES:,}")
        data = json.loads(file.read_text(encoding="utf-8"))
        if _depth(data, MAX_DEPTH) > MAX_DEPTH:
            raise ValueError(f"nested more than {MAX_DEPTH} levels deep")
    except READ_ERRORS as exc:
        why = "nested too deep" if isinstance(exc, RecursionError) else error_line(exc, 120)
        raise UserError(f"The {what} in '{shown}' cannot be read ({why}); it must be the JSON save_pretrained "
                        "writes.") from None
    return data


def _stem(text: str) -> str:
    return re.sub(r"[^a-z0-9]", "", text.lower())


def _agrees(model_type: str, architecture: str) -> bool:
    """Whether an architecture's class is of the model type transformers builds for the config (model_type decides
    the class AutoModel makes; architectures, the task): "gpt2" / GPT2LMHeadModel, "gpt_neox" / GPTNeoXForCausalLM,
    "gemma3_text" / Gemma3ForCausalLM. Lenient: a model type's first word is enough."""
    if not model_type:
        return True
    arch = _stem(architecture)
    words = [w for w in re.split(r"[_\-]", model_type.lower()) if w]
    candidates = {_stem(model_type)} | ({_stem("".join(words[:-1]))} if len(words) > 1 and
                                         words[-1] in ("text", "vision", "model", "lm") else set())
    for stem in candidates:  # the type, then one word its classes leave out ("gemma3_text" -> Gemma3)
        if stem and arch.startswith(stem) and not arch[len(stem):len(stem) + 1].isdigit():  # "gpt" is not GPT2
            return True
    return False


def implied_parameters(config: dict) -> int | None:
    """At least how many parameters a transformer's config implies, from the config alone: the token embedding, and
    per layer the attention's query and output projections (2 x width^2), its key and value projections (grouped
    query attention: 2 x width x the key/value heads' width) and the feed-forward's two projections (2 x width x its
    width). A lower bound (no position table: rotary models keep none; no biases, norms, gates or heads), so that a
    real folder is never refused by it; None where the config does not say its width and layers."""
    width, layers = _number(config, *WIDTH), _number(config, *LAYERS)
    if not width or not layers:
        return None
    ff = _number(config, *FEED_FORWARD, default=4 * width)
    heads = _number(config, "num_attention_heads", "n_head")
    kv_heads = _number(config, "num_key_value_heads", default=heads)
    kv_width = width * kv_heads // heads if heads and kv_heads <= heads else width
    return _number(config, "vocab_size") * width + layers * (2 * width * width + 2 * width * kv_width + 2 * width * ff)


def read_folder(name: str, memory_bytes: int | None = None) -> HfFolder:
    """The folder's config read and checked (nothing in it runs); UserError naming what is wrong. Checked here, before
    anything is built: its files (regular, inside it), the config's JSON (size, depth), its sizes (each field, and the
    parameters it implies against `memory_bytes`, default this machine's memory), that its model type builds the
    class its architectures name, that a token model says its vocabulary, and that its weights are this config's."""
    path = Path(name).expanduser()
    shown = printable(path.name or str(path))
    if not path.is_dir():
        raise UserError(f"The model folder '{printable(str(name))}' was not found; check the path.")
    config_file = path / "config.json"
    if not (config_file.exists() or config_file.is_symlink()):
        raise UserError(f"'{shown}' has no config.json, so it is not a Hugging Face model folder; give the folder "
                        "save_pretrained wrote (config.json and model.safetensors).")
    config = read_json(config_file, path, "config.json")
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
        raise UserError(f"'{shown}' is a {printable(arch[:80] or 'model without architectures')}, whose task MPS "
                        f"Studio does not know; it trains {known}.")
    model_type = config.get("model_type")
    if model_type is not None and not isinstance(model_type, str):
        raise UserError(f"'{shown}''s config.json has model_type = {printable(repr(model_type))[:40]}, not a name; "
                        "fix config.json (save_pretrained writes the model's type, such as \"gpt2\").")
    model_type = model_type or ""
    if model_type.lower() in AUDIO_TYPES or any(k in config for k in AUDIO_FIELDS):
        raise UserError(f"'{shown}' is an audio model ({printable(model_type or arch)[:40]}), whose input is sound; "
                        "MPS Studio trains models of token ids or of images.")
    if not _agrees(model_type, arch):
        raise UserError(f"'{shown}' contradicts itself: its config's model_type {printable(model_type[:40])!r} builds "
                        f"another model than its architectures' {printable(arch[:80])}, so it would train a model of "
                        "random weights under this folder's name; fix config.json (save_pretrained writes both).")
    _check_sizes(config, shown)
    weights = _weights_file(path, shown)
    if task != "image classification" and not _number(config, "vocab_size"):
        raise UserError(f"'{shown}' is a token model whose config.json says no vocab_size (a whole number above 0), "
                        "so its batches cannot be made; save the config with save_pretrained.")
    implied = implied_parameters(config)
    if implied is not None:
        _check_memory(implied, shown, memory_bytes)
    labels = config.get("id2label")
    num_labels = len(labels) if isinstance(labels, dict) and len(labels) >= 2 else _number(config, "num_labels",
                                                                                            default=2)
    folder = HfFolder(path=path, architecture=arch, task=task, model_type=model_type,
                      vocab_size=_number(config, "vocab_size"),
                      max_positions=_number(config, "max_position_embeddings", "n_positions", "max_seq_len",
                                            "n_ctx"),
                      num_labels=max(2, min(num_labels, MAX_DIMENSION)),
                      image_size=_number(config, "image_size", default=224),
                      channels=_number(config, "num_channels", default=3), weights=weights)
    stored = stored_parameters(folder)
    if not stored:
        raise UserError(f"'{shown}''s weights cannot be read (model.safetensors, or a shard its index names, is "
                        "missing, empty or has a header that is not safetensors'); save the model with "
                        "save_pretrained.")
    if implied is not None and stored < implied // 10:
        raise UserError(f"'{shown}''s weights hold {stored:,} values where its config implies about {implied:,} "
                        "parameters: they are not this config's weights, and the rest would train from random "
                        "values; give the folder save_pretrained wrote.")
    return replace(folder, stored=stored)


def _check_sizes(config: dict, shown: str) -> None:
    """Every size field a whole number from 1 to MAX_DIMENSION, or a list of them (a vision model's per-stage heads
    and widths); positions up to MAX_POSITIONS (a rotary model's context allocates nothing); the heads dividing the
    width; one width where a config names two."""
    for key in (*WIDTH, *LAYERS, *FEED_FORWARD, "vocab_size", "max_position_embeddings", "n_positions",
                "num_attention_heads", "n_head", "num_key_value_heads", "image_size", "num_channels", "num_labels"):
        value = config.get(key)
        if value is None:
            continue
        top = MAX_POSITIONS if key in ("max_position_embeddings", "n_positions") else MAX_DIMENSION
        values = value if isinstance(value, list) and value and key not in ("vocab_size",) else [value]
        if not all(isinstance(v, int) and not isinstance(v, bool) and 0 < v <= top for v in values):
            raise UserError(f"'{shown}''s config.json has {key} = {printable(repr(value))[:40]}, not a whole number "
                            f"from 1 to {top:,}; fix config.json.")
    widths = {config[k] for k in WIDTH if isinstance(config.get(k), int) and not isinstance(config.get(k), bool)}
    if len(widths) > 1:
        raise UserError(f"'{shown}''s config.json names two widths ({', '.join(f'{k} = {config[k]}' for k in WIDTH if k in config)}); "
                        "transformers would build one and load weights of the other: keep the one save_pretrained "
                        "wrote.")
    width, heads = _number(config, *WIDTH), _number(config, "num_attention_heads", "n_head")
    if width and heads and width % heads:
        raise UserError(f"'{shown}''s config.json has {heads} attention heads for a width of {width}, which they do "
                        "not divide; fix config.json.")
    eps = config.get("layer_norm_epsilon", config.get("layer_norm_eps", config.get("rms_norm_eps")))
    if eps is not None and (isinstance(eps, bool) or not isinstance(eps, (int, float)) or not 0 < eps < 1):
        raise UserError(f"'{shown}''s config.json has a norm epsilon of {printable(repr(eps))[:40]}, not a small "
                        "positive number; fix config.json.")


def _check_memory(implied: int, shown: str, memory_bytes: int | None) -> None:
    """Refused before anything is built where the weights alone (fp32) would not fit the machine's memory."""
    if memory_bytes is None:
        import psutil

        memory_bytes = int(psutil.virtual_memory().total)
    weights = implied * 4
    if weights > memory_bytes:
        from ..basics.formatting import fmt_bytes

        raise UserError(f"'{shown}''s config implies about {implied:,} parameters: {fmt_bytes(weights)} of fp32 "
                        f"weights alone, more than this machine's {fmt_bytes(memory_bytes)} of memory; use a smaller "
                        "model.")


def _weights_file(path: Path, shown: str) -> str:
    """The folder's safetensors (or its index), regular files inside it; UserError for pickles or none."""
    for name in ("model.safetensors", "model.safetensors.index.json"):
        candidate = path / name
        if candidate.exists() or candidate.is_symlink():
            if not regular_file(candidate, path):
                raise UserError(f"'{shown}''s {name} is not a regular file inside the folder (a pipe, a device or a "
                                "link out of it); MPS Studio reads only the folder's own files.")
            return "model.safetensors"
    if any(path.glob("*.bin")) or any(path.glob("*.pt")) or any(path.glob("*.pth")):
        raise UserError(f"'{shown}' holds its weights only as a pickle (pytorch_model.bin), and loading a pickle runs "
                        "code; save them as safetensors (model.save_pretrained(folder) does by default) and try "
                        "again.")
    raise UserError(f"'{shown}' has no weights (model.safetensors); save the model with save_pretrained.")


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
    shape); nothing is loaded. 0 where a header cannot be read (a lying header, a shard that is not a regular file of
    the folder: never opened, so a pipe cannot block the reader)."""
    files = [folder.path / "model.safetensors"]
    index = folder.path / "model.safetensors.index.json"
    if not regular_file(files[0], folder.path) and index.exists():  # the weights _weights_file chose: one file first
        try:
            data = read_json(index, folder.path, "model.safetensors.index.json")
            shards = data.get("weight_map", {}).values() if isinstance(data, dict) else ()
            files = [folder.path / name for name in sorted({n for n in shards if isinstance(n, str)})
                     if "/" not in name and "\\" not in name]
        except (UserError, *READ_ERRORS):
            return 0
    total = 0
    for file in files:
        if not regular_file(file, folder.path):
            return 0
        try:
            with open(file, "rb") as f:
                size = int.from_bytes(f.read(8), "little")
                if not 0 < size <= MAX_CONFIG_BYTES * 4:
                    return 0
                header = json.loads(f.read(size))
            data_bytes = os.stat(file).st_size - 8 - size
            if not isinstance(header, dict) or _depth(header, MAX_DEPTH) > MAX_DEPTH:
                return 0
            for key, tensor in header.items():
                if key == "__metadata__":
                    continue
                shape = tensor.get("shape") if isinstance(tensor, dict) else None
                offsets = tensor.get("data_offsets") if isinstance(tensor, dict) else None
                if not (isinstance(shape, list) and all(isinstance(d, int) and not isinstance(d, bool) and
                                                        0 <= d <= 1 << 40 for d in shape)):
                    return 0
                if not (isinstance(offsets, list) and len(offsets) == 2 and all(
                        isinstance(o, int) and not isinstance(o, bool) for o in offsets)
                        and 0 <= offsets[0] <= offsets[1] <= data_bytes):
                    return 0  # a tensor past the file's end: truncated, or a header that lies
                total += math.prod(shape)
        except READ_ERRORS:
            return 0
    return total
