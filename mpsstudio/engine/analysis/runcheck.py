"""Checking a run that comes from outside this process (a run's own process, an imported file, a history row).

Every field is checked before anything is written: types from the dataclasses, the config through
RunConfig.validate(), finite non-negative numbers where a number is promised, ISO timestamps, bounded sizes
and nesting. A problem raises UserError naming the run and the field, in one sentence.
"""

from __future__ import annotations

import math
import re
from dataclasses import fields

from . import energy, memory
from ..basics.summary_fields import MAX_NUMBER, FieldError as _Bad, RunSummary, finite as _finite, number as _number
from ..basics.config import RunConfig, precision_note
from ..basics.errors import UserError
from ..basics import shape
from ..basics.formatting import one_line, printable
from ..basics.shape import ShapeError, plain
from ..basics.results import (MAX_CLASSES, STATUSES, EpochRow, Evaluation, RunResult, WindowRow, date_problem,
                              new_run_id, now_iso)
from .stability import assess
from .summary import device_kind, quartiles

ORIGINS = ("local", "imported")
RUN_KEYS = {"id", "created_at", "status", "error", "origin", "config", "env", "summary", "steps", "windows", "epochs",
            "note", "evaluation"}
ID_PATTERN = re.compile(r"[A-Za-z0-9_.-]{1,64}")
MAX_TEXT = shape.MAX_TEXT  # characters of any one string (the limits of plain JSON: basics/shape.py)
MAX_STEPS = 10_000_000  # per-step losses of one run
MAX_ROWS = 1_000_000  # windows or epochs of one run


def run_from_dict(data, where: str) -> RunResult:
    """A RunResult from a JSON-like dict, every field checked; UserError naming `where` and the field."""
    try:
        return _run(data)
    except _Bad as bad:
        raise UserError(f"{where} has an invalid '{bad.field}' ({bad.why}); the file was not written by "
                        "this version of MPS Studio or was changed by hand, so nothing was imported.") from None


def summary_from_dict(data, rates: list[float], where: str) -> RunResult:
    """A run without its steps, windows and epochs (the history table's load): the same checks as a whole run,
    with the throughput re-derived from `rates` (its windows' samples/s, kept beside it) and the stored energy
    figures checked as numbers. `window_rates` of the result is `rates`; the store's get() reads the whole run."""
    try:
        return _run(data, rates=rates)
    except _Bad as bad:
        raise UserError(f"{where} has an invalid '{bad.field}' ({bad.why})") from None


def checked_result(result: RunResult, where: str) -> RunResult:
    """A validated copy of a run that came from outside this process (a run's own process); UserError naming
    `where` and the field when any field is wrong."""
    try:
        return _run(result.to_dict())
    except _Bad as bad:
        raise UserError(f"{where} sent an invalid '{bad.field}' ({bad.why})") from None
    except Exception as exc:  # an object that is not what it claims to be
        raise UserError(f"{where} sent a run that could not be read ({type(exc).__name__})") from None


def storable(result: RunResult) -> RunResult:
    """The run as the history keeps it and reads it back: checked whole (the same check as a run read back), or,
    when a figure cannot be kept (a number past what the history holds, a value of the wrong kind), the same run as
    failed with the reason and without its figures: never lost, never unreadable."""
    if result.checked or result.is_summary:  # (a summary is refused by the store itself: it would lose the run)
        return result
    try:
        return _run(result.to_dict())
    except _Bad as bad:
        reason = f"'{bad.field}' ({bad.why})"
    except Exception as exc:  # an object that is not what it claims to be
        reason = f"a value that cannot be written ({type(exc).__name__})"
    cfg = result.config
    try:
        config = _config(cfg.to_dict())
    except Exception:  # the setup itself is what cannot be kept: its names and device stay
        config = _config({"model": _text_or(cfg.model, "unknown"), "dataset": _text_or(cfg.dataset, "unknown"),
                          "device": cfg.device if isinstance(cfg.device, str) and len(cfg.device) < 16 else "cpu",
                          "batch_size": None if cfg.is_script else 1, "steps": None, "epochs": None if
                          cfg.is_script else 1, "optimizer": None if cfg.is_script else "sgd",
                          "lr": None if cfg.is_script else 0.01, "precision": None if cfg.is_script else "fp32"})
    try:
        env = _object(result.env, "env")
    except Exception:
        env = {}
    before = f"{printable(result.error)[:2000]} " if isinstance(result.error, str) and result.error else ""
    error = (f"{before}This run could not be kept as measured: its {reason} cannot be stored, so its figures were "
             "dropped.").strip()
    kept = RunResult(config=config, status="failed", env=env, error=error[:MAX_TEXT],
                     id=result.id if isinstance(result.id, str) and ID_PATTERN.fullmatch(result.id) else new_run_id(),
                     created_at=now_iso() if date_problem(result.created_at) else result.created_at, origin="local")
    return _run(kept.to_dict())


def _text_or(value, default: str) -> str:
    return value if isinstance(value, str) and value.strip() and len(value) <= 4096 else default


