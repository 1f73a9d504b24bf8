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
