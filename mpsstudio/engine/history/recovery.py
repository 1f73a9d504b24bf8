"""Recovering a damaged history: every readable run is copied to a fresh file that takes its place; the damaged
file is kept beside it, renamed, never changed."""

from __future__ import annotations

import sqlite3
from datetime import datetime, timezone
from pathlib import Path

from ..basics import paths
from ..basics.errors import UserError
from . import rows, schema


def recover(path: str | Path | None = None) -> tuple[Path, int, int]:
    """Copy every readable run of a damaged history into a fresh one that takes its place.

    The damaged file is kept beside it, renamed, never changed. Returns (where the old file is now,
    runs copied, runs lost).
    """
    path = Path(path) if path is not None else paths.data_dir() / "runs.sqlite3"
    if not path.is_file():
        raise UserError(f"There is no run history at {path} to recover.")
    if _healthy(path):
        raise UserError(f"The run history at {path} is not damaged; nothing was changed.")
    stamp = datetime.now(timezone.utc).strftime("%Y%m%d-%H%M%S")
    kept = _free_name(path, f"damaged-{stamp}")
    fresh = _free_name(path, f"recovering-{stamp}")
    copied = lost = 0
    try:
        old = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True)
        old.row_factory = sqlite3.Row
    except sqlite3.DatabaseError as exc:
        raise UserError(f"The run history at {path} cannot be opened at all ({exc}); nothing could be copied.") from None
    new, _ = schema.open_history(fresh)
    try:
        ids = _readable_ids(old)
        for run_id in ids:
            try:
                row = old.execute("SELECT * FROM runs WHERE id = ?", (run_id,)).fetchone()
                with new:  # one transaction per run, as RunStore.save
                    new.execute(rows.INSERT.format(verb="INSERT OR REPLACE"), rows.to_row(rows.result(row)))
                copied += 1
            except (sqlite3.DatabaseError, UserError, ValueError, TypeError, KeyError, IndexError):
                lost += 1
    finally:
        old.close()
        new.close()
    path.replace(kept)
    for suffix in ("-wal", "-shm"):  # the damaged file's journal belongs with it
        side = path.with_name(path.name + suffix)
        if side.exists():
            side.replace(kept.with_name(kept.name + suffix))
    fresh.replace(path)
    return kept, copied, lost


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


def _readable_ids(db: sqlite3.Connection) -> list[str]:
    try:
        return [r[0] for r in db.execute("SELECT id FROM runs").fetchall()]
    except sqlite3.DatabaseError:
        ids, rowid = [], 0
        while True:  # walk the table row by row, stepping over what cannot be read
            try:
                row = db.execute("SELECT rowid, id FROM runs WHERE rowid > ? ORDER BY rowid LIMIT 1",
                                 (rowid,)).fetchone()
            except sqlite3.DatabaseError:
                rowid += 1
                if rowid > 10_000_000:
                    return ids
                continue
            if row is None:
                return ids
            rowid = row[0]
            ids.append(row[1])
