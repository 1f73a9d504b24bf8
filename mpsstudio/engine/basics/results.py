"""RunResult: what one run measured, plus its config and environment; its summary (basics/summary_fields.py),
windows, epochs and evaluation as typed records (basics/shape.Record: one declaration gives the check
analysis/runcheck.py makes of a run read back, and the attributes every reader uses).

Checking a run read back lives in analysis/runcheck.py; writing and reading run files (JSON, CSV) in
history/runfiles.py."""

from __future__ import annotations

import math
import uuid
from dataclasses import dataclass, field, fields
from datetime import datetime, timezone

from .config import RunConfig
from .shape import Int, List, Map, Num, Record, Share, Text, may, need
from .summary_fields import COUNT, COUNT_OF, MAX_NUMBER, QUANTITY, RunSummary

STATUSES = ("finished", "failed", "cancelled", "interrupted")  # interrupted: its front end was killed


def new_run_id() -> str:
    return uuid.uuid4().hex


def now_iso() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


FUTURE_SLACK_S = 86_400.0  # a date this far ahead of this machine's clock is another clock's; beyond, not a date


def date_problem(text) -> str:
    """Why `text` is not when a run or a result was made ("" when it can be): an ISO 8601 date and time, not in the
    future (a file dated 9999-12-31 would always be the newest)."""
    if not isinstance(text, str) or len(text) > 64:
        return "an ISO 8601 date and time expected"
    try:
        when = datetime.fromisoformat(text)
    except ValueError:
        return "an ISO 8601 date and time expected"
    if when.tzinfo is None:
        when = when.replace(tzinfo=timezone.utc)
    try:
        when.astimezone(timezone.utc).astimezone()  # year 1 at +14:00 is before the first day, here and in UTC
    except OverflowError:
        return "an ISO 8601 date and time expected"
    try:
        ahead = (when - datetime.now(timezone.utc)).total_seconds()
    except OverflowError:
        ahead = float("inf")
    if ahead > FUTURE_SLACK_S:
        return f"a date in the future ({text[:32]}), not when it was made"
    return ""


MAX_CLASSES = 1000  # classes of an evaluation (the trainer keeps up to 100)


def _values(record: Record) -> dict:
    """A row's fields as the run's JSON keeps them (every field, null where not measured)."""
    return {f.name: getattr(record, f.name) for f in fields(record)}  # type: ignore[arg-type]  # (a dataclass)


@dataclass(frozen=True, kw_only=True)
class WindowRow(Record):
    """One measurement window as the run keeps it (events.Window.record writes it). Any field may be null: a window
    of 0 s has no rate (JSON has no infinity), a device without counters no energy."""

    first_step: int | None = may(COUNT)  # 1-based step number of its first step, warm-up steps included
    steps: int | None = may(COUNT)
    seconds: float | None = may(QUANTITY)  # synchronized wall time
    samples: int | None = may(COUNT)
    samples_per_s: float | None = may(QUANTITY)
    data_wait_s: float | None = may(QUANTITY)
    memory: int | None = may(COUNT)  # bytes in use on the device at its end (Device.in_use)
    energy_j: float | None = may(QUANTITY)  # set on the window that closes an energy span (events.Window)
    energy_s: float | None = may(QUANTITY)
    energy_windows: int | None = may(Int(lo=1, hi=int(MAX_NUMBER), null=True))
    energy_parts: dict[str, float] | None = may(Map(Num(lo=0.0, hi=MAX_NUMBER), max=8, null=True))
    utilization: float | None = may(Num(lo=0.0, hi=100.0, null=True))  # percent busy over the span
    memory_driver: int | None = may(COUNT)  # the memory plot's other lines (events.Window)
    memory_process: int | None = may(COUNT)
    swap_used: int | None = may(COUNT)

    def as_dict(self) -> dict:
        return _values(self)


