"""RunSummary: what a run measured, as one typed record (basics/shape.Record): each field's declaration is both the
check of a run read back (analysis/runcheck.py) and the attribute every reader uses. analysis/summary.py writes it.
No torch here.

A summary keeps the JSON object it was made from (`as_dict`), key for key and in its order, fields no version of
this one declares included (kept as plain JSON, read by no view): a run read back and written again is the run it
was.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from typing import Any, TypeGuard

from .shape import ANY_FINITE, MAX_ITEMS, MAX_TEXT, Either, Flag, Int, List, Map, Num, Plain, Record, Share, Text, may

MAX_NUMBER = 1e18  # no measured quantity (time, rate, bytes, joules) comes near this; losses may (LOSS)

QUANTITY = Num(lo=0.0, hi=MAX_NUMBER, null=True)  # a measured quantity (seconds, samples/s, joules), or null
COUNT = Int(lo=0, hi=int(MAX_NUMBER), null=True)  # a whole number (a step, bytes), or null
COUNT_OF = Int(lo=0, hi=int(MAX_NUMBER))
LOSS = Num(lo=None, null=True)  # any finite number, or null: a diverging run's last losses are huge
SIGNED = Num(lo=None, hi=MAX_NUMBER, null=True)  # a figure above a baseline (energy above idle)
NOTE = Text(max=MAX_TEXT, null=True, as_written=True)  # a sentence or a name the run wrote
SETTING = Either(lambda v: isinstance(v, str), Text(max=MAX_TEXT, as_written=True),  # what a script set
                 Either(lambda v: isinstance(v, bool), Flag(), Num(lo=None)), null=True)


class FieldError(Exception):
    """A field that is wrong: `field` names it (config.batch_size), `why` says what it should be."""

    def __init__(self, field: str, why: str):
        super().__init__(f"{field}: {why}")
        self.field, self.why = field, why


def finite(v: object) -> TypeGuard[float]:
    """Any finite JSON number (a loss; ints of any size compare exactly, without overflowing a float)."""
    return not isinstance(v, bool) and isinstance(v, (int, float)) and -ANY_FINITE <= v <= ANY_FINITE


def number(v: object) -> TypeGuard[float]:
    """A measured quantity's number: finite and at most MAX_NUMBER in size."""
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        return False
    if isinstance(v, int):
        return abs(v) <= MAX_NUMBER
    return math.isfinite(v) and abs(v) <= MAX_NUMBER


