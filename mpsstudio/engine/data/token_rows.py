"""A tokenized text dataset as a run takes it: rows of token ids memory-mapped from the cache (tokens.py writes
them), the validation split, the batches a model folder takes (its inputs as a dict: ids, attention mask, labels),
and `load_text`, the whole path from a file to a LoadedDataset with its notes (the layout, the split, the tokens)."""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator
from pathlib import Path

import numpy as np
import torch

from ..basics.errors import UserError
from ..basics.formatting import plural, printable
from ..basics.spec import DataSpec
from . import text, tokens
from .tokens import IGNORE, LAYOUTS, VAL_FRACTION


class TextRows(torch.utils.data.Dataset):
    """Rows of a tokenized part (memory-mapped int32 files), some of them (`index`)."""

    def __init__(self, folder: Path, part: str, seq_len: int, rows: int, index: np.ndarray | None = None):
        self.folder, self.part, self.seq_len, self.total = folder, part, seq_len, rows
        shape = (rows, seq_len)
        empty = np.zeros(shape, dtype=np.int32)  # (np.memmap refuses an empty file)
        self.ids = np.memmap(folder / f"{part}_ids.bin", dtype=np.int32, mode="r", shape=shape) if rows else empty
        self.labels = (np.memmap(folder / f"{part}_labels.bin", dtype=np.int32, mode="r", shape=shape) if rows
                       else empty)
        self.lengths = (np.fromfile(folder / f"{part}_lengths.bin", dtype=np.int32) if rows
                        else np.zeros(0, dtype=np.int32))
        self.index = np.arange(rows) if index is None else np.asarray(index, dtype=np.int64)

    def __len__(self) -> int:
        return int(self.index.shape[0])

    def select(self, positions) -> "TextRows":
        """The rows at these positions of this one (a rank's share, a split)."""
        return TextRows(self.folder, self.part, self.seq_len, self.total, self.index[np.asarray(positions,
                                                                                                  dtype=np.int64)])

    def real_tokens(self) -> int:
        """Tokens that are text, padding excluded."""
        return int(self.lengths[self.index].sum()) if len(self) else 0

    def learnt_tokens(self) -> int:
        """Tokens whose next token is learnt (a label that is not -100 after the first position)."""
        if not len(self):
            return 0
        return sum(int((self.labels[self.index[i:i + 4096], 1:] != IGNORE).sum())  # in pieces: a file past memory
                   for i in range(0, len(self), 4096))

    def batch(self, positions: np.ndarray) -> dict:
        """The rows at these positions as the model takes them: int64 ids, their attention mask and labels."""
        rows = self.index[positions]
        ids = torch.from_numpy(np.asarray(self.ids[rows], dtype=np.int64))
        labels = torch.from_numpy(np.asarray(self.labels[rows], dtype=np.int64))
        lengths = torch.from_numpy(self.lengths[rows].astype(np.int64))
        mask = (torch.arange(self.seq_len).unsqueeze(0) < lengths.unsqueeze(1)).to(torch.int64)
        return {"input_ids": ids, "attention_mask": mask, "labels": labels}

    def __getitem__(self, position: int):
        made = self.batch(np.asarray([position]))
        return {k: v[0] for k, v in made.items()}, made["labels"][0]


def split(folder: Path, meta: dict, seq_len: int, seed: int) -> tuple[TextRows, TextRows | None, str]:
    """(training rows, validation rows or None, how they were split)."""
    parts = meta["parts"]
    train = TextRows(folder, "train", seq_len, parts["train"]["rows"])
    if "val" in parts:
        val = TextRows(folder, "val", seq_len, parts["val"]["rows"])
        return train, val if len(val) else None, "validation from its own files"
    n = len(train)
    if n < 2:
        return train, None, "no validation split (one sequence only)"
    count = max(1, int(round(n * VAL_FRACTION)))
    if meta["layout"] == "packed":
        order = np.arange(n)
        how = f"the last {count:,} of {n:,} sequences for validation"
    else:
        order = np.random.default_rng(seed).permutation(n)
        how = f"{count:,} of {n:,} sequences drawn for validation (seed {seed})"
    return train.select(np.sort(order[:n - count])), train.select(np.sort(order[n - count:])), how


