"""A text dataset tokenized by the model folder's own tokenizer (transformers' AutoTokenizer, from the folder alone:
no download, no remote code), laid out in rows of the run's sequence length, split, and cached by content.

- **Packed** (the default for plain text): every example's tokens one after another (an end-of-text token after
  each JSON "text" and at each file's end), cut into rows of `seq_len`; every position a real token, the last
  partial row left out (said). The validation split is the last 10 % of the rows (nanoGPT's: no row in both).
- **Padded** (the default for chat and prompt/completion): one example a row, cut at `seq_len` (counted, said) and
  padded; padding is masked out of attention and of the loss, and tokens/s counts real tokens only. The validation
  split is a seeded 10 % of the rows.
- **Labels**: the tokens themselves (transformers shifts them), -100 where nothing is learnt: padding, a prompt
  (prompt/completion), and a chat's turns before its last assistant message.

Rows are int32 files in the cache (`cache_dir()/text/<key>/`), memory-mapped: a file larger than memory is streamed
through the tokenizer and never held. The key is a sha256 of the files' bytes, the tokenizer's files, the sequence
length and the layout, so a changed file or tokenizer tokenizes again."""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ..basics import paths
from ..basics.errors import UserError
from ..basics.formatting import error_line, printable
from .text import Example, TextFiles, content_hash, read_examples

VERSION = 1  # of the cache's layout: a new one tokenizes again
LAYOUTS = ("packed", "padded")
VAL_FRACTION = 0.1
IGNORE = -100  # transformers' label for "not learnt"
ENCODE_BATCH = 256  # examples tokenized in one call
TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json", "chat_template.jinja",
                   "chat_template.json", "vocab.json", "merges.txt", "tokenizer.model", "vocab.txt",
                   "added_tokens.json", "spiece.model")
MAX_CONFIG_BYTES = 8 * 1024**2
VOCABULARY_FILES = ("tokenizer.json", "vocab.json", "tokenizer.model", "vocab.txt", "spiece.model")


def check_tokenizer_files(folder: Path) -> None:
    """UserError where the model folder has no tokenizer, or one that needs code of its own (checked before anything
    runs: only file names and tokenizer_config.json are read)."""
    shown = printable(folder.name or str(folder))
    if not any((folder / name).is_file() for name in VOCABULARY_FILES):
        raise UserError(f"'{shown}' has no tokenizer (tokenizer.json), so its text cannot be tokenized; save it "
                        "beside the model with tokenizer.save_pretrained(folder).")
    config = folder / "tokenizer_config.json"
    if config.is_file():
        try:
            if config.stat().st_size > MAX_CONFIG_BYTES:
                raise ValueError("too large")
            data = json.loads(config.read_text(encoding="utf-8"))
        except (OSError, ValueError, RecursionError) as exc:
            raise UserError(f"'{shown}''s tokenizer_config.json cannot be read ({error_line(exc, 80, with_type=False)}"
                            "); save the tokenizer with tokenizer.save_pretrained(folder).") from None
        if isinstance(data, dict) and data.get("auto_map"):
            raise UserError(f"'{shown}''s tokenizer needs code of its own (tokenizer_config.json's auto_map: remote "
                            "code), which MPS Studio never runs; use a tokenizer transformers knows.")


def load_tokenizer(folder: Path, vocab_size: int):
    """The folder's tokenizer (AutoTokenizer, local files only, no remote code); UserError where it cannot be
    loaded or makes ids past the model's embedding."""
    check_tokenizer_files(folder)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")  # nothing is downloaded, whatever the folder's files say
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    shown = printable(folder.name or str(folder))
    try:
        from transformers import AutoTokenizer
    except ImportError:
        raise UserError("A model folder's tokenizer needs transformers; install it with pip install "
                        "'mpsstudio[hf]'.") from None
    try:
        tokenizer = AutoTokenizer.from_pretrained(str(folder), local_files_only=True,
                                                  trust_remote_code=False)
    except (Exception, SystemExit) as exc:
        raise UserError(f"The tokenizer of '{shown}' could not be loaded ({error_line(exc, 160)}); save it with "
                        "tokenizer.save_pretrained(folder).") from None
    if vocab_size and len(tokenizer) > vocab_size:
        raise UserError(f"'{shown}''s tokenizer has {len(tokenizer):,} tokens and its model's embedding "
                        f"{vocab_size:,}: ids past the embedding would fail; save the tokenizer the model was made "
                        "with (or resize the model's embeddings).")
    return tokenizer


@dataclass
class Encoded:
    """What tokenizing found, for the notes: examples by kind, truncated examples, chats trained on whole."""

    examples: int = 0
    truncated: int = 0
    unlearnt: int = 0  # left out: nothing to learn in the sequence (an empty text, a prompt that fills it)
    unmasked_chats: int = 0
    kinds: set | None = None