@dataclass(frozen=True, kw_only=True)
class RunSummary(Record):
    """A run's figures. Every field may be missing (then None): a run that failed before its first window has
    few, a run stored by an earlier version lacks the later ones. Throughput, spread and stability, energy and memory
    growth are re-derived from the run's windows whenever a whole run is read back (analysis/runcheck.py)."""

    # what ran
    parameters: int | None = may(COUNT)
    trainable_parameters: int | None = may(COUNT)  # fewer than parameters with LoRA or a frozen body
    dataset: str | None = may(NOTE)  # one line on the data
    precision_note: str | None = may(NOTE)  # re-derived from the config
    framework: str | None = may(NOTE)  # "mlx" on an MLX run
    seq_len: int | None = may(COUNT)  # token input: a sample's sequence length
    # the measured phase
    warmup_steps: int | None = may(COUNT)
    warmup_s: float | None = may(QUANTITY)
    measured_steps: int | None = may(COUNT)
    measured_s: float | None = may(QUANTITY)
    windows: int | None = may(COUNT)  # windows with a throughput
    samples_per_s: float | None = may(QUANTITY)  # the windows' median
    samples_per_s_q1: float | None = may(QUANTITY)
    samples_per_s_q3: float | None = may(QUANTITY)
    samples_per_s_iqr: float | None = may(QUANTITY)
    spread_percent: float | None = may(QUANTITY)  # IQR over the median, percent
    stability: str | None = may(Text(max=40, null=True))  # "stable" or "noisy" (analysis/stability.py)
    stability_reason: str | None = may(NOTE)
    step_ms: float | None = may(QUANTITY)
    wall_samples_per_s: float | None = may(QUANTITY)  # warm-up end to run end, validation excluded
    data_wait_s: float | None = may(QUANTITY)
    data_wait_fraction: float | None = may(Share(null=True))
    tokens_per_sample: float | None = may(QUANTITY)
    tokens_per_step: float | None = may(QUANTITY)  # a step's real tokens, every rank's (a padded text's: its mean)
    tokens_per_s: float | None = may(QUANTITY)
    tokens_measure: str | None = may(NOTE)  # what tokens/s counts (real tokens, padding excluded)
    text_layout: str | None = may(NOTE)  # a text dataset's: packed or padded (data/tokens.py)
    training_tokens: int | None = may(COUNT)  # a text dataset's real tokens in its training split
    # epochs
    s_per_epoch: float | None = may(QUANTITY)  # runs stored before estimate and measurement were told apart
    s_per_epoch_estimate: float | None = may(QUANTITY)  # train size / median throughput
    s_per_epoch_measured: float | None = may(QUANTITY)
    epoch_s: list[float] | None = may(List(Num(lo=0.0, hi=MAX_NUMBER), max=MAX_ITEMS, null=True))
    best_epoch: int | None = may(COUNT)
    best_value: float | None = may(LOSS)
    monitor: str | None = may(NOTE)
    stopped_early_epoch: int | None = may(COUNT)
    stopped_early_reason: str | None = may(NOTE)
    # learning
    final_loss: float | None = may(LOSS)  # the mean of the last steps' losses
    val_loss: float | None = may(LOSS)
    val_accuracy: float | None = may(Share(null=True))
    accuracy_measure: str | None = may(NOTE)  # what val_accuracy is where it is not of classes (next tokens)
    val_perplexity: float | None = may(Num(lo=1.0, hi=MAX_NUMBER, null=True))  # a language model's on text
    # memory (analysis/memory.py; MEMORY_MEASURES in analysis/summary.py says what the figure is)
    peak_memory: float | None = may(QUANTITY)
    memory_measure: str | None = may(NOTE)
    memory_growth: dict | None = may(Plain())  # per line of the memory plot, its growth
    memory_flag: str | None = may(NOTE)  # a finding on that growth
    input_shapes: int | None = may(Int(lo=1, hi=int(MAX_NUMBER), null=True))  # distinct input shapes seen
    # energy and utilisation (analysis/energy.py)
    energy_j: float | None = may(QUANTITY)
    avg_power_w: float | None = may(QUANTITY)
    j_per_sample: float | None = may(QUANTITY)
    energy_parts: dict[str, float] | None = may(Map(Num(lo=0.0, hi=MAX_NUMBER), max=8, null=True))
    energy_part: str | None = may(NOTE)
    energy_source: str | None = may(NOTE)
    energy_measure: str | None = may(NOTE)  # "measured" or "estimated"
    energy_scope: str | None = may(NOTE)
    energy_reason: str | None = may(NOTE)  # why there is no energy figure
    idle_w: float | None = may(QUANTITY)
    idle_s: float | None = may(QUANTITY)
    idle_when: str | None = may(NOTE)
    idle_reason: str | None = may(NOTE)
    energy_above_idle_j: float | None = may(SIGNED)
    power_above_idle_w: float | None = may(SIGNED)
    j_per_sample_above_idle: float | None = may(SIGNED)
    utilization: float | None = may(Num(lo=0.0, hi=100.0, null=True))  # percent busy
    utilization_measure: str | None = may(NOTE)
    utilization_reason: str | None = may(NOTE)
    # several GPUs (run/ranks.py)
    ranks: list | None = may(Plain())
    ranks_world: int | None = may(COUNT)
    ranks_nodes: int | None = may(COUNT)
    global_batch: int | None = may(COUNT)
    communication: dict | None = may(Plain())
    # checks before and beside the run
    preflight: dict | None = may(Plain())  # run/preflight.py
    parity: dict | None = may(Plain())  # an MLX run's agreement with PyTorch
    # the trained model
    saved_model: str | None = may(NOTE)  # its path
    saved_model_error: str | None = may(NOTE)
    # the run's process
    output_note: str | None = may(NOTE)
    leftover_processes: str | None = may(NOTE)
    # a script's run (run/script/)
    tracked: str | None = may(NOTE)  # how its steps were seen
    batch_from: str | None = may(NOTE)
    batch_sizes: list[int] | None = may(List(COUNT_OF, max=MAX_ITEMS, null=True))
    trained_on: str | None = may(NOTE)
    ended_early: str | None = may(NOTE)
    script_settings: dict[str, Any] | None = may(Map(SETTING, max=40, null=True))
    script_settings_words: list[str] | None = may(List(Text(max=200, as_written=True), max=40, null=True))
    # The JSON object itself, every key in its order (see the module's docstring); no file sets it.
    values: dict[str, Any] = field(default_factory=dict, repr=False, compare=False, metadata={"derived": True})

    @classmethod
    def made(cls, values: Mapping[str, Any]) -> RunSummary:
        """The summary of a plain JSON object this process computed or has checked (`checked` checks one). Built
        without its dataclass's __init__ (every field a frozen setattr): a history of 10,000 runs builds 10,000."""
        summary = object.__new__(cls)
        state = summary.__dict__
        state.update(_UNSET)
        state.update(values if values.keys() <= _UNSET.keys() else {k: v for k, v in values.items() if k in _UNSET})
        state["values"] = dict(values)
        return summary

    @classmethod
    def checked(cls, values: Any, path: str = "summary") -> RunSummary:
        """A summary read from outside this process: ShapeError names the first field of the wrong kind."""
        return cls.made(cls.declared_shape().check(values, path))

    @property
    def rate(self) -> float:
        """samples_per_s, of a run known to have one (a finished run a comparison took); 0.0 where it has none."""
        return float(self.samples_per_s or 0.0)

    def replaced(self, **changes: Any) -> RunSummary:
        """This summary with some figures set (a key not in it yet is added at the end)."""
        return RunSummary.made({**self.values, **changes})

    def as_dict(self) -> dict:
        return dict(self.values)  # (a copy: the summary itself does not change)


_UNSET = {f.name: f.default for f in fields(RunSummary) if not f.metadata.get("derived")}  # (every one None)