class TextBatches:
    """Batches of token rows for a model folder (its inputs as a dict, the labels beside them), on the device."""

    def __init__(self, rows: TextRows, batch_size: int, device: torch.device, shuffle: bool = True,
                 drop_last: bool = True, seed: int = 0):
        self.rows, self.batch_size, self.device = rows, batch_size, device
        self.shuffle, self.drop_last = shuffle, drop_last
        self.generator = torch.Generator().manual_seed(seed)

    @property
    def steps_per_epoch(self) -> int:
        n = len(self.rows)
        return n // self.batch_size if self.drop_last else math.ceil(n / self.batch_size)

    def raw_epoch(self) -> Iterator[tuple[dict, torch.Tensor]]:
        n, b = len(self.rows), self.batch_size
        order = torch.randperm(n, generator=self.generator) if self.shuffle else torch.arange(n)
        for i in range(self.steps_per_epoch):
            made = self.rows.batch(order[i * b:(i + 1) * b].numpy())
            yield made, made["labels"]

    def place(self, raw):
        inputs, _ = raw
        blocking = self.device.type != "cuda"
        placed = {k: v.to(self.device, non_blocking=not blocking) for k, v in inputs.items()}
        return placed, placed["labels"]

    def epoch(self):
        for raw in self.raw_epoch():
            yield self.place(raw)


def default_layout(files: text.TextFiles) -> str:
    """Packed for plain text, padded for chat and prompt/completion (their prompt masks stay whole examples)."""
    first = next(iter(text.read_examples(files.train[0], text.CHECK_LINES)), None)
    return "packed" if first is None or first.kind == "text" else "padded"


def load_text(name: str, folder: Path, vocab_size: int, seq_len: int, layout: str | None = None, seed: int = 0,
              progress: Callable[[str, float], None] | None = None):
    """A text dataset tokenized by the model folder's tokenizer, split, as a LoadedDataset; UserError naming what
    is wrong with a file, the tokenizer or the layout."""
    from .datasets import LoadedDataset

    if seq_len < 2:
        raise UserError(f"A sequence of {seq_len} token has no next token to learn; give a sequence length of 2 or "
                        "more (--seq-len).")
    files = text.check(name)
    layout = layout or default_layout(files)
    if layout not in LAYOUTS:
        raise UserError(f"Unknown text layout {printable(str(layout))[:40]!r}; choose packed or padded.")
    tokenizer = tokens.load_tokenizer(folder, vocab_size)
    cache, meta = tokens.tokenize(files, tokenizer, folder, seq_len, layout, progress)
    train, val, how = split(cache, meta, seq_len, seed)
    parts = meta["parts"]
    unlearnt = meta.get("unlearnt", 0)
    if not len(train) and unlearnt:
        raise UserError(f"Every example of '{files.name}' has nothing to learn within {seq_len:,} tokens (its prompt "
                        f"fills the sequence, or it is empty: {plural(unlearnt, 'example')}); give a longer sequence "
                        "length (--seq-len).")
    if not len(train):
        made = sum(p["tokens"] + p["dropped"] for p in parts.values())
        raise UserError(f"'{files.name}' holds {plural(made, 'token')} for the model's tokenizer, fewer than one "
                        f"sequence of {seq_len:,}; give more text or a shorter sequence length (--seq-len).")
    real = train.real_tokens()
    per_row = real / len(train)
    notes = [f"tokenized by {printable(folder.name)}'s tokenizer ({'from the cache' if meta['cached'] else 'now'}); "
             f"{plural(meta['examples'], 'example')}, {real:,} training tokens"]
    if layout == "packed":
        notes.append(f"packed: examples one after another in sequences of {seq_len:,} tokens, every position a token"
                     + (f"; the last {plural(parts['train']['dropped'], 'token')} (less than a sequence) left out"
                        if parts["train"]["dropped"] else ""))
    else:
        notes.append(f"padded: one example a sequence of {seq_len:,}, {per_row:,.1f} real tokens on average; padding "
                     "is masked and never counted as tokens"
                     + (f"; {plural(meta['truncated'], 'example')} cut at {seq_len:,} tokens" if meta["truncated"]
                        else ""))
    if unlearnt:
        notes.append(f"{plural(unlearnt, 'example')} left out: nothing to learn within {seq_len:,} tokens (a prompt "
                     "that fills the sequence, or no text)")
    if meta.get("unmasked_chats"):
        notes.append(f"{plural(meta['unmasked_chats'], 'chat')} end without an assistant message: trained on whole")
    elif "chat" in meta.get("kinds", ()) or "prompt" in meta.get("kinds", ()):
        notes.append("labels masked on prompts: only the answers are learnt")
    notes.append(how)
    spec = DataSpec("tokens", 2, seq_len=seq_len, vocab_size=max(2, vocab_size))
    described = (f"{files.name}: {len(train):,} training" + (f" + {len(val):,} validation" if val is not None else "")
                 + f" sequences of {seq_len:,} tokens ({layout}, {real:,} training tokens)")
    return LoadedDataset(files.name, spec, train, val, [], (), (), notes, described=described,
                         text={"layout": layout, "tokens_per_sample": per_row, "training_tokens": real,
                               "learnt_tokens": train.learnt_tokens(), "cache": str(cache)})

