"""The run history: SQLite under the platformdirs user data dir, one transaction per run.

It survives what a desktop app meets: another program holding the file (a bounded wait, then one sentence),
a read-only file (opened read-only: the history is shown, new runs are not kept), a damaged file (found when
it opens and left untouched; `recover()` copies what can be read to a fresh history when the user asks), and
rows written by an older version or by hand (checked on the way out, skipped with a notice, never a crash).
"""

from __future__ import annotations

import hashlib
import json
import os
import sqlite3
from array import array
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path

from ..basics import paths
from ..basics.config import RunConfig
from ..basics.errors import UserError
from ..basics.formatting import is_finite, plural
from ..basics.results import RunResult, json_safe, new_run_id, now_iso
from ..analysis.runcheck import run_from_dict, summary_from_dict

SCHEMA_VERSION = 3  # 2: the tools table; 3: runs.note and runs.rates (the table loads summaries only)
LOCK_WAIT_S = 5.0  # how long to wait for another program that holds the history
MAX_NOTE = 10_000  # characters of a run's note (runcheck.MAX_TEXT)

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
"""
_COLUMNS = ("id", "created_at", "status", "origin", "model", "dataset", "device", "batch_size", "precision",
            "machine", "error", "config_json", "env_json", "summary_json", "windows_json", "epochs_json", "losses",
            "note", "rates", "seal", "evaluation_json")
# What the history table reads of a run (summaries): no steps, windows or epochs, only the windows' samples/s.
_SUMMARY_COLUMNS = ("id", "created_at", "status", "origin", "error", "config_json", "env_json", "summary_json",
                    "note", "rates", "seal")


def default_data_dir() -> Path:
    """Where the history lives (MPSSTUDIO_DATA_DIR overrides it: tests, portable use)."""
    return paths.data_dir()


class RunStore:
    """Runs kept between launches. SQLite's journal keeps earlier runs intact if the app dies mid-write.

    `read_only` is True when the file cannot be written (new runs are then not kept: `save` says so);
    `notices` holds one sentence per stored run that could not be read (skipped, never a crash).
    """

    def __init__(self, path: str | Path | None = None):
        self.path = Path(path) if path is not None else default_data_dir() / "runs.sqlite3"
        self.read_only = False
        self.notices: list[str] = []
        self.tool_notices: list[str] = []
        self._db: sqlite3.Connection | None = None
        if str(self.path) == ":memory:":
            self._db = self._connect(str(self.path))
            self._migrate()
            return
        try:
            self._open()
        except sqlite3.DatabaseError as exc:
            if self._db is not None:
                self._db.close()
            raise _explain(exc, self.path) from None

    # -- opening --------------------------------------------------------------------------------------------
    def _connect(self, target: str, uri: bool = False) -> sqlite3.Connection:
        db = sqlite3.connect(target, timeout=LOCK_WAIT_S, check_same_thread=False, uri=uri)
        db.row_factory = sqlite3.Row
        return db

    def _open(self) -> None:
        folder = self.path.parent
        if self.path.is_dir():
            raise UserError(f"The run history {self.path} is a folder, not a file; move it aside or set "
                            "MPSSTUDIO_DATA_DIR to another folder.")
        if not folder.exists():
            try:
                folder.mkdir(parents=True, exist_ok=True)
            except OSError as exc:
                raise UserError(f"The run history folder {folder} cannot be created ({exc.strerror}); set "
                                "MPSSTUDIO_DATA_DIR to a folder you can write to.") from None
        writable = os.access(folder, os.W_OK) and (not self.path.exists() or os.access(self.path, os.W_OK))
        if not writable:
            if not self.path.exists():
                raise UserError(f"The run history folder {folder} is read-only; set MPSSTUDIO_DATA_DIR to a "
                                "folder you can write to, or runs cannot be kept.")
            self.read_only = True
            self._db = self._open_read_only()
        else:
            self._db = self._connect(str(self.path))
        self._check()
        if not self.read_only:
            self._migrate()

    def _open_read_only(self) -> sqlite3.Connection:
        """mode=ro; a WAL file whose shared-memory file cannot be made (a read-only folder) needs immutable=1,
        which reads it as it is on disk (nobody can be writing it there)."""
        uri = self.path.resolve().as_uri()
        try:
            db = self._connect(f"{uri}?mode=ro", uri=True)
            db.execute("SELECT COUNT(*) FROM sqlite_master").fetchone()
            return db
        except sqlite3.OperationalError:
            return self._connect(f"{uri}?mode=ro&immutable=1", uri=True)

    def _check(self) -> None:
        """Refuse a damaged file at once (and leave it as it is): reading it later would fail halfway."""
        version = self._db.execute("PRAGMA user_version").fetchone()[0]
        if version > SCHEMA_VERSION:
            raise UserError(f"The run history at {self.path} was written by a newer MPS Studio; update the app to "
                            "read it.")
        verdict = self._db.execute("PRAGMA quick_check").fetchone()[0]
        if verdict != "ok":
            raise DamagedHistory(self.path)

    def _migrate(self) -> None:
        """Create or upgrade the tables; a history that is already current is not written to by opening it."""
        if self._db.execute("PRAGMA journal_mode").fetchone()[0].lower() != "wal":
            self._db.execute("PRAGMA journal_mode=WAL")
        if self._db.execute("PRAGMA user_version").fetchone()[0] < SCHEMA_VERSION:
            with self._db:
                self._db.executescript(_SCHEMA)
                have = self._run_columns()
                if "note" not in have:
                    self._db.execute("ALTER TABLE runs ADD COLUMN note TEXT NOT NULL DEFAULT ''")
                if "rates" not in have:
                    self._db.execute("ALTER TABLE runs ADD COLUMN rates BLOB")
                    self._fill_rates()
                if "evaluation_json" not in have:
                    self._db.execute("ALTER TABLE runs ADD COLUMN evaluation_json TEXT NOT NULL DEFAULT '{}'")
                if "seal" not in have:
                    self._db.execute("ALTER TABLE runs ADD COLUMN seal BLOB")
                    self._seal_rows()
                self._db.execute(f"PRAGMA user_version={SCHEMA_VERSION}")

    def _run_columns(self) -> set[str]:
        return {row[1] for row in self._db.execute("PRAGMA table_info(runs)").fetchall()}

    def _seal_rows(self) -> None:
        """Once, when a history written before version 3 is opened: every row that passes the whole check is
        written again as checked (its summary re-derived from its windows) and sealed, so the table reads it
        without checking it again; a row that does not stays as it was (named in `notices` when read)."""
        # in the order they were stored: INSERT OR REPLACE gives each row a new rowid, which breaks ties of
        # created_at in the table's order
        ids = [row[0] for row in self._db.execute("SELECT id FROM runs ORDER BY rowid").fetchall()]
        for start in range(0, len(ids), 500):
            rows = []
            for run_id in ids[start:start + 500]:
                try:
                    row = self._db.execute("SELECT * FROM runs WHERE id = ?", (run_id,)).fetchone()
                    rows.append(_row(_result(row)))
                except (UserError, ValueError, TypeError, KeyError, IndexError, AttributeError, RecursionError,
                        sqlite3.DatabaseError):
                    continue
            self._db.executemany(f"INSERT OR REPLACE INTO runs ({','.join(_COLUMNS)}) VALUES "
                                 f"({','.join('?' * len(_COLUMNS))})", rows)

    def _fill_rates(self) -> None:
        """Version 3 keeps each run's window throughputs beside it; a row whose windows cannot be read keeps
        NULL (summaries() then reads it whole, which names it in `notices`)."""
        for run_id, windows_json in self._db.execute("SELECT id, windows_json FROM runs").fetchall():
            try:
                rates = _rates_blob(json.loads(windows_json))
            except (ValueError, TypeError, AttributeError, RecursionError):
                continue
            self._db.execute("UPDATE runs SET rates = ? WHERE id = ?", (rates, run_id))

    def close(self) -> None:
        if self._db is not None:
            self._db.close()

    # -- writing --------------------------------------------------------------------------------------------
    def save(self, result: RunResult) -> None:
        """Insert or replace one run (a run of this app: its id is ours) in a single transaction."""
        self._write("INSERT OR REPLACE", [result])

    def restore(self, results: list[RunResult]) -> None:
        """Put back whole runs that were deleted (Undo), ids, times and notes as they were, in one transaction."""
        self._write("INSERT OR REPLACE", results)

    def add_imported(self, results: list[RunResult]) -> tuple[int, int]:
        """Add runs read from a file, all in one transaction; a run whose id is already here is left as it is.

        Returns (added, already there)."""
        before = len(self)
        self._write("INSERT OR IGNORE", results)
        added = len(self) - before
        return added, len(results) - added

    def _write(self, verb: str, results: list[RunResult]) -> None:
        if not results:
            return
        if self.read_only:
            raise UserError(f"The run history at {self.path} is read-only, so new runs are not kept; make the "
                            "file writable or set MPSSTUDIO_DATA_DIR to another folder.")
        if any(r.is_summary for r in results):  # it would lose the run's steps and windows
            raise ValueError("a run read as a summary cannot be saved; read it whole with get()")
        rows = [_row(r) for r in results]
        try:
            with self._db:
                self._db.executemany(f"{verb} INTO runs ({','.join(_COLUMNS)}) VALUES "
                                     f"({','.join('?' * len(_COLUMNS))})", rows)
        except sqlite3.DatabaseError as exc:
            raise _explain(exc, self.path) from None

    def delete(self, run_ids: list[str]) -> int:
        """Remove runs by id; returns how many were there."""
        if self.read_only:
            raise UserError(f"The run history at {self.path} is read-only; nothing can be deleted from it.")
        ids = [i for i in dict.fromkeys(run_ids) if _is_text(i)]  # an id that is not text names no run here
        known = [i for i in ids if self._db.execute("SELECT 1 FROM runs WHERE id = ?", (i,)).fetchone()]
        if not known:
            return 0
        try:
            with self._db:
                self._db.executemany("DELETE FROM runs WHERE id = ?", [(i,) for i in known])
                return len(known)
        except sqlite3.DatabaseError as exc:
            raise _explain(exc, self.path) from None

    def save_tool(self, record: "ToolRecord") -> None:
        """Keep one tool result (a sweep, a max-batch search, an inspection) in a single transaction."""
        if self.read_only:
            raise UserError(f"The run history at {self.path} is read-only, so this result is not kept; make the "
                            "file writable or set MPSSTUDIO_DATA_DIR to another folder.")
        try:
            with self._db:
                self._db.execute("INSERT OR REPLACE INTO tools (id, created_at, kind, result_json) VALUES (?,?,?,?)",
                                 (record.id, record.created_at, record.kind, json.dumps(record.result)))
        except sqlite3.DatabaseError as exc:
            raise _explain(exc, self.path) from None

    def delete_tools(self, ids: list[str]) -> int:
        """Remove tool results by id; returns how many were there."""
        if self.read_only:
            raise UserError(f"The run history at {self.path} is read-only; nothing can be deleted from it.")
        try:
            with self._db:
                return sum(self._db.execute("DELETE FROM tools WHERE id = ?", (i,)).rowcount
                           for i in dict.fromkeys(ids) if _is_text(i))
        except sqlite3.DatabaseError as exc:
            raise _explain(exc, self.path) from None

    def tools(self) -> list["ToolRecord"]:
        """Every readable tool result, oldest first; unreadable ones are skipped and named in `tool_notices`."""
        from ..tools.registry import checked

        try:
            rows = self._db.execute("SELECT * FROM tools ORDER BY created_at, rowid").fetchall() \
                if self._has_tools_table() else []
        except sqlite3.DatabaseError as exc:
            raise _explain(exc, self.path) from None
        out, bad = [], []
        for row in rows:
            try:
                kind = str(row["kind"])
                out.append(ToolRecord(kind=kind, result=checked(kind, json.loads(row["result_json"])),
                                      id=str(row["id"]), created_at=str(row["created_at"])))
            except (UserError, ValueError, TypeError, KeyError, RecursionError) as exc:
                bad.append((str(row["id"])[:64], str(exc)))
        self.tool_notices = [f"{plural(len(bad), 'stored tool result')} could not be read and "
                        f"{'is' if len(bad) == 1 else 'are'} not shown (first: {bad[0][0]})."] if bad else []
        return out

    def _has_tools_table(self) -> bool:
        """A read-only history written by an older version has no tools table (it cannot be added there)."""
        return self._db.execute("SELECT 1 FROM sqlite_master WHERE type='table' AND name='tools'").fetchone() \
            is not None

    # -- reading --------------------------------------------------------------------------------------------
    def get(self, run_id: str) -> RunResult | None:
        """One run, whole (steps, windows, epochs), or None when it is not here or cannot be read (`notices`)."""
        if not _is_text(run_id):
            return None
        rows = self._select("SELECT * FROM runs WHERE id = ?", (run_id,))
        return rows[0] if rows else None

    def all(self) -> list[RunResult]:
        """Every readable run whole, oldest first; unreadable ones are skipped and named in `notices`."""
        return self._select("SELECT * FROM runs ORDER BY created_at, rowid")

    def summaries(self) -> list[RunResult]:
        """Every readable run without its steps, windows and epochs (`is_summary`), oldest first: what the
        history table and its comparisons need, about 10x less to read and check than all(); unreadable
        ones are skipped and named in `notices`."""
        have = self._run_columns()
        cols = [c if c in have else f"{chr(39) * 2 if c == 'note' else 'NULL'} AS {c}" for c in _SUMMARY_COLUMNS]
        sql = (f"SELECT {', '.join(cols)}, CASE WHEN {'rates' if 'rates' in have else 'NULL'} IS NULL THEN "
               "windows_json END AS windows_json FROM runs ORDER BY created_at, rowid")
        return self._select(sql, reader=_summary)

    def set_note(self, run_id: str, note: str) -> None:
        """Keep the user's note on a run ("" removes it)."""
        if self.read_only:
            raise UserError(f"The run history at {self.path} is read-only, so the note is not kept; make the file "
                            "writable or set MPSSTUDIO_DATA_DIR to another folder.")
        note = _text(note)
        if not _is_text(run_id):
            return
        if len(note) > MAX_NOTE:
            raise UserError(f"A note holds at most {MAX_NOTE:,} characters; this one has {len(note):,}.")
        try:
            with self._db:
                self._db.execute("UPDATE runs SET note = ? WHERE id = ?", (note, run_id))
        except sqlite3.DatabaseError as exc:
            raise _explain(exc, self.path) from None

    def _select(self, sql: str, params: tuple = (), reader=None) -> list[RunResult]:
        reader = reader or _result
        try:
            rows = self._db.execute(sql, params).fetchall()
        except sqlite3.DatabaseError as exc:
            raise _explain(exc, self.path) from None
        out, bad = [], []
        for row in rows:
            try:
                out.append(reader(row))
            except (UserError, ValueError, TypeError, KeyError, IndexError, AttributeError, RecursionError) as exc:
                bad.append((str(row["id"])[:64], str(exc)))
        self.notices = []
        if bad:
            self.notices.append(f"{plural(len(bad), 'stored run')} could not be read and {'is' if len(bad) == 1 else 'are'} "
                                f"not shown (first: {bad[0][0]}); `mpsstudio history --delete ID` removes one.")
        return out

    def __len__(self) -> int:
        return self._db.execute("SELECT COUNT(*) FROM runs").fetchone()[0]


