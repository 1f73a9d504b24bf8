"""The history file: its tables and version, opening it (another program holding it, a read-only file or folder, a
damaged file found at once), upgrading an older version once, and one sentence per SQLite failure. Recovering the
readable runs of a damaged file is recovery.py's."""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path

from ..basics.errors import HistoryBusy, UserError
from . import rows

SCHEMA_VERSION = 4  # 2: the tools table; 3: runs.note and runs.rates (the table loads summaries only); 4: pushes
LOCK_WAIT_S = 5.0  # how long to wait for another program that holds the history

_SCHEMA = """
CREATE TABLE IF NOT EXISTS runs (
    id TEXT PRIMARY KEY,
    created_at TEXT NOT NULL,
    status TEXT NOT NULL,
    origin TEXT NOT NULL,
    model TEXT NOT NULL,
    dataset TEXT NOT NULL,
    device TEXT NOT NULL,
    batch_size INTEGER NOT NULL,
    precision TEXT NOT NULL,
    machine TEXT NOT NULL,
    error TEXT NOT NULL,
    config_json TEXT NOT NULL,
    env_json TEXT NOT NULL,
    summary_json TEXT NOT NULL,
    windows_json TEXT NOT NULL,
    epochs_json TEXT NOT NULL,
    losses BLOB NOT NULL,
    note TEXT NOT NULL DEFAULT '',
    rates BLOB,
    seal BLOB,
    evaluation_json TEXT NOT NULL DEFAULT '{}'
);
CREATE INDEX IF NOT EXISTS runs_created ON runs(created_at);
CREATE TABLE IF NOT EXISTS tools (
    id TEXT PRIMARY KEY,
    created_at TEXT NOT NULL,
    kind TEXT NOT NULL,
    result_json TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS pushes (
    url TEXT NOT NULL,
    run_id TEXT NOT NULL,
    experiment TEXT NOT NULL DEFAULT '',
    queued_at TEXT NOT NULL,
    attempts INTEGER NOT NULL DEFAULT 0,
    last_error TEXT NOT NULL DEFAULT '',
    PRIMARY KEY (url, run_id)
);
"""


def connect(target: str, uri: bool = False) -> sqlite3.Connection:
    db = sqlite3.connect(target, timeout=LOCK_WAIT_S, check_same_thread=False, uri=uri)
    db.row_factory = sqlite3.Row
    return db


def open_history(path: Path) -> tuple[sqlite3.Connection, bool]:
    """(connection, read_only) for the history at `path`, checked and upgraded; UserError with one sentence when
    it cannot be used, DamagedHistory when it is damaged (left as it is)."""
    if str(path) == ":memory:":
        memory = connect(str(path))
        migrate(memory)
        return memory, False
    db: sqlite3.Connection | None = None
    try:
        db, read_only = _open(path)
        check(db, path)
        if not read_only:
            migrate(db)
        return db, read_only
    except sqlite3.DatabaseError as exc:
        if db is not None:
            db.close()
        raise explain(exc, path) from None
    except UserError:
        if db is not None:
            db.close()
        raise


def _open(path: Path) -> tuple[sqlite3.Connection, bool]:
    folder = path.parent
    if path.is_dir():
        raise UserError(f"The run history {path} is a folder, not a file; move it aside or set "
                        "MPSSTUDIO_DATA_DIR to another folder.")
    if not folder.exists():
        try:
            folder.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise UserError(f"The run history folder {folder} cannot be created ({exc.strerror}); set "
                            "MPSSTUDIO_DATA_DIR to a folder you can write to.") from None
    writable = os.access(folder, os.W_OK) and (not path.exists() or os.access(path, os.W_OK))
    if writable:
        return connect(str(path)), False
    if not path.exists():
        raise UserError(f"The run history folder {folder} is read-only; set MPSSTUDIO_DATA_DIR to a "
                        "folder you can write to, or runs cannot be kept.")
    return _open_read_only(path), True


def _open_read_only(path: Path) -> sqlite3.Connection:
    """mode=ro; a WAL file whose shared-memory file cannot be made (a read-only folder) needs immutable=1,
    which reads it as it is on disk (nobody can be writing it there)."""
    uri = path.resolve().as_uri()
    try:
        db = connect(f"{uri}?mode=ro", uri=True)
        db.execute("SELECT COUNT(*) FROM sqlite_master").fetchone()
        return db
    except sqlite3.OperationalError:
        return connect(f"{uri}?mode=ro&immutable=1", uri=True)


def check(db: sqlite3.Connection, path: Path) -> None:
    """Refuse a damaged file at once (and leave it as it is): reading it later would fail halfway."""
    version = db.execute("PRAGMA user_version").fetchone()[0]
    if version > SCHEMA_VERSION:
        raise UserError(f"The run history at {path} was written by a newer MPS Studio; update the app to "
                        "read it.")
    verdict = db.execute("PRAGMA quick_check").fetchone()[0]
    if verdict != "ok":
        raise DamagedHistory(path)


