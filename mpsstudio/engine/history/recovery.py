"""Recovering a damaged history: every readable run and tool result is copied to a fresh file that takes its place;
the damaged file is kept beside it, renamed, never changed.

It answers in seconds whatever the damage: a file that is not a database at all (no SQLite header), or whose
schema cannot be read, has nothing to copy and is said so at once; a table whose rows cannot all be listed is walked
row by row, stepping over an unreadable stretch by doubling jumps, within WALK_S seconds.
"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

from ..basics import paths
from ..basics.errors import UserError
from . import rows, schema

SQLITE_HEADER = b"SQLite format 3\x00"
WALK_S = 20.0  # at most this long walking the rows of a table that cannot be listed at once
MAX_JUMP = 1 << 40  # past the last rowid any history reaches


@dataclass
class Recovered:
    kept: Path  # where the damaged file is now
    runs: int  # runs copied
    lost: int  # rows that could not be read
    tools: int = 0  # tool results copied
    nothing_readable: bool = False  # not a database at all, or its schema unreadable

    def sentence(self) -> str:
        from ..basics.formatting import plural

        if self.nothing_readable:
            return (f"Nothing in the damaged history could be read (it is not a database MPS Studio can open); it is "
                    f"kept as {self.kept.name} and a fresh history takes its place.")
        lost = f" ({self.lost} could not be read)" if self.lost else ""
        tools = f" and {plural(self.tools, 'tool result')}" if self.tools else ""
        return f"Recovered {plural(self.runs, 'run')}{tools}{lost}; the damaged file is kept as {self.kept.name}."


def recover(path: str | Path | None = None, progress: Callable[[float], None] | None = None) -> Recovered:
    """Copy every readable run and tool result of a damaged history into a fresh one that takes its place (the
    damaged file is kept beside it, renamed, never changed). `progress(fraction)` as rows are copied."""
    path = Path(path) if path is not None else paths.data_dir() / "runs.sqlite3"
    say = progress or (lambda fraction: None)
    if not path.is_file():
        raise UserError(f"There is no run history at {path} to recover.")
    if _healthy(path):
        raise UserError(f"The run history at {path} is not damaged; nothing was changed.")
    stamp = datetime.now(timezone.utc).strftime("%Y%m%d-%H%M%S")
    kept = _free_name(path, f"damaged-{stamp}")
    fresh = _free_name(path, f"recovering-{stamp}")
    found = Recovered(kept, 0, 0)
    new, _ = schema.open_history(fresh)
    try:
        old = _open_readable(path)
        if old is None:
            found.nothing_readable = True
        else:
            try:
                _copy(old, new, found, say)
            finally:
                old.close()
    finally:
        new.close()
    path.replace(kept)
    for suffix in ("-wal", "-shm"):  # the damaged file's journal belongs with it
        side = path.with_name(path.name + suffix)
        if side.exists():
            side.replace(kept.with_name(kept.name + suffix))
    fresh.replace(path)
    say(1.0)
    return found


def _open_readable(path: Path) -> sqlite3.Connection | None:
    """The damaged file opened read-only, or None when nothing in it can be read: no SQLite header (a file that is
    not a database, a zeroed or truncated header) or a schema that cannot be read."""
    try:
        with open(path, "rb") as f:
            if f.read(len(SQLITE_HEADER)) != SQLITE_HEADER:
                return None
        db = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True)
    except (OSError, sqlite3.DatabaseError):
        return None
    db.row_factory = sqlite3.Row
    try:
        db.execute("SELECT name FROM sqlite_master").fetchall()
    except sqlite3.DatabaseError:
        db.close()
        return None
    return db


def _copy(old: sqlite3.Connection, new: sqlite3.Connection, found: Recovered, say) -> None:
    run_ids = _readable_keys(old, "runs")
    tool_ids = _readable_keys(old, "tools") if _has_table(old, "tools") else []
    total = max(1, len(run_ids) + len(tool_ids))
    for i, run_id in enumerate(run_ids):
        try:
            row = old.execute("SELECT * FROM runs WHERE id = ?", (run_id,)).fetchone()
            with new:  # one transaction per run, as RunStore.save
                new.execute(rows.INSERT.format(verb="INSERT OR REPLACE"), rows.to_row(rows.result(row)))
            found.runs += 1
        except (sqlite3.DatabaseError, UserError, ValueError, TypeError, KeyError, IndexError):
            found.lost += 1
        if i % 50 == 0:
            say(0.95 * i / total)
    for i, tool_id in enumerate(tool_ids):  # copied as stored: each is checked against its shape when read
        try:
            row = old.execute("SELECT id, created_at, kind, result_json FROM tools WHERE id = ?", (tool_id,)).fetchone()
            with new:
                new.execute("INSERT OR REPLACE INTO tools (id, created_at, kind, result_json) VALUES (?,?,?,?)",
                            tuple(row))
            found.tools += 1
        except (sqlite3.DatabaseError, ValueError, TypeError, IndexError):
            found.lost += 1
        if i % 50 == 0:
            say(0.95 * (len(run_ids) + i) / total)


def _has_table(db: sqlite3.Connection, name: str) -> bool:
    try:
        return db.execute("SELECT 1 FROM sqlite_master WHERE type='table' AND name=?", (name,)).fetchone() is not None
    except sqlite3.DatabaseError:
        return False


def _readable_keys(db: sqlite3.Connection, table: str) -> list[str]:
    """The ids of `table`'s rows that can be read: all at once, else walking by rowid, an unreadable stretch stepped
    over by doubling jumps (1, 2, 4 ... rows past it), within WALK_S seconds."""
    try:
        return [r[0] for r in db.execute(f"SELECT id FROM {table}").fetchall()]
    except sqlite3.DatabaseError:
        pass
    ids: list = []
    rowid, ends = 0, time.monotonic() + WALK_S
    while time.monotonic() < ends:
        row, jump = None, 1
        while row is None and jump <= MAX_JUMP and time.monotonic() < ends:
            try:
                row = db.execute(f"SELECT rowid, id FROM {table} WHERE rowid > ? ORDER BY rowid LIMIT 1",
                                 (rowid,)).fetchone()
                if row is None:
                    return ids  # nothing after this rowid
            except sqlite3.DatabaseError:
                rowid += jump
                jump *= 2
        if row is None:
            return ids
        rowid = row[0]
        ids.append(row[1])
    return ids


def _healthy(path: Path) -> bool:
    try:
        db = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True)
        try:
            return db.execute("PRAGMA quick_check").fetchone()[0] == "ok"
        finally:
            db.close()
    except sqlite3.DatabaseError:
        return False


def _free_name(path: Path, tag: str) -> Path:
    """runs.<tag>.sqlite3, or runs.<tag>-2.sqlite3 ...: a name no file has (a kept file is never overwritten)."""
    for n in range(1, 10_000):
        candidate = path.with_name(f"{path.stem}.{tag}{'' if n == 1 else f'-{n}'}{path.suffix}")
        if not candidate.exists() and not candidate.with_name(candidate.name + "-wal").exists():
            return candidate
    raise UserError(f"Too many recovered histories beside {path}; move some of them away.")
