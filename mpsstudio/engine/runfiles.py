"""Run files: JSON export and validated import (to compare runs across machines), and CSV for spreadsheets."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

from .columns import BY_KEY, CSV_COLUMNS
from .compare import compare, speedup_map
from .errors import UserError
from .files import write_atomic
from .formatting import is_finite
from .results import RunResult

JSON_FORMAT = "mpsstudio.runs"
JSON_VERSION = 1


def _cannot_write(path: Path, exc: OSError) -> UserError:
    return UserError(f"{path} cannot be written ({exc.strerror or exc.__class__.__name__}); "
                     "choose another folder.")


def export_json(results: list[RunResult], path: str | Path) -> None:
    """Write runs and the comparisons among them to a JSON file: never pickle, readable anywhere."""
    doc = {
        "format": JSON_FORMAT,
        "version": JSON_VERSION,
        "runs": [r.to_dict() for r in results],
        "comparisons": [c.to_dict() for c in compare(results)],
    }
    path = Path(path)
    try:
        write_atomic(path, json.dumps(doc, indent=1, allow_nan=False))
    except OSError as exc:
        raise _cannot_write(path, exc) from None


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


def export_csv(results: list[RunResult], path: str | Path, speedups: dict[str, float | None] | None = None) -> None:
    """Write one row per run (columns.CSV_COLUMNS, raw numbers in their units) for spreadsheets.

    `speedups` (run id -> speedup vs CPU) defaults to the comparisons found among `results` themselves.
    """
    if speedups is None:
        speedups = speedup_map(compare(results))

    def cell(v):
        if v is None or (isinstance(v, float) and not is_finite(v)):
            return ""
        return v

    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerow(CSV_COLUMNS)
    for r in results:
        writer.writerow([cell(BY_KEY[key].value(r, speedups)) for key in CSV_COLUMNS])
    path = Path(path)
    try:
        write_atomic(path, buf.getvalue())
    except OSError as exc:
        raise _cannot_write(path, exc) from None