def _run(data, rates: list[float] | None = None) -> RunResult:
    if not isinstance(data, dict):
        raise _Bad("run", f"a JSON object is expected, not {_kind(data)}")
    unknown = sorted(str(k) for k in data if k not in RUN_KEYS)
    if unknown:
        raise _Bad(_short(unknown[0]), "not a field of a run")
    for key in ("id", "status", "config", "summary"):
        if key not in data:
            raise _Bad(key, "missing")
    run_id = data["id"]
    if not isinstance(run_id, str) or not ID_PATTERN.fullmatch(run_id):
        raise _Bad("id", "1 to 64 letters, digits, '.', '_' or '-' expected")
    created = data.get("created_at")
    when = date_problem(created)
    if when or not isinstance(created, str):
        raise _Bad("created_at", when or "a date expected")
    if data["status"] not in STATUSES:
        raise _Bad("status", f"one of {', '.join(STATUSES)} expected")
    origin = data.get("origin", "local")
    if origin not in ORIGINS:
        raise _Bad("origin", f"one of {', '.join(ORIGINS)} expected")
    error = data.get("error", "")
    if not isinstance(error, str) or len(error) > MAX_TEXT:
        raise _Bad("error", f"text of at most {MAX_TEXT:,} characters expected")
    note = data.get("note", "")
    if not isinstance(note, str) or len(note) > MAX_TEXT:
        raise _Bad("note", f"text of at most {MAX_TEXT:,} characters expected")
    config = _config(data["config"])
    env = _object(data.get("env", {}), "env")
    summary = _checked(RunSummary.declared_shape(), _object(data["summary"], "summary"), "summary")
    if rates is None:
        losses = _steps(data.get("steps", []))
        windows = _rows(data.get("windows", []), "windows", WindowRow)
        epochs = _rows(data.get("epochs", []), "epochs", EpochRow)
        _rederive_throughput(summary, _window_rates(windows), config.batch_size)
        _check_energy(windows)
        summary.update(energy.summary_fields(windows, env))  # from the windows, whatever the summary says
        summary.update(memory.summary_fields(windows, device_kind(config.device), summary.get("input_shapes")))
    else:
        losses, windows, epochs = [], [], []
        if rates and not (min(rates) > 0 and math.isfinite(sum(rates)) and max(rates) <= MAX_NUMBER):
            raise _Bad("rates", "window throughputs above 0 expected")
        _rederive_throughput(summary, rates, config.batch_size)
    evaluation = _evaluation(data.get("evaluation", {})) if rates is None else None
    summary["precision_note"] = precision_note(config)  # from the config, whatever the summary says
    # the verdict is re-derived from the numbers it rests on: a file cannot call a noisy run stable
    if summary.get("windows") or "stability" in summary:
        summary["stability"], summary["stability_reason"] = assess(RunSummary.made(summary), env)
    return RunResult(config=config, status=data["status"], env=env, summary=RunSummary.made(summary), losses=losses,
                     windows=windows, epochs=epochs, error=error, id=run_id, created_at=created, origin=origin,
                     note=note, window_rates=None if rates is None else list(rates), checked=rates is None,
                     evaluation=evaluation)


def _evaluation(ev) -> Evaluation | None:
    """None for {}, else {"classes": 2 or more names, "matrix": one row of counts per class, as many as there are
    classes, "epoch": a number or null, "split": text}."""
    if ev == {}:
        return None
    if not isinstance(ev, dict) or set(ev) - {"classes", "matrix", "epoch", "split"}:
        raise _Bad("evaluation", "an object with classes, matrix, epoch and split expected")
    classes, matrix = ev.get("classes"), ev.get("matrix")
    if not isinstance(classes, list) or not 1 < len(classes) <= MAX_CLASSES or not all(
            isinstance(c, str) and len(c) <= 200 for c in classes):
        raise _Bad("evaluation.classes", f"2 to {MAX_CLASSES:,} class names expected")
    n = len(classes)
    if not isinstance(matrix, list) or len(matrix) != n or not all(
            isinstance(row, list) and len(row) == n and all(
                type(v) is int and 0 <= v <= MAX_NUMBER for v in row) for row in matrix):
        raise _Bad("evaluation.matrix", f"{n} rows of {n} counts expected (one per class)")
    epoch = ev.get("epoch")
    if epoch is not None and (type(epoch) is not int or epoch < 0):
        raise _Bad("evaluation.epoch", "an epoch number or null expected")
    return _read(Evaluation, ev, "evaluation")


def _read(record, value, path: str):
    """`value` read as `record` (its declared shape: basics/results.py), a wrong field named."""
    return record.built(_checked(record.declared_shape(), value, path))


def _checked(declared: shape.Shape, value, path: str):
    """`value` checked against a declared shape (a record's JSON, before its figures are re-derived)."""
    try:
        return declared.check(value, path)
    except ShapeError as exc:
        raise _Bad(exc.path or path, exc.why) from None