class _Encoder:
    """Examples -> (token ids, how many leading tokens are not learnt), in batches through the tokenizer."""

    def __init__(self, tokenizer, where: str):
        self.tokenizer, self.where = tokenizer, where
        self.eos = tokenizer.eos_token_id

    def _ids(self, texts: list[str], special: bool) -> list[list[int]]:
        if not texts:
            return []
        return [list(ids) for ids in self.tokenizer(texts, add_special_tokens=special)["input_ids"]]

    def _end(self, ids: list[int]) -> list[int]:
        return ids + [self.eos] if self.eos is not None and (not ids or ids[-1] != self.eos) else ids

    def chat(self, messages) -> tuple[str, str | None]:
        template = getattr(self.tokenizer, "chat_template", None)
        if not template:
            raise UserError(f"{self.where} holds chat messages, and the model folder's tokenizer has no chat template "
                            "to render them; give the data as \"text\" lines, or a tokenizer saved with its "
                            "chat_template.")
        turns = [{"role": role, "content": content} for role, content in messages]
        try:
            full = self.tokenizer.apply_chat_template(turns, tokenize=False)
            prompt = (self.tokenizer.apply_chat_template(turns[:-1], tokenize=False, add_generation_prompt=True)
                      if len(turns) > 1 and turns[-1]["role"] == "assistant" else None)
        except Exception as exc:  # the template's own error (jinja, in transformers' sandbox)
            raise UserError(f"The tokenizer's chat template could not render {self.where}'s messages "
                            f"({error_line(exc, 120)}); check their roles.") from None
        return str(full), (str(prompt) if prompt is not None else None)

    def encode(self, batch: list[Example], txt: bool, found: Encoded) -> list[tuple[list[int], int]]:
        """One batch of one file's examples: (ids, masked prefix) each. A .txt's paragraphs take no special tokens
        (the end-of-text token comes at the file's end); a JSON "text" takes the tokenizer's and one at its end."""
        kind = batch[0].kind
        found.kinds = (found.kinds or set()) | {kind}
        found.examples += len(batch)
        if kind == "text":
            ids = self._ids([e.text or "" for e in batch], special=not txt)
            return [(i if txt else self._end(i), 0) for i in ids]
        if kind == "prompt":
            prompts = self._ids([e.prompt or "" for e in batch], special=True)
            fulls = self._ids([(e.prompt or "") + (e.completion or "") for e in batch], special=True)
            return [(self._end(f), _common(p, f)) for p, f in zip(prompts, fulls)]
        rendered = [self.chat(e.messages) for e in batch]
        fulls = self._ids([r[0] for r in rendered], special=False)
        prompts = self._ids([r[1] or "" for r in rendered], special=False)
        out = []
        for (_, prompt_text), full, prompt in zip(rendered, fulls, prompts):
            if prompt_text is None:
                found.unmasked_chats += 1
            out.append((full, _common(prompt, full) if prompt_text is not None else 0))
        return out


def _common(prefix: list[int], ids: list[int]) -> int:
    """How many leading ids the two share (a prompt's tokens at the start of its full text's)."""
    n = 0
    for a, b in zip(prefix, ids):
        if a != b:
            break
        n += 1
    return min(n, len(ids) - 1) if ids else 0