@dataclass
class ToolRecord:
    """One stored tool result: kind ("sweep", "max-batch", "inspect") and its result dict (tools.checked)."""

    kind: str
    result: dict
    id: str = field(default_factory=new_run_id)
    created_at: str = field(default_factory=now_iso)


class DamagedHistory(UserError):
    """The history file is damaged: it is left untouched; `recover` copies what can be read."""

    def __init__(self, path: Path):
        super().__init__(f"The run history at {path} is damaged; it was left as it is. Run `mpsstudio history "
                         "--recover` (or Recover in the window) to copy every readable run to a fresh history.")
        self.path = path


def recover(path: str | Path | None = None) -> tuple[Path, int, int]:
    """Copy every readable run of a damaged history into a fresh one that takes its place.

    The damaged file is kept beside it, renamed, never changed. Returns (where the old file is now,
    runs copied, runs lost).
    """
    path = Path(path) if path is not None else default_data_dir() / "runs.sqlite3"
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
    store = RunStore(fresh)
    try:
        ids = _readable_ids(old)
        for run_id in ids:
            try:
                row = old.execute("SELECT * FROM runs WHERE id = ?", (run_id,)).fetchone()
                store.save(_result(row))
                copied += 1
            except (sqlite3.DatabaseError, UserError, ValueError, TypeError, KeyError, IndexError):
                lost += 1
    finally:
        old.close()
        store.close()
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


