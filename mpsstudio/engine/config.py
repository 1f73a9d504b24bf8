"""RunConfig: everything that defines one run, and its validation."""

from __future__ import annotations

import math
import sys
from dataclasses import asdict, dataclass, field, fields, replace

from .errors import UserError

PRECISIONS = ("fp32", "fp16", "bf16")
OPTIMIZERS = ("sgd", "adam", "adamw")
MODES = ("train", "inference")

DEFAULT_MODEL = "mlp"
DEFAULT_DATASET = "shapes"  # generated, offline, learns: see datasets.py


@dataclass
class RunConfig:
    """One run: a model on a dataset on one device. Comparisons group configs equal but for `device`."""

    model: str = DEFAULT_MODEL
    dataset: str = DEFAULT_DATASET
    device: str = "cpu"
    batch_size: int = 64
    steps: int | None = None  # measured steps after warm-up; None when `epochs` is used
    epochs: int | None = 2
    warmup_steps: int = 10
    optimizer: str = "sgd"
    lr: float = 0.01
    precision: str = "fp32"
    channels_last: bool = False
    compile: bool = False
    workers: int = 0
    resident: bool = False
    mode: str = "train"
    seed: int = 0
    threads: int | None = None  # CPU threads torch uses; None = torch's default, recorded either way
    tf32: bool = False
    image_size: int | None = None  # folder datasets: decode size; None = the model's preferred size
    window_s: float = 0.1  # target length of one measurement window
    options: dict = field(default_factory=dict)

    def validate(self) -> "RunConfig":
        """Raise UserError for values no run can use; return self for chaining."""
        if not isinstance(self.batch_size, int) or self.batch_size < 1:
            raise UserError(f"Batch size must be a whole number of at least 1, not {self.batch_size!r}.")
        if self.steps is None and self.epochs is None:
            raise UserError("Give a number of steps or of epochs.")
        if self.steps is not None and (not isinstance(self.steps, int) or self.steps < 1):
            raise UserError(f"Steps must be a whole number of at least 1, not {self.steps!r}.")
        if self.epochs is not None and self.steps is None and (not isinstance(self.epochs, int) or self.epochs < 1):
            raise UserError(f"Epochs must be a whole number of at least 1, not {self.epochs!r}.")
        if not isinstance(self.warmup_steps, int) or self.warmup_steps < 0:
            raise UserError(f"Warm-up steps must be 0 or more, not {self.warmup_steps!r}.")
        if self.precision not in PRECISIONS:
            raise UserError(f"Unknown precision '{self.precision}'; choose one of: {', '.join(PRECISIONS)}.")
        if self.optimizer not in OPTIMIZERS:
            raise UserError(f"Unknown optimizer '{self.optimizer}'; choose one of: {', '.join(OPTIMIZERS)}.")
        if self.mode not in MODES:
            raise UserError(f"Unknown mode '{self.mode}'; choose train or inference.")
        if not (isinstance(self.lr, (int, float)) and math.isfinite(self.lr) and self.lr > 0):
            raise UserError(f"Learning rate must be a positive number, not {self.lr!r}.")
        if not isinstance(self.workers, int) or self.workers < 0:
            raise UserError(f"Data workers must be 0 or more, not {self.workers!r}.")
        if self.threads is not None and (not isinstance(self.threads, int) or self.threads < 1):
            raise UserError(f"CPU threads must be at least 1, not {self.threads!r}.")
        if self.compile and getattr(sys, "frozen", False):
            raise UserError("torch.compile needs a C++ compiler, which the MPS Studio app does not carry; "
                            "install MPS Studio with pip (README, Install) to use it.")
        if not (self.window_s > 0):
            raise UserError("The measurement window must be longer than 0 seconds.")
        return self

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict) -> "RunConfig":
        """Build from a dict (an imported JSON run); unknown keys are kept in `options`."""
        known = {f.name for f in fields(cls)}
        kwargs = {k: v for k, v in data.items() if k in known}
        extra = {k: v for k, v in data.items() if k not in known}
        cfg = cls(**kwargs)
        if extra:
            cfg.options = {**cfg.options, **extra}
        return cfg

    def with_device(self, device: str) -> "RunConfig":
        return replace(self, device=device, options=dict(self.options))

    def comparison_key(self) -> tuple:
        """What must be equal for two runs to be compared: everything except the device."""
        d = self.to_dict()
        d.pop("device")
        return tuple(sorted((k, repr(v)) for k, v in d.items()))
