"""RunResult: what one run measured, plus its config and environment; JSON export and validated import."""

from __future__ import annotations

import json
import math
import uuid
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path

from .config import RunConfig
from .errors import UserError

STATUSES = ("finished", "failed", "cancelled")
JSON_FORMAT = "mpsstudio.runs"
JSON_VERSION = 1


def new_run_id() -> str:
    return uuid.uuid4().hex


def now_iso() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


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
            "config": self.config.to_dict(),
            "env": self.env,
            "summary": self.summary,
            "steps": [{"step": i + 1, "loss": _json_float(v)} for i, v in enumerate(self.losses)],
            "windows": self.windows,
            "epochs": self.epochs,
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


def _json_float(v: float):
    return v if math.isfinite(v) else None


def export_json(results: list[RunResult], path: str | Path, comparisons: list[dict] | None = None) -> None:
    """Write runs (and their comparisons) to a JSON file: never pickle, readable anywhere."""
    doc = {
        "format": JSON_FORMAT,
        "version": JSON_VERSION,
        "runs": [r.to_dict() for r in results],
        "comparisons": comparisons if comparisons is not None else [],
    }
    path = Path(path)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(doc, indent=1, allow_nan=False))
    tmp.replace(path)


def import_json(path: str | Path) -> list[RunResult]:
    """Read runs exported by MPS Studio (the CLI's --json or the app's export); imported runs are marked as such."""
    path = Path(path)
    try:
        text = path.read_text()
    except FileNotFoundError:
        raise UserError(f"{path} does not exist; choose a JSON file exported by MPS Studio.") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise UserError(f"{path} cannot be read ({exc.__class__.__name__}); choose a JSON file exported by MPS Studio.") from None
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as exc:
        raise UserError(f"{path.name} is not valid JSON (line {exc.lineno}); choose a file exported by MPS Studio.") from None
    if not isinstance(doc, dict) or not isinstance(doc.get("runs"), list):
        raise UserError(f"{path.name} has no list of runs; choose a file exported by MPS Studio.")
    results = []
    for i, item in enumerate(doc["runs"]):
        r = RunResult.from_dict(item, where=f"{path.name} (run {i + 1})")
        r.origin = "imported"
        results.append(r)
    return results


CSV_COLUMNS = (
    "time", "machine", "origin", "device", "model", "dataset", "batch", "precision", "samples_per_s",
    "samples_per_s_iqr", "speedup_vs_cpu", "warmup_s", "s_per_epoch", "final_loss", "val_accuracy_percent",
    "peak_memory_bytes", "status", "error", "id",
)


def export_csv(results: list[RunResult], path: str | Path, speedups: dict[str, float | None] | None = None) -> None:
    """Write one row per run, the results table's columns as plain numbers, for spreadsheets.

    `speedups` (run id -> speedup vs CPU) defaults to the comparisons found among `results` themselves.
    """
    import contextlib
    import csv
    import io

    if speedups is None:
        from .compare import compare

        speedups = {k: v for c in compare(results) for k, v in c.speedups.items()}

    def cell(v):
        if v is None or (isinstance(v, float) and not math.isfinite(v)):
            return ""
        return v

    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerow(CSV_COLUMNS)
    for r in results:
        s, c = r.summary, r.config
        acc = s.get("val_accuracy")
        writer.writerow([cell(v) for v in (
            r.created_at, r.machine, r.origin, c.device, c.model, c.dataset, c.batch_size, c.precision,
            s.get("samples_per_s"), s.get("samples_per_s_iqr"), speedups.get(r.id), s.get("warmup_s"),
            s.get("s_per_epoch"), s.get("final_loss"), None if acc is None else 100 * acc, s.get("peak_memory"),
            r.status, r.error, r.id,
        )])
    path = Path(path)
    tmp = path.with_name(path.name + ".tmp")
    try:
        tmp.write_text(buf.getvalue(), encoding="utf-8", newline="")
        tmp.replace(path)
    except OSError as exc:
        with contextlib.suppress(OSError):
            tmp.unlink(missing_ok=True)
        raise UserError(f"{path.name} cannot be written ({exc.strerror or exc.__class__.__name__}); "
                        "choose another folder.") from None
