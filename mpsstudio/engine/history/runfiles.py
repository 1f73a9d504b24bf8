"""Run files: JSON export and validated import (to compare runs across machines), and CSV for spreadsheets."""

from __future__ import annotations

import csv
import io
import json
import stat
from collections.abc import Callable
from pathlib import Path
from typing import Any

from .columns import BY_KEY, CSV_COLUMNS
from ..analysis.compare import compare, speedup_map
from ..basics.errors import UserError
from ..basics.files import write_atomic
from ..basics.formatting import fmt_bytes, is_finite, one_line, printable
from ..basics.results import RunResult, date_problem, json_safe
from ..analysis.runcheck import run_from_dict
from ..analysis.verdict import comparison_record

JSON_FORMAT = "mpsstudio.runs"
JSON_VERSION = 1
MAX_FILE_BYTES = 512 * 1024**2


def _cannot_write(path: Path, exc: OSError) -> UserError:
    return UserError(f"{path} cannot be written ({exc.strerror or exc.__class__.__name__}); "
                     "choose another folder.")


def export_json(results: list[RunResult], path: str | Path, inspections: list[dict] | None = None,
                keep_host: bool = True) -> None:
    """Write runs and the comparisons among them to a JSON file: never pickle, readable anywhere. `inspections`
    (stored `inspect` results) add their findings to the verdicts. `keep_host` False: a file to share (a CI
    baseline committed to a repository): no host name, user name or absolute path in it (`shareable`)."""
    doc: dict = {
        "format": JSON_FORMAT,
        "version": JSON_VERSION,
        "runs": [r.to_dict() for r in results],
        "comparisons": [comparison_record(c, inspections) for c in compare(results)],
    }
    if not keep_host:
        doc = shareable(doc, [r.env.get("hostname") for r in results])
    path = Path(path)
    try:
        write_atomic(path, json.dumps(doc, indent=1, allow_nan=False))
    except OSError as exc:
        raise _cannot_write(path, exc) from None


def shareable(doc, hosts) -> Any:
    """`doc` with what names this machine and its user taken out of every text: the host names (and the env's
    `hostname`), the interpreter's path, the user's name and home, absolute paths (their last part kept)."""
    from ..basics.scrub import scrub, secrets

    hidden = secrets([h for h in hosts if isinstance(h, str)])

    def clean(value, key: str = ""):
        if isinstance(value, dict):
            return {k: clean(v, k) for k, v in value.items() if k not in ("hostname", "python_executable")}
        if isinstance(value, list):
            return [clean(v) for v in value]
        if isinstance(value, str) and key != "id":
            return scrub(value, hidden)
        return value
    return clean(doc)


def export_tool_json(result: dict, path: str | Path) -> None:
    """Write one tool result (sweep, max-batch, inspect) as JSON; non-finite numbers become null."""
    path = Path(path)
    try:
        write_atomic(path, json.dumps(json_safe(result), indent=1, allow_nan=False))
    except OSError as exc:
        raise _cannot_write(path, exc) from None


def _read_doc(path: Path, what: str):
    """The JSON document in a file MPS Studio exported (`what`: "runs" or "a tool result", for the sentences);
    UserError (one sentence) when it is too large, unreadable or not JSON."""
    name = printable(path.name)
    try:
        info = path.stat()
        if stat.S_ISDIR(info.st_mode):
            raise IsADirectoryError
        if not stat.S_ISREG(info.st_mode):  # /dev/zero reports 0 bytes and never ends; a pipe may never end either
            raise UserError(f"{printable(str(path))} is not a regular file; choose a JSON file exported by MPS "
                            "Studio.")
        if info.st_size > MAX_FILE_BYTES:
            raise UserError(f"{name} is {fmt_bytes(info.st_size)}, more than the {fmt_bytes(MAX_FILE_BYTES)} an "
                            f"export of {what} can be; choose a file exported by MPS Studio.")
        with path.open("rb") as f:
            raw = f.read(MAX_FILE_BYTES + 1)  # a file that grows while it is read is still capped
        if len(raw) > MAX_FILE_BYTES:
            raise UserError(f"{name} is more than the {fmt_bytes(MAX_FILE_BYTES)} an export of {what} can be; "
                            "choose a file exported by MPS Studio.")
        text = raw.decode("utf-8-sig")  # a byte-order mark (some editors add one) is fine
    except FileNotFoundError:
        raise UserError(f"{printable(str(path))} does not exist; choose a JSON file exported by MPS Studio.") from None
    except IsADirectoryError:
        raise UserError(f"{printable(str(path))} is a folder; choose a JSON file exported by MPS Studio.") from None
    except UnicodeDecodeError:
        raise UserError(f"{name} is not UTF-8 text; choose a JSON file exported by MPS Studio.") from None
    except OSError as exc:
        raise UserError(f"{printable(str(path))} cannot be read ({exc.strerror or exc.__class__.__name__}); "
                        "choose a JSON file exported by MPS Studio.") from None
    try:
        return json.loads(text, parse_constant=_no_constant)
    except json.JSONDecodeError as exc:
        raise UserError(f"{name} is not valid JSON (line {exc.lineno}); choose a file exported by MPS Studio.") from None
    except (ValueError, RecursionError) as exc:  # NaN/Infinity, a number of thousands of digits, deep nesting
        why = "nested too deeply" if isinstance(exc, RecursionError) else one_line(str(exc), 120)
        raise UserError(f"{name} is not an export of {what} ({why}); choose a file exported by MPS Studio.") from None