@dataclass(frozen=True, kw_only=True)
class EpochRow(Record):
    """One finished epoch: its training time (validation excluded) and its validation figures."""

    epoch: int | None = may(COUNT)
    step: int | None = may(COUNT)  # the step it ended at, warm-up steps included (runs stored before: null)
    seconds: float | None = may(QUANTITY)
    val_loss: float | None = may(Num(lo=None, null=True))  # any finite number: a diverging run's loss is huge
    val_accuracy: float | None = may(Share(null=True))  # a language model's: of its next tokens
    val_perplexity: float | None = may(Num(lo=1.0, hi=1e18, null=True))  # a language model's on text

    def as_dict(self) -> dict:
        return _values(self)


@dataclass(frozen=True, kw_only=True)
class Evaluation(Record):
    """The confusion counts of a labelled image dataset's validation split, of the best epoch where the run kept
    it: `matrix[true][predicted]`, one row and one column per class (analysis/runcheck.py checks the square)."""

    classes: list[str] = need(List(Text(max=200), max=MAX_CLASSES))  # at least 2 (analysis/runcheck.py)
    matrix: list[list[int]] = need(List(List(COUNT_OF, max=MAX_CLASSES), max=MAX_CLASSES))
    epoch: int | None = may(COUNT)
    split: str = may(Text(max=40), default="validation")

    def as_dict(self) -> dict:
        return {"classes": list(self.classes), "matrix": [list(row) for row in self.matrix], "epoch": self.epoch,
                "split": self.split}


@dataclass
class RunResult:
    """One run. `losses` holds every step's loss (warm-up steps first); `windows` one row per measurement window."""

    config: RunConfig
    status: str = "finished"
    env: dict = field(default_factory=dict)
    summary: RunSummary = field(default_factory=RunSummary)
    losses: list[float] = field(default_factory=list)
    windows: list[WindowRow] = field(default_factory=list)
    epochs: list[EpochRow] = field(default_factory=list)
    error: str = ""
    id: str = field(default_factory=new_run_id)
    created_at: str = field(default_factory=now_iso)
    origin: str = "local"  # "local" or "imported"
    note: str = ""  # the user's note on the run (the history table's Note column)
    evaluation: Evaluation | None = None  # labelled image datasets only
    # Set only on a run read as a summary (RunStore.summaries): its windows' samples/s, which comparisons need;
    # steps, windows and epochs are then empty, and RunStore.get(id) reads the whole run.
    window_rates: list[float] | None = None
    # True on a run made by runcheck (every field checked, its summary re-derived from its windows): only such a
    # run is sealed when stored (history/rows.py, _seal), so that the table can read it back without checking it again.
    checked: bool = field(default=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if isinstance(self.summary, dict):  # a caller's plain figures (a test's), made the record they describe
            self.summary = RunSummary.made(self.summary)

    def epoch_step(self, epoch: EpochRow) -> int | None:
        """The step at which an epoch row ended: its step, or for a finished run stored before epochs kept
        their step, epoch x steps / epochs; None when it cannot be known."""
        if epoch.step is not None:
            return epoch.step
        n = epoch.epoch
        if (self.status == "finished" and self.config.steps is None and self.config.epochs and self.losses
                and n is not None):
            return n * len(self.losses) // self.config.epochs
        return None

    @property
    def is_summary(self) -> bool:
        """Read without its steps, windows and epochs (RunStore.summaries)."""
        return self.window_rates is not None

    @property
    def machine(self) -> str:
        return str(self.env.get("machine_label") or self.env.get("hostname") or "unknown machine")

    def to_dict(self) -> dict:
        return {
            "id": self.id,
            "created_at": self.created_at,
            "status": self.status,
            "error": self.error,
            "origin": self.origin,
            "note": self.note,
            "config": self.config.to_dict(),
            "env": self.env,
            "summary": json_safe(self.summary.as_dict()),
            "steps": [{"step": i + 1, "loss": json_safe(v)} for i, v in enumerate(self.losses)],
            "windows": [json_safe(w.as_dict()) for w in self.windows],
            "epochs": [json_safe(e.as_dict()) for e in self.epochs],
            "evaluation": self.evaluation.as_dict() if self.evaluation is not None else {},
        }


def json_safe(value):
    """NaN and infinities become null (JSON has no such numbers), at any depth; a failed run may hold them."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {k: json_safe(v) for k, v in value.items()}
    if isinstance(value, list):
        return [json_safe(v) for v in value]
    return value