class _Writer:
    """One part's rows (training or validation files) written as int32 files: ids, labels, real lengths."""

    def __init__(self, folder: Path, part: str, seq_len: int, layout: str, pad: int):
        self.seq_len, self.layout, self.pad = seq_len, layout, pad
        self.files = {k: open(folder / f"{part}_{k}.bin", "wb") for k in ("ids", "labels", "lengths")}
        self.ids: list[int] = []  # packed: the stream not yet written as whole rows
        self.labels: list[int] = []
        self.rows = self.tokens = self.dropped = 0

    def add(self, ids: list[int], masked: int, found: Encoded) -> None:
        labels = [IGNORE] * masked + ids[masked:]
        if self.layout == "packed":
            self.ids += ids
            self.labels += labels
            whole = len(self.ids) // self.seq_len * self.seq_len
            if whole:
                self._rows(self.ids[:whole], self.labels[:whole], [self.seq_len] * (whole // self.seq_len))
                del self.ids[:whole], self.labels[:whole]
            return
        if len(ids) > self.seq_len:
            found.truncated += 1
            ids, labels = ids[:self.seq_len], labels[:self.seq_len]
        if not ids or all(v == IGNORE for v in labels[1:]):
            found.unlearnt += 1  # nothing to learn in it (an empty text, a prompt that fills the row)
            return
        gap = self.seq_len - len(ids)
        self._rows(ids + [self.pad] * gap, labels + [IGNORE] * gap, [len(ids)])

    def _rows(self, ids, labels, lengths) -> None:
        self.files["ids"].write(np.asarray(ids, dtype=np.int32).tobytes())
        self.files["labels"].write(np.asarray(labels, dtype=np.int32).tobytes())
        self.files["lengths"].write(np.asarray(lengths, dtype=np.int32).tobytes())
        self.rows += len(lengths)
        self.tokens += sum(lengths)

    def close(self) -> dict:
        self.dropped = len(self.ids)
        for f in self.files.values():
            f.close()
        return {"rows": self.rows, "tokens": self.tokens, "dropped": self.dropped}


def cache_key(files: TextFiles, tokenizer_folder: Path, seq_len: int, layout: str) -> str:
    import hashlib

    digest = hashlib.sha256(f"v{VERSION}:{seq_len}:{layout}:{content_hash(files)}:".encode())
    for name in TOKENIZER_FILES:
        file = tokenizer_folder / name
        if file.is_file():
            digest.update(name.encode() + b":" + file.read_bytes())
    return digest.hexdigest()[:32]


def _parts(files: TextFiles) -> list[tuple[str, tuple[Path, ...]]]:
    return [("train", files.train)] + ([("val", files.val)] if files.val else [])


def tokenize(files: TextFiles, tokenizer, folder: Path, seq_len: int, layout: str,
             progress: Callable[[str, float], None] | None = None) -> tuple[Path, dict]:
    """The files tokenized into the cache (reused when the key matches): (its folder, its meta)."""
    root = paths.cache_dir() / "text"
    key = cache_key(files, folder, seq_len, layout)
    target = root / key
    meta = _read_meta(target, seq_len)
    if meta is not None:
        return target, {**meta, "cached": True}
    staged = root / f"{key}.part-{os.getpid()}"
    try:
        shutil.rmtree(staged, ignore_errors=True)
        staged.mkdir(parents=True)
        pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else (tokenizer.eos_token_id or 0)
        found = Encoded()
        meta = {"version": VERSION, "seq_len": seq_len, "layout": layout, "parts": {}}
        total = sum(len(group) for _, group in _parts(files))
        done = 0
        for part, group in _parts(files):
            writer = _Writer(staged, part, seq_len, layout, pad)
            for file in group:
                if progress is not None:
                    progress(f"Tokenizing {printable(file.name)}", done / max(1, total))
                _tokenize_file(file, tokenizer, writer, found)
                done += 1
            meta["parts"][part] = writer.close()
        meta.update(examples=found.examples, truncated=found.truncated, unmasked_chats=found.unmasked_chats,
                    unlearnt=found.unlearnt,
                    kinds=sorted(found.kinds or ()))
        (staged / "meta.json").write_text(json.dumps(meta))
        try:
            staged.rename(target)
        except OSError:  # another run made it meanwhile: theirs is the same tokenization
            shutil.rmtree(staged, ignore_errors=True)
    except OSError as exc:
        shutil.rmtree(staged, ignore_errors=True)
        raise UserError(f"The tokenized text could not be written to {root} "
                        f"({exc.strerror or error_line(exc, 100)}); free some disk space and try again.") from None
    except BaseException:
        shutil.rmtree(staged, ignore_errors=True)
        raise
    return target, {**meta, "cached": False}


def _tokenize_file(file: Path, tokenizer, writer: _Writer, found: Encoded) -> None:
    txt = file.suffix.lower() == ".txt"
    encoder = _Encoder(tokenizer, f"'{printable(file.name)}'")
    batch: list[Example] = []
    for example in read_examples(file):
        batch.append(example)
        if len(batch) == ENCODE_BATCH:
            for ids, masked in encoder.encode(batch, txt, found):
                writer.add(ids, masked, found)
            batch = []
    if batch:
        for ids, masked in encoder.encode(batch, txt, found):
            writer.add(ids, masked, found)
    if txt and encoder.eos is not None:
        writer.add([encoder.eos], 0, found)  # the file's end (packed: the next file's text follows it)


def _read_meta(folder: Path, seq_len: int) -> dict | None:
    """A cached tokenization's meta where its files are whole (sizes as it says), else None."""
    try:
        meta = json.loads((folder / "meta.json").read_text())
        for part, info in meta["parts"].items():
            rows = info["rows"]
            for kind, per_row in (("ids", seq_len), ("labels", seq_len), ("lengths", 1)):
                if (folder / f"{part}_{kind}.bin").stat().st_size != 4 * rows * per_row:
                    return None
        return meta if meta.get("version") == VERSION else None
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return None
