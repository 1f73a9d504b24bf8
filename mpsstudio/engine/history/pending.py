"""Runs and tool results that could not be saved because another program held the history: written to a pending
folder beside the history (one JSON file each, the export's checks on the way back in) and added to the history
the next time it is opened for writing. Nothing that ended is lost to a lock.

store.keep_run and store.keep_tool are what front ends call: they save, or, when the history stays locked past its
bounded wait, write the pending file here.
"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

from ..basics.errors import UserError
from ..basics.files import write_atomic
from ..basics.formatting import one_line, plural, printable
from . import schema
from .rows import ToolRecord, is_id, is_text
from .schema import HistoryBusy

FOLDER = "pending"
FORMAT = "mpsstudio.pending"
MERGE_WAIT_MS = 500  # how long a merge waits for a locked history (the save that follows waits LOCK_WAIT_S)
MAX_BYTES = 256 * 1024**2  # a pending file larger than this is not read (a run's whole record is far smaller)


def folder_for(history: Path) -> Path:
    return history.parent / FOLDER


def write(history: Path, kind: str, record: dict, ident: str) -> Path:
    """Write one pending record ("run": RunResult.to_dict(); "tool": {id, created_at, kind, result})."""
    safe = "".join(c for c in ident if c.isalnum() or c in "-_")[:80] or "record"
    path = folder_for(history) / f"{kind}-{safe}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    write_atomic(path, json.dumps({"format": FORMAT, "version": 1, "kind": kind, kind: record}, allow_nan=False))
    return path


def merge(store) -> list[str]:
    """Add every pending record to `store` (opened for writing); one sentence per outcome worth telling. A file
    that cannot be read is renamed `.unreadable` and named (it is never deleted); while the history is still
    locked the files stay for the next start."""
    where = folder_for(store.path)
    if store.read_only or not where.is_dir():
        return []
    try:
        files = sorted(p for p in where.glob("*.json") if p.is_file() and not p.is_symlink())
    except OSError:
        return []
    if not files:
        return []
    store._db.execute(f"PRAGMA busy_timeout = {MERGE_WAIT_MS}")  # pending results can wait for the next start
    try:
        return _merge(store, files, where)
    finally:
        store._db.execute(f"PRAGMA busy_timeout = {int(schema.LOCK_WAIT_S * 1000)}")


def _merge(store, files: list[Path], where: Path) -> list[str]:
    from ..analysis.runcheck import run_from_dict
    from ..tools.registry import checked

    bad: list[tuple[Path, str]] = []
    added, known = 0, 0
    for path in files:
        try:
            if path.stat().st_size > MAX_BYTES:
                raise UserError("too large")
            doc = json.loads(path.read_bytes().decode("utf-8"))
            if not isinstance(doc, dict) or doc.get("format") != FORMAT or doc.get("kind") not in ("run", "tool"):
                raise UserError("not a pending run")
            if doc["kind"] == "run":  # a run already in the history stays as it is (its note too)
                new, _ = store.add_imported([run_from_dict(doc.get("run"), where=printable(path.name))],
                                            foreign=False)
            else:
                item = doc.get("tool")
                if not isinstance(item, dict):
                    raise UserError("no tool result")
                kind = str(item.get("kind"))[:40]
                record = ToolRecord(kind=kind, result=checked(kind, item.get("result"), where="It"))
                if is_id(item.get("id")):  # one without an id is a result of its own (a new id), never dropped
                    record.id = item["id"]
                if is_text(item.get("created_at")) and len(item["created_at"]) <= 40:
                    record.created_at = item["created_at"]
                new = 0 if store.has_tool(record.id, kind) else 1
                if new:
                    if store.has_tool(record.id):  # that id holds a result of another kind: this one gets its own
                        record.id = ToolRecord(kind=kind, result={}).id
                    store.save_tool(record)
            if new:
                added += 1
            else:
                known += 1
        except HistoryBusy:
            left = len(files) - added - known - len(bad)
            return [f"{plural(left, 'pending result')} in {where} could not be added yet: the history is in use by "
                    f"another program; {'it is' if left == 1 else 'they are'} added at the next start."]
        except (UserError, OSError, ValueError, TypeError, KeyError, RecursionError, sqlite3.Error) as exc:
            bad.append((path, one_line(str(exc), 200)))
            try:
                path.replace(path.with_name(path.name + ".unreadable"))
            except OSError:
                pass
            continue
        try:
            path.unlink()
        except OSError:
            pass
    out = []
    if added:
        out.append(f"Added {plural(added, 'result')} that could not be saved earlier (the history was in use by "
                   "another program)" + (f"; {known} {'was' if known == 1 else 'were'} in it already." if known
                                         else "."))
    if bad:
        out.append(f"{plural(len(bad), 'pending result')} in {where} could not be read and "
                   f"{'was' if len(bad) == 1 else 'were'} left there as .unreadable (first: "
                   f"{printable(bad[0][0].name)}: {bad[0][1]}).")
    return out