def holds_runs(path: str | Path) -> bool:
    """Whether a readable JSON file is an export of runs (else it may be a tool result); UserError when it cannot be
    read as JSON at all."""
    doc = _read_doc(Path(path), "runs or a tool result")
    return isinstance(doc, dict) and doc.get("format") == JSON_FORMAT


def import_tool_json(path: str | Path):
    """A tool result (sweep, max-batch, inspect, export, deploy-bench, diagnose) from a file MPS Studio wrote (the window's
    Export JSON…, the CLI's --json), checked as a stored one is (tools/registry.checked), as a ToolRecord marked
    imported; UserError (one sentence) otherwise. Files the CLI wrote before they named their kind are recognised
    by the one check they pass."""
    from ..tools.registry import STORED, checked
    from .rows import ToolRecord, is_id, is_text

    path = Path(path)
    name = printable(path.name)
    doc = _read_doc(path, "a tool result")
    if not isinstance(doc, dict) or doc.get("format") == JSON_FORMAT:
        raise UserError(f"{name} is not a tool result" + (" (it holds runs: File → Import Runs… takes it)" if
                        isinstance(doc, dict) else "") + "; choose a file a tool exported.")
    if "kind" in doc and doc["kind"] not in STORED:
        raise UserError(f"{name} holds a result of kind {printable(str(doc['kind']))[:40]!r}, which MPS Studio does "
                        f"not keep (it keeps {', '.join(STORED)}); choose a file a tool exported.")
    kinds = [doc["kind"]] if "kind" in doc else list(STORED)
    found = []
    for kind in kinds:
        try:
            found.append((kind, checked(kind, {k: v for k, v in doc.items() if k not in ("kind", "id", "created_at")},
                                        where=name)))
        except UserError as exc:
            reason = exc
    if len(found) != 1:
        if len(kinds) == 1:
            raise UserError(f"{reason} Choose a file a tool exported.")
        raise UserError(f"{name} is not the result of any MPS Studio tool; choose a file a tool exported.")
    kind, result = found[0]
    result.pop("imported_from", None)
    record = ToolRecord(kind=kind, result=result)
    # the same result imported twice is kept once: by its id, or (a file written without one) by its content
    record.id = doc["id"] if is_id(doc.get("id")) else content_id(kind, result)
    result["imported_from"] = path.name[:200]
    if is_text(doc.get("created_at")) and len(doc["created_at"]) <= 40:
        when = date_problem(doc["created_at"])
        if when:
            raise UserError(f"{name} is dated {printable(doc['created_at'])[:32]}: {when.split(' (')[0]}; nothing was "
                            "imported.")
        record.created_at = doc["created_at"]
    return record


def content_id(kind: str, result: dict) -> str:
    """An id from a tool result's content, for files that carry none: the same result is the same id."""
    import hashlib

    body = json.dumps({"kind": kind, **{k: v for k, v in result.items() if k != "imported_from"}}, sort_keys=True,
                      default=str)
    return "c" + hashlib.sha256(body.encode("utf-8", "replace")).hexdigest()[:31]


