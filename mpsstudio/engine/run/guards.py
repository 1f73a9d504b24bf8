"""What would make a setup fail or measure too little, said before it runs, each with the change that fixes it.

A run refuses a batch larger than its training set (session.prepare_data) and measures whatever steps are left after
its warm-up; a small folder with the default setup trips both (64 > 54 images; 2 epochs of 6 steps, 10 of them
warm-up). `guards` says so before Run, from the same arithmetic a run does (run/setup.py: an epoch is the whole
batches of the training set, the warm-up at most all steps but one), and offers the fields that fix each: the window
shows a button per guard, the command line prints the sentence.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from ..analysis.stability import MIN_WINDOWS
from ..basics.config import RunConfig

ENOUGH_MEASURED = 8  # measured steps an epochs fix offers at least: the windows a run of known length aims for
STEPS_OFFERED = 200  # a steps fix: the window's default length


@dataclass(frozen=True)
class Guard:
    sentence: str  # what is wrong, and what the fix does
    fix: dict = field(default_factory=dict)  # RunConfig fields that fix it
    button: str = ""  # the fix in a few words ("Use batch 16")
    blocking: bool = False  # the run would be refused (else it runs, measuring too little)


def train_samples(config: RunConfig, dataset_info=None, folder_report=None) -> int | None:
    """The training samples a run of `config` gets: a named dataset's (its DatasetInfo), a folder's split as a run
    splits it (folder.plan), synthetic data's (setup.synthetic_size); None when unknown."""
    if str(config.dataset).lower() == "synthetic":
        from .setup import synthetic_input, synthetic_size

        try:
            return synthetic_size(synthetic_input(config), config)
        except Exception:  # a model that cannot take the input says so itself
            return None
    if folder_report is not None:
        from ..data.folder import plan

        return plan(folder_report, seed=config.seed).train
    return getattr(dataset_info, "train_size", None)


def guards(config: RunConfig, train: int | None, name: str = "the dataset") -> list[Guard]:
    """The guards of `config` on a training set of `train` samples (None: unknown, only the steps are checked)."""
    if config.is_script:  # its own data and loop
        return []
    batch = config.batch
    if train is not None and 0 < train < batch:
        smaller = 1 << max(0, (max(1, train // 2)).bit_length() - 1)  # a power of two: at least two steps an epoch
        return [Guard(f"Batch {batch:,} is more than the {train:,} training samples of {name}, and a run needs one "
                      f"whole batch; batch {smaller:,} gives {train // smaller:,} steps an epoch.",
                      {"batch_size": smaller}, f"Use Batch {smaller:,}", blocking=True)]
    if config.steps is not None:
        measured = config.steps
        if measured < MIN_WINDOWS:
            return [Guard(f"{measured:,} measured step{'s' if measured != 1 else ''} cannot make the {MIN_WINDOWS} "
                          f"windows a stability verdict needs; {STEPS_OFFERED:,} steps can.",
                          {"steps": STEPS_OFFERED}, f"Measure {STEPS_OFFERED:,} Steps")]
        return []
    if train is None or config.epochs is None:
        return []
    per_epoch = train // batch
    total = config.epochs * per_epoch
    warm = min(config.warmup_steps, total - 1)
    measured = total - warm
    if measured >= MIN_WINDOWS:
        return []
    epochs = math.ceil((config.warmup_steps + ENOUGH_MEASURED) / per_epoch)
    return [Guard(f"{config.epochs:,} epoch{'s' if config.epochs != 1 else ''} of {per_epoch:,} step"
                  f"{'s' if per_epoch != 1 else ''} leave{'s' if measured == 1 else ''} {measured:,} measured after "
                  f"the {config.warmup_steps:,} warm-up steps, fewer than the {MIN_WINDOWS} windows a stability "
                  f"verdict needs; {epochs:,} epochs measure {epochs * per_epoch - config.warmup_steps:,}.",
                  {"epochs": epochs}, f"Train {epochs:,} Epochs")]