def _explain(exc: sqlite3.DatabaseError, path: Path) -> UserError:
    """One accurate sentence per cause."""
    text = str(exc).lower()
    if "locked" in text or "busy" in text:
        return UserError(f"The run history at {path} is in use by another program (still after {LOCK_WAIT_S:g} s); "
                         "close the other MPS Studio window or command and try again.")
    if "readonly" in text or "read-only" in text:
        return UserError(f"The run history at {path} is read-only, so new runs are not kept; make it writable or "
                         "set MPSSTUDIO_DATA_DIR to another folder.")
    if "database or disk is full" in text or "disk is full" in text:
        return UserError(f"The disk holding the run history at {path} is full; free some space and try again.")
    if "not a database" in text or "malformed" in text or "corrupt" in text:
        return DamagedHistory(path)
    if "unable to open" in text:
        return UserError(f"The run history at {path} cannot be opened (permission denied or a missing folder); "
                         "check the folder or set MPSSTUDIO_DATA_DIR to another one.")
    return UserError(f"The run history at {path} cannot be used ({exc}).")


def _text(value) -> str:
    """Text SQLite can hold: a lone surrogate (an undecodable byte of a Linux file name, a hand-made \\udcff in an
    imported file) becomes "?" instead of failing the write and losing the run. The JSON columns need nothing:
    json.dumps escapes it."""
    text = str(value)
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return text.encode("utf-8", "replace").decode("utf-8")
    return text


