"""What a batch looks like: the contract between datasets and models."""

from __future__ import annotations

from dataclasses import asdict, dataclass


@dataclass(frozen=True)
class DataSpec:
    """Shape of one sample and the number of classes.

    kind "image": samples are uint8 tensors (channels, height, width), normalised on the device.
    kind "tokens": samples are int64 tensors (seq_len,) of token ids below vocab_size.
    """

    kind: str
    num_classes: int
    channels: int = 0
    height: int = 0
    width: int = 0
    seq_len: int = 0
    vocab_size: int = 0

    @property
    def sample_shape(self) -> tuple[int, ...]:
        if self.kind == "image":
            return (self.channels, self.height, self.width)
        return (self.seq_len,)

    def describe(self) -> str:
        if self.kind == "image":
            return f"{self.channels}x{self.height}x{self.width} images, {self.num_classes} classes"
        return f"sequences of {self.seq_len} tokens (vocabulary {self.vocab_size}), {self.num_classes} classes"

    def to_dict(self) -> dict:
        return asdict(self)


# A text dataset for a language model folder (data/text.py): a file of these, or a folder holding them
TEXT_SUFFIXES = (".txt", ".jsonl", ".parquet")


def is_text_dataset(name: str) -> bool:
    """Whether a dataset name is a text file, or a folder of text files without subfolders (an image folder's class
    subfolders make it one of images, whatever .txt lies beside them); no reading past the names."""
    import os

    text = str(name)
    try:
        if os.path.splitext(text)[1].lower() in TEXT_SUFFIXES:
            return True
        path = os.path.expanduser(text)
        if not os.path.isdir(path):
            return False
        with os.scandir(path) as entries:
            found = [(e.name, e.is_dir()) for e in entries]
        return not any(d for _, d in found) and any(os.path.splitext(n)[1].lower() in TEXT_SUFFIXES for n, _ in found)
    except (OSError, ValueError):
        return False
