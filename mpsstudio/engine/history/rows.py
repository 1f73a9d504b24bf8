"""A run as a row of the history's `runs` table and back: the columns, the seal, the windows' rates, and the
checked reading of a whole row (as an imported run) or of its summary only."""

from __future__ import annotations

import hashlib
import json
import sqlite3
from dataclasses import dataclass, field
from array import array

from ..analysis.runcheck import run_from_dict, summary_from_dict
from ..basics.config import RunConfig
from ..basics.formatting import is_finite
from ..basics.results import RunResult, WindowRow, json_safe, new_run_id, now_iso

COLUMNS = ("id", "created_at", "status", "origin", "model", "dataset", "device", "batch_size", "precision",
            "machine", "error", "config_json", "env_json", "summary_json", "windows_json", "epochs_json", "losses",
            "note", "rates", "seal", "evaluation_json")
# What the history table reads of a run (summaries): no steps, windows or epochs, only the windows' samples/s.
SUMMARY_COLUMNS = ("id", "created_at", "status", "origin", "error", "config_json", "env_json", "summary_json",
                    "note", "rates", "seal")


INSERT = f"{{verb}} INTO runs ({','.join(COLUMNS)}) VALUES ({','.join('?' * len(COLUMNS))})"


def text(value) -> str:
    """Text SQLite can hold: a lone surrogate (an undecodable byte of a Linux file name, a hand-made \\udcff in an
    imported file) becomes "?" instead of failing the write and losing the run. The JSON columns need nothing:
    json.dumps escapes it."""
    shown = str(value)
    try:
        shown.encode("utf-8")
    except UnicodeEncodeError:
        return shown.encode("utf-8", "replace").decode("utf-8")
    return shown


def is_text(value) -> bool:
    return isinstance(value, str) and text(value) == value


def is_id(value) -> bool:
    """A stored result's id as MPS Studio writes them (letters, digits, "_", "-", "."; at most 64)."""
    import re

    return isinstance(value, str) and re.fullmatch(r"[A-Za-z0-9_.-]{1,64}", value) is not None


def to_row(result: RunResult) -> tuple:
    c = result.config
    fields = (text(result.id), text(result.created_at), text(result.status), text(result.origin),
              text(result.error), json.dumps(c.to_dict(), allow_nan=False), json.dumps(result.env, allow_nan=False),
              json.dumps(json_safe(result.summary.as_dict()), allow_nan=False))
    rates = rates_blob(result.windows)
    return (
        *fields[:4], text(c.model), text(c.dataset), text(c.device), c.batch_size or 0, text(c.precision or ""),
        text(result.machine), fields[4],
        *fields[5:], json.dumps([json_safe(w.as_dict()) for w in result.windows], allow_nan=False),
        json.dumps([json_safe(e.as_dict()) for e in result.epochs], allow_nan=False),
        array("f", result.losses).tobytes(), text(result.note), rates, _seal(*fields, rates) if result.checked else None,
        json.dumps(result.evaluation.as_dict() if result.evaluation is not None else {}, allow_nan=False),
    )


def _seal(*fields) -> bytes:
    """A digest of what the table reads of a run, written with the row. The run was checked whole before it was
    written (runcheck), so a row whose seal still matches is read without checking every value again; a row
    changed since (by hand, by a damaged disk) or written before version 3 no longer matches and is checked in
    full. It guards against accidents, not against someone who recomputes it (get() checks whole runs anyway)."""
    parts = [value if isinstance(value, bytes) else str(value).encode("utf-8", "surrogatepass") for value in fields]
    lengths = array("q", [len(part) for part in parts]).tobytes()  # no two different rows give the same bytes
    return hashlib.blake2b(lengths + b"".join(parts), digest_size=16).digest()


def rates_blob(windows: list[WindowRow]) -> bytes:
    """The windows' samples/s as float64s (compare.py's bootstrap reads them), as the table loads them."""
    return _blob([w.samples_per_s for w in windows])


def stored_rates_blob(windows_json: str) -> bytes:
    """The same from a row's windows as stored (written before version 3 kept them beside it): JSON not yet checked,
    so what is not a window's throughput is passed over."""
    windows = json.loads(windows_json)
    return _blob([w.get("samples_per_s") for w in windows if isinstance(w, dict)] if isinstance(windows, list) else [])


def _blob(rates: list) -> bytes:
    return array("d", [v for v in rates if is_finite(v) and v > 0]).tobytes()


_SEALED = ("id", "created_at", "status", "origin", "error", "config_json", "env_json", "summary_json")


def _fields(row: sqlite3.Row) -> dict:
    return {
        "id": row["id"], "created_at": row["created_at"], "status": row["status"], "origin": row["origin"],
        "error": row["error"], "note": _column(row, "note", ""),
        "config": json.loads(row["config_json"]), "env": json.loads(row["env_json"]),
        "summary": json.loads(row["summary_json"]),
    }


def _column(row: sqlite3.Row, name: str, default):
    try:
        return row[name]
    except IndexError:  # a read-only history written before version 3
        return default


def result(row: sqlite3.Row) -> RunResult:
    """A stored row, checked like an imported run (an older version or a hand edit may have left anything)."""
    blob = row["losses"]
    if not isinstance(blob, bytes) or len(blob) % 4:
        raise ValueError("the per-step losses are damaged")
    losses = array("f")
    losses.frombytes(blob)
    data = {**_fields(row), "windows": json.loads(row["windows_json"]), "epochs": json.loads(row["epochs_json"]),
            "evaluation": json.loads(_column(row, "evaluation_json", "{}"))}
    result = run_from_dict(data, where=f"stored run {str(row['id'])[:64]}")
    result.losses = losses.tolist()
    return result


def summary(row: sqlite3.Row) -> RunResult:
    """A stored row without its steps, windows and epochs; the throughput re-derived from its window rates."""
    blob = row["rates"]
    if blob is None:  # written before version 3 into a history opened read-only: read from its windows
        blob = stored_rates_blob(row["windows_json"])
    if not isinstance(blob, bytes) or len(blob) % 8:
        raise ValueError("the window throughputs are damaged")
    rates = array("d")
    rates.frombytes(blob)
    data = _fields(row)
    seal = row["seal"]
    if seal is not None and seal == _seal(*(row[k] for k in _SEALED), row["rates"]) and isinstance(data["note"], str):
        try:  # written whole and checked by this version, unchanged since: no value-by-value check again
            return RunResult(config=RunConfig(**data["config"]), status=data["status"], env=data["env"],
                             summary=data["summary"], error=data["error"], id=data["id"],
                             created_at=data["created_at"], origin=data["origin"], note=data["note"],
                             window_rates=rates.tolist())
        except TypeError:  # a field this version does not know: checked below, which names it
            pass
    return summary_from_dict(data, rates.tolist(), where=f"stored run {str(row['id'])[:64]}")


@dataclass
class ToolRecord:
    """One stored tool result: kind ("sweep", "max-batch", "inspect") and its result dict (tools/registry.checked)."""

    kind: str
    result: dict
    id: str = field(default_factory=new_run_id)
    created_at: str = field(default_factory=now_iso)
    problem: str | None = None  # a stored row that does not pass its kind's shape: why (its result is then {})