def _is_text(value) -> bool:
    return isinstance(value, str) and _text(value) == value


def _row(result: RunResult) -> tuple:
    c = result.config
    fields = (_text(result.id), _text(result.created_at), _text(result.status), _text(result.origin),
              _text(result.error), json.dumps(c.to_dict(), allow_nan=False), json.dumps(result.env, allow_nan=False),
              json.dumps(json_safe(result.summary), allow_nan=False))
    rates = _rates_blob(result.windows)
    return (
        *fields[:4], _text(c.model), _text(c.dataset), _text(c.device), c.batch_size, _text(c.precision),
        _text(result.machine), fields[4],
        *fields[5:], json.dumps(json_safe(result.windows), allow_nan=False),
        json.dumps(json_safe(result.epochs), allow_nan=False), array("f", result.losses).tobytes(),
        _text(result.note), rates, _seal(*fields, rates) if result.checked else None,
        json.dumps(result.evaluation, allow_nan=False),
    )


def _seal(*fields) -> bytes:
    """A digest of what the table reads of a run, written with the row. The run was checked whole before it was
    written (runcheck), so a row whose seal still matches is read without checking every value again; a row
    changed since (by hand, by a damaged disk) or written before version 3 no longer matches and is checked in
    full. It guards against accidents, not against someone who recomputes it (get() checks whole runs anyway)."""
    parts = [value if isinstance(value, bytes) else str(value).encode("utf-8", "surrogatepass") for value in fields]
    lengths = array("q", [len(part) for part in parts]).tobytes()  # no two different rows give the same bytes
    return hashlib.blake2b(lengths + b"".join(parts), digest_size=16).digest()


def _rates_blob(windows: list) -> bytes:
    """The windows' samples/s as float64s (compare.py's bootstrap reads them), as the table loads them."""
    return array("d", [w["samples_per_s"] for w in windows if isinstance(w, dict) and is_finite(w.get("samples_per_s"))
                       and w["samples_per_s"] > 0]).tobytes()


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


def _result(row: sqlite3.Row) -> RunResult:
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


def _summary(row: sqlite3.Row) -> RunResult:
    """A stored row without its steps, windows and epochs; the throughput re-derived from its window rates."""
    blob = row["rates"]
    if blob is None:  # written before version 3 into a history opened read-only: read from its windows
        blob = _rates_blob(json.loads(row["windows_json"]))
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