def migrate(db: sqlite3.Connection) -> None:
    """Create or upgrade the tables; a history that is already current is not written to by opening it."""
    if db.execute("PRAGMA journal_mode").fetchone()[0].lower() != "wal":
        db.execute("PRAGMA journal_mode=WAL")
    if db.execute("PRAGMA user_version").fetchone()[0] < SCHEMA_VERSION:
        with db:
            db.executescript(_SCHEMA)
            have = run_columns(db)
            if "note" not in have:
                db.execute("ALTER TABLE runs ADD COLUMN note TEXT NOT NULL DEFAULT ''")
            if "rates" not in have:
                db.execute("ALTER TABLE runs ADD COLUMN rates BLOB")
                _fill_rates(db)
            if "evaluation_json" not in have:
                db.execute("ALTER TABLE runs ADD COLUMN evaluation_json TEXT NOT NULL DEFAULT '{}'")
            if "seal" not in have:
                db.execute("ALTER TABLE runs ADD COLUMN seal BLOB")
                _seal_rows(db)
            db.execute(f"PRAGMA user_version={SCHEMA_VERSION}")


def run_columns(db: sqlite3.Connection) -> set[str]:
    return {row[1] for row in db.execute("PRAGMA table_info(runs)").fetchall()}


def _seal_rows(db: sqlite3.Connection) -> None:
    """Once, when a history written before version 3 is opened: every row that passes the whole check is
    written again as checked (its summary re-derived from its windows) and sealed, so the table reads it
    without checking it again; a row that does not stays as it was (named in `notices` when read)."""
    # in the order they were stored: INSERT OR REPLACE gives each row a new rowid, which breaks ties of
    # created_at in the table's order
    ids = [row[0] for row in db.execute("SELECT id FROM runs ORDER BY rowid").fetchall()]
    for start in range(0, len(ids), 500):
        batch = []
        for run_id in ids[start:start + 500]:
            try:
                row = db.execute("SELECT * FROM runs WHERE id = ?", (run_id,)).fetchone()
                batch.append(rows.to_row(rows.result(row)))
            except (UserError, ValueError, TypeError, KeyError, IndexError, AttributeError, RecursionError,
                    sqlite3.DatabaseError):
                continue
        db.executemany(rows.INSERT.format(verb="INSERT OR REPLACE"), batch)


def _fill_rates(db: sqlite3.Connection) -> None:
    """Version 3 keeps each run's window throughputs beside it; a row whose windows cannot be read keeps
    NULL (summaries() then reads it whole, which names it in `notices`)."""
    for run_id, windows_json in db.execute("SELECT id, windows_json FROM runs").fetchall():
        try:
            rates = rows.stored_rates_blob(windows_json)
        except (ValueError, TypeError, AttributeError, RecursionError):
            continue
        db.execute("UPDATE runs SET rates = ? WHERE id = ?", (rates, run_id))


class DamagedHistory(UserError):
    """The history file is damaged: it is left untouched; `recover` copies what can be read."""

    def __init__(self, path: Path):
        super().__init__(f"The run history at {path} is damaged; it was left as it is. Run `mpsstudio history "
                         "--recover` (or Recover in the window) to copy every readable run to a fresh history.")
        self.path = path


FULL_BELOW = 16 * 1024 * 1024  # a disk I/O error with less free space than this is a full disk


def _nearly_full(path: Path) -> bool:
    """Whether the disk holding `path` has (nearly) no room: SQLite reports a write that ran out of room in its
    journal or WAL as "disk I/O error", not as "disk is full"."""
    import shutil

    try:
        return shutil.disk_usage(Path(path).parent).free < FULL_BELOW
    except OSError:
        return False


def explain(exc: sqlite3.DatabaseError, path: Path) -> UserError:
    """One accurate sentence per cause."""
    text = str(exc).lower()
    if "locked" in text or "busy" in text:
        return HistoryBusy(f"The run history at {path} is in use by another program (still after {LOCK_WAIT_S:g} s); "
                         "close the other MPS Studio window or command and try again.")
    if "readonly" in text or "read-only" in text:
        return UserError(f"The run history at {path} is read-only, so new runs are not kept; make it writable or "
                         "set MPSSTUDIO_DATA_DIR to another folder.")
    if "database or disk is full" in text or "disk is full" in text or (
            "disk i/o error" in text and _nearly_full(path)):  # a full disk met while writing the journal
        return UserError(f"The disk holding the run history at {path} is full; free some space and try again.")
    if "not a database" in text or "malformed" in text or "corrupt" in text:
        return DamagedHistory(path)
    if "unable to open" in text:
        return UserError(f"The run history at {path} cannot be opened (permission denied or a missing folder); "
                         "check the folder or set MPSSTUDIO_DATA_DIR to another one.")
    return UserError(f"The run history at {path} cannot be used ({exc}).")
