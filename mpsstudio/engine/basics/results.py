"""RunResult: what one run measured, plus its config and environment, and its validation when read back.

Writing and reading run files (JSON, CSV) lives in runfiles.py."""

from __future__ import annotations

import math
import uuid
from dataclasses import dataclass, field
from datetime import datetime, timezone

from .config import RunConfig
from .errors import UserError

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
        ahead = (when - datetime.now(timezone.utc)).total_seconds()
    except OverflowError:
        ahead = float("inf")
    if ahead > FUTURE_SLACK_S:
        return f"a date in the future ({text[:32]}), not when it was made"
    return ""


@dataclass
class RunResult:
    """One run. `losses` holds every step's loss (warm-up steps first); `windows` one row per measurement window."""

    config: RunConfig
    status: str = "finished"
    env: dict = field(default_factory=dict)
    summary: dict = field(default_factory=dict)
    losses: list[float] = field(default_factory=list)
    windows: list[dict] = field(default_factory=list)
    epochs: list[dict] = field(default_factory=list)
    error: str = ""
    id: str = field(default_factory=new_run_id)
    created_at: str = field(default_factory=now_iso)
    origin: str = "local"  # "local" or "imported"
    note: str = ""  # the user's note on the run (the history table's Note column)
    # labelled image datasets: {"classes": [...], "matrix": [[count of (true, predicted)]], "epoch", "split"} on
    # the validation split (of the best epoch where the run kept it); {} otherwise
    evaluation: dict = field(default_factory=dict)
    # Set only on a run read as a summary (RunStore.summaries): its windows' samples/s, which comparisons need;
    # steps, windows and epochs are then empty, and RunStore.get(id) reads the whole run.
    window_rates: list[float] | None = None
    # True on a run made by runcheck (every field checked, its summary re-derived from its windows): only such a
    # run is sealed when stored (history/rows.py, _seal), so that the table can read it back without checking it again.
    checked: bool = field(default=False, repr=False, compare=False)

    def epoch_step(self, epoch: dict) -> int | None:
        """The step at which an epoch row ended: its "step", or for a finished run stored before epochs kept
        their step, epoch x steps / epochs; None when it cannot be known."""
        step = epoch.get("step")
        if isinstance(step, int) and not isinstance(step, bool):
            return step
        n = epoch.get("epoch")
        if (self.status == "finished" and self.config.steps is None and self.config.epochs and self.losses
                and isinstance(n, int) and not isinstance(n, bool)):
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
            "summary": json_safe(self.summary),
            "steps": [{"step": i + 1, "loss": json_safe(v)} for i, v in enumerate(self.losses)],
            "windows": json_safe(self.windows),
            "epochs": json_safe(self.epochs),
            "evaluation": self.evaluation,
        }

    @classmethod
    def from_dict(cls, data: dict, *, where: str = "the file") -> "RunResult":
        """Validate an imported run; raise UserError naming what is wrong."""
        if not isinstance(data, dict):
            raise UserError(f"A run in {where} is not a JSON object; export runs from MPS Studio and import that file.")
        for key in ("status", "config", "summary"):
            if key not in data:
                raise UserError(f"A run in {where} has no '{key}'; it was not written by MPS Studio.")
        status = data["status"]
        if status not in STATUSES:
            raise UserError(f"A run in {where} has status {status!r}; expected one of {', '.join(STATUSES)}.")
        cfg = data["config"]
        if not isinstance(cfg, dict) or not all(k in cfg for k in ("model", "dataset", "device", "batch_size")):
            raise UserError(f"A run in {where} has no model, dataset, device and batch size in its config.")
        if not isinstance(cfg["batch_size"], int) or cfg["batch_size"] < 1:
            raise UserError(f"A run in {where} has an invalid batch size {cfg['batch_size']!r}.")
        summary = data["summary"]
        if not isinstance(summary, dict):
            raise UserError(f"A run in {where} has a summary that is not a JSON object.")
        sps = summary.get("samples_per_s")
        if sps is not None and (not isinstance(sps, (int, float)) or not math.isfinite(sps) or sps < 0):
            raise UserError(f"A run in {where} has an invalid samples_per_s {sps!r}.")
        env = data.get("env", {})
        if not isinstance(env, dict):
            raise UserError(f"A run in {where} has an environment that is not a JSON object.")
        steps = data.get("steps", [])
        if not isinstance(steps, list):
            raise UserError(f"A run in {where} has 'steps' that is not a list.")
        losses = []
        for row in steps:
            if not isinstance(row, dict) or "loss" not in row:
                raise UserError(f"A run in {where} has a step without a loss.")
            loss = row["loss"]
            losses.append(float("nan") if loss is None else float(loss))
        try:
            config = RunConfig.from_dict(cfg)
        except TypeError as exc:
            raise UserError(f"A run in {where} has a config MPS Studio cannot read ({exc}).") from None
        return cls(
            config=config, status=status, env=env, summary=summary, losses=losses,
            windows=list(data.get("windows") or []), epochs=list(data.get("epochs") or []),
            error=str(data.get("error") or ""), id=str(data.get("id") or new_run_id()),
            created_at=str(data.get("created_at") or now_iso()), origin=str(data.get("origin") or "local"),
        )


def json_safe(value):
    """NaN and infinities become null (JSON has no such numbers), at any depth; a failed run may hold them."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {k: json_safe(v) for k, v in value.items()}
    if isinstance(value, list):
        return [json_safe(v) for v in value]
    return value