def import_json(path: str | Path, progress: Callable[[float], None] | None = None) -> list[RunResult]:
    """Read and check every run of a file exported by MPS Studio (the CLI's --json or the window's export).

    The whole file is checked before anything is returned, so an import is all of it or nothing; UserError
    (one sentence naming the run and the field) otherwise. Imported runs are marked as such.
    """
    path = Path(path)
    name = printable(path.name)
    doc = _read_doc(path, "runs")
    if not isinstance(doc, dict) or doc.get("format") != JSON_FORMAT:
        raise UserError(f"{name} is not an MPS Studio export of runs (its 'format' is not {JSON_FORMAT!r}); "
                        "choose a file exported by MPS Studio.")
    version = doc.get("version")
    if isinstance(version, bool) or not isinstance(version, int):
        raise UserError(f"{name} has no version number (its 'version' is {printable(repr(version))[:20]}); "
                        "choose a file exported by MPS Studio.")
    if not 1 <= version <= JSON_VERSION:
        raise UserError(f"{name} was written in export version {version}, which this MPS Studio cannot read "
                        f"(it reads version {JSON_VERSION}); update MPS Studio.")
    if not isinstance(doc.get("comparisons", []), list):
        raise UserError(f"{name} has 'comparisons' that are not a list; choose a file exported by MPS Studio.")
    runs = doc.get("runs")
    if not isinstance(runs, list):
        raise UserError(f"{name} has no list of runs; choose a file exported by MPS Studio.")
    results, seen = [], set()
    for i, item in enumerate(runs):
        if progress is not None and i % 500 == 0:
            progress(i / len(runs))
        r = run_from_dict(item, where=f"{name} (run {i + 1})")
        if r.id in seen:
            raise UserError(f"{name} holds run {r.id} twice (run {i + 1}); nothing was imported.")
        seen.add(r.id)
        r.origin = "imported"
        results.append(r)
    return results


def _no_constant(name: str):
    raise ValueError(f"{name} is not a number MPS Studio writes")


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


STEPS_CSV_COLUMNS = ("step", "phase", "loss", "training_time_s", "window_samples_per_s", "window_memory_bytes")


def steps_rows(result: RunResult) -> list[list]:
    """One row per step of a run (its loss curve): step, phase ("warm-up", "measured", or "after the last window"
    for a run that ended mid-window), loss (empty where it was NaN), training time at the end of the step's window
    (warm-up and measured windows, validation excluded; empty inside warm-up), and the throughput and memory of
    the measurement window holding the step (empty in warm-up: warm-up is never counted). The loss is text with
    7 significant digits (what the history's float32 keeps)."""
    s = result.summary
    warm_steps = s.warmup_steps
    warm: int = warm_steps if isinstance(warm_steps, int) else 0
    warmup_s = s.warmup_s if is_finite(s.warmup_s) else None
    window_of: dict[int, tuple] = {}
    elapsed = warmup_s or 0.0
    last = warm
    for w in result.windows:
        first, steps = w.first_step, w.steps
        if first is None or steps is None:
            continue
        elapsed += w.seconds if is_finite(w.seconds) else 0.0
        if steps:
            last = max(last, first + steps - 1)
        for step in range(first, min(first + steps, len(result.losses) + 1)):  # a file's window of 10^17 steps
            window_of[step] = (elapsed, w.samples_per_s, w.memory)  # names no more rows than the run has losses
    rows = []
    for i, loss in enumerate(result.losses):
        step = i + 1
        phase = "warm-up" if step <= warm else "measured" if step <= last else "after the last window"
        t, rate, memory = window_of.get(step, (warmup_s if step == warm else None, None, None))
        # the history keeps losses as float32: 7 significant digits are all they hold
        rows.append([step, phase, f"{loss:.7g}" if is_finite(loss) else None, t, rate, memory])
    return rows


def export_steps_csv(result: RunResult, path: str | Path) -> int:
    """Write a run's loss curve (STEPS_CSV_COLUMNS, one row per step) to CSV; returns the rows written."""
    if result.is_summary:
        raise ValueError("export_steps_csv needs the whole run (RunStore.get)")
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerow(STEPS_CSV_COLUMNS)
    rows = steps_rows(result)
    for row in rows:
        writer.writerow(["" if v is None else v for v in row])
    path = Path(path)
    try:
        write_atomic(path, buf.getvalue())
    except OSError as exc:
        raise _cannot_write(path, exc) from None
    return len(rows)