def _window_rates(windows: list[WindowRow]) -> list[float]:
    """The windows' throughputs (a window of 0 s, an infinite rate, is exported as null and left out)."""
    rates = []
    for i, w in enumerate(windows):
        v = w.samples_per_s
        if v is None:
            continue
        if v <= 0:
            raise _Bad(f"windows[{i}].samples_per_s", "a throughput above 0 expected")
        rates.append(float(v))
    return rates


def _rederive_throughput(summary: dict, rates: list[float], batch_size: int | None) -> None:
    """The throughput figures come from the window rates they summarise, whatever the summary says: a file whose
    summary disagrees with its windows cannot show another median, spread or stability."""
    if not rates:
        counted = summary.get("windows")
        if _number(counted) and counted > 0:  # figures whose windows are gone (a row or a file changed by hand):
            # the run is kept, its throughput is not shown (nothing backs it)
            summary.update(samples_per_s=None, samples_per_s_q1=None, samples_per_s_q3=None, samples_per_s_iqr=None,
                           windows=0, spread_percent=None, step_ms=None, s_per_epoch_estimate=None)
        return
    q1, med, q3 = quartiles(rates)
    old = summary.get("samples_per_s")
    summary.update(samples_per_s=med, samples_per_s_q1=q1, samples_per_s_q3=q3, samples_per_s_iqr=q3 - q1,
                   windows=len(rates), spread_percent=100 * (q3 - q1) / med,
                   step_ms=1000 * batch_size / med if batch_size else None)
    estimate = summary.get("s_per_epoch_estimate")
    if _number(old) and old > 0 and _number(estimate):  # train size / median: follows the median
        summary["s_per_epoch_estimate"] = estimate * old / med
    for key in ("spread_percent", "step_ms", "s_per_epoch_estimate"):  # a file's extreme rates can take a figure
        if summary.get(key) is not None and not _number(summary[key]):  # past what the history holds: not shown
            summary[key] = None


def _check_energy(windows: list[WindowRow]) -> None:
    """A window's energy parts are of the parts a source gives (their joules the record's shape checked)."""
    for i, w in enumerate(windows):
        if w.energy_parts is not None and any(k not in energy.PARTS for k in w.energy_parts):
            raise _Bad(f"windows[{i}].energy_parts", f"an object with some of {', '.join(energy.PARTS)} expected")


def _config(cfg) -> RunConfig:
    if not isinstance(cfg, dict):
        raise _Bad("config", f"a JSON object expected, not {_kind(cfg)}")
    names = {f.name for f in fields(RunConfig)}
    unknown = sorted(str(k) for k in cfg if k not in names)
    if unknown:
        raise _Bad(f"config.{_short(unknown[0])}", "not a setting of a run")
    for key in ("model", "dataset", "device", "batch_size"):
        if key not in cfg:
            raise _Bad(f"config.{key}", "missing")
    _object(cfg.get("options", {}), "config.options")
    config = RunConfig(**cfg)
    try:
        config.validate()
    except UserError as exc:
        raise _Bad("config", str(exc).rstrip(".")) from None
    return config


def _steps(steps) -> list[float]:
    if not isinstance(steps, list) or len(steps) > MAX_STEPS:
        raise _Bad("steps", f"a list of at most {MAX_STEPS:,} steps expected")
    losses = []
    for i, row in enumerate(steps):
        if not isinstance(row, dict) or "loss" not in row or set(row) - {"step", "loss"}:
            raise _Bad(f"steps[{i}]", "an object with a step and a loss expected")
        loss = row["loss"]
        if loss is None:  # a NaN loss is exported as null
            losses.append(math.nan)
        elif _finite(loss):
            losses.append(float(loss))
        else:
            raise _Bad(f"steps[{i}].loss", "a finite number or null expected")
    return losses


def _rows(rows, name: str, record):
    """Each row of `name` read as `record`, after the limits of plain JSON (basics/shape.plain)."""
    if not isinstance(rows, list) or len(rows) > MAX_ROWS:
        raise _Bad(name, f"a list of at most {MAX_ROWS:,} rows expected")
    return [_read(record, _object(row, (name, i)), _path((name, i))) for i, row in enumerate(rows)]


def _object(value, name, depth: int = 0) -> dict:
    """A JSON object within the limits of plain JSON (basics/shape.plain) holding only text, finite numbers,
    booleans and nulls."""
    if not isinstance(value, dict):
        raise _Bad(_path(name), f"a JSON object expected, not {_kind(value)}")
    try:
        plain(value, name, depth, finite=True)
    except ShapeError as exc:
        raise _Bad(exc.path, exc.why) from None
    return value


def _path(name) -> str:
    """env.gpu.name or windows[3] from the (parent, key) pairs _value builds."""
    if isinstance(name, str):
        return name
    parent, key = name
    return f"{_path(parent)}[{key}]" if isinstance(key, int) else f"{_path(parent)}.{_short(key)}"


def _kind(v) -> str:
    return {dict: "an object", list: "a list", str: "text", bool: "true/false", type(None): "null"}.get(
        type(v), "a number" if isinstance(v, (int, float)) else type(v).__name__)


def _short(text: str, limit: int = 40) -> str:
    return one_line(printable(text), limit)
