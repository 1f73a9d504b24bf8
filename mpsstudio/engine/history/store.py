"""The run history: SQLite under the platformdirs user data dir, one transaction per run.

It survives what a desktop app meets: another program holding the file (a bounded wait, then one sentence),
a read-only file (opened read-only: the history is shown, new runs are not kept), a damaged file (found when
it opens and left untouched; `recover()` copies what can be read to a fresh history when the user asks), and
rows written by an older version or by hand (checked on the way out, skipped with a notice, never a crash).
The file itself (tables, upgrades, one sentence per failure) is schema.py's; a run as a row is rows.py's.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Sequence
from pathlib import Path

from ..basics import paths
from ..basics.errors import UserError
from ..basics.formatting import instant, plural, printable
from ..analysis.runcheck import storable
from ..basics.results import RunResult, json_safe
from .queue import PushQueue
from . import pending, rows, schema
from .rows import ToolRecord
from .schema import LOCK_WAIT_S, SCHEMA_VERSION, DamagedHistory, HistoryBusy

TOOL_INSERT = "INSERT OR REPLACE INTO tools (id, created_at, kind, result_json) VALUES (?,?,?,?)"
MAX_NOTE = 10_000  # characters of a run's note the window keeps (an imported one may hold up to shape.MAX_TEXT)
__all__ = ["LOCK_WAIT_S", "MAX_NOTE", "SCHEMA_VERSION", "DamagedHistory", "HistoryBusy", "RunStore", "ToolRecord",
           "keep_run", "keep_tool"]


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
        self.notices: list[str] = []
        self.tool_notices: list[str] = []
        self._db, self.read_only = schema.open_history(self.path)
        self.queue = PushQueue(self._db, self.path, self.read_only)  # runs waiting for a team's server
        # what could not be saved earlier because another program held the history (pending.py) is added now
        self.pending_notices: list[str] = [] if str(self.path) == ":memory:" else pending.merge(self)

    def close(self) -> None:
        if self._db is not None:
            self._db.close()

    # -- writing --------------------------------------------------------------------------------------------
    def save(self, result: RunResult) -> None:
        """Insert or replace one run (a run of this app: its id is ours) in a single transaction: the run as the
        history can read it back (runcheck.storable: one it could not is kept as failed, saying why)."""
        self._write("INSERT OR REPLACE", [storable(result)])

    def restore(self, results: list[RunResult]) -> None:
        """Put back whole runs that were deleted (Undo), ids, times and notes as they were, in one transaction."""
        self._write("INSERT OR REPLACE", results)

    def add_imported(self, results: list[RunResult], foreign: bool = True,
                     tools: Sequence[ToolRecord] = ()) -> tuple[int, int]:
        """Add runs read from a file (and tool results: a pull brings both), all in one transaction; a run whose id
        is already here is left as it is, as is a tool result of the same id and kind (one of another kind under
        that id is kept under an id of its own). A foreign file's runs (`foreign`, every import: not this machine's
        own queue) are kept as new runs are: a script's arguments and the error's words with their secrets
        redacted, whatever the file says of keeping them.

        Returns (added, already there), runs and tool results counted together."""
        if foreign:
            results = [_redacted(r) for r in results]
        held = [self.tool_kind(t.id) for t in tools]
        new = [t for t, kind in zip(tools, held) if kind != t.kind]
        for t in new:
            if self.tool_kind(t.id) is not None:
                t.id = ToolRecord(kind=t.kind, result={}).id
        before = len(self)
        self._write("INSERT OR IGNORE", results, [self._tool_row(t) for t in new])
        added = len(self) - before
        return added + len(new), len(results) - added + len(tools) - len(new)

    def _write(self, verb: str, results: list[RunResult], tool_rows: Sequence[tuple] = ()) -> None:
        if not results and not tool_rows:
            return
        if self.read_only:
            raise UserError(f"The run history at {self.path} is read-only, so new runs are not kept; make the "
                            "file writable or set MPSSTUDIO_DATA_DIR to another folder.")
        if any(r.is_summary for r in results):  # it would lose the run's steps and windows
            raise ValueError("a run read as a summary cannot be saved; read it whole with get()")
        batch = [rows.to_row(r) for r in results]
        try:
            with self._db:
                self._db.executemany(rows.INSERT.format(verb=verb), batch)
                self._db.executemany(TOOL_INSERT, tool_rows)
        except sqlite3.DatabaseError as exc:
            raise schema.explain(exc, self.path) from None

    def delete(self, run_ids: list[str]) -> int:
        """Remove runs by id; returns how many were there."""
        if self.read_only:
            raise UserError(f"The run history at {self.path} is read-only; nothing can be deleted from it.")
        ids = [i for i in dict.fromkeys(run_ids) if rows.is_text(i)]  # an id that is not text names no run here
        known = [i for i in ids if self._db.execute("SELECT 1 FROM runs WHERE id = ?", (i,)).fetchone()]
        if not known:
            return 0
        try:
            with self._db:
                self._db.executemany("DELETE FROM runs WHERE id = ?", [(i,) for i in known])
                return len(known)
        except sqlite3.DatabaseError as exc:
            raise schema.explain(exc, self.path) from None

    def save_tool(self, record: "ToolRecord") -> None:
        """Keep one tool result (a sweep, a max-batch search, an inspection) in a single transaction."""
        if self.read_only:
            raise UserError(f"The run history at {self.path} is read-only, so this result is not kept; make the "
                            "file writable or set MPSSTUDIO_DATA_DIR to another folder.")
        row = self._tool_row(record)
        try:
            with self._db:
                self._db.execute(TOOL_INSERT, row)
        except sqlite3.DatabaseError as exc:
            raise schema.explain(exc, self.path) from None

    @staticmethod
    def _tool_row(record: "ToolRecord") -> tuple:
        """A tool result as the row TOOL_INSERT keeps; UserError for one larger than any tool makes."""
        from ..tools.records import MAX_STORED_BYTES

        text = json.dumps(record.result)
        if len(text) > MAX_STORED_BYTES:
            raise UserError(f"This {record.kind} result is {len(text) / 2**20:,.0f} MiB of JSON, more than any tool "
                            f"makes ({MAX_STORED_BYTES / 2**20:.0f} MiB), so it is not kept.")
        return record.id, record.created_at, record.kind, text

    def delete_any(self, ids: list[str]) -> tuple[int, int]:
        """Remove runs and tool results by id: (runs removed, tool results removed)."""
        return self.delete(ids), self.delete_tools(ids)

    def delete_tools(self, ids: list[str]) -> int:
        """Remove tool results by id; returns how many were there."""
        if self.read_only:
            raise UserError(f"The run history at {self.path} is read-only; nothing can be deleted from it.")
        try:
            with self._db:
                return sum(self._db.execute("DELETE FROM tools WHERE id = ?", (i,)).rowcount
                           for i in dict.fromkeys(ids) if rows.is_text(i))
        except sqlite3.DatabaseError as exc:
            raise schema.explain(exc, self.path) from None

    def add_imported_tool(self, record: "ToolRecord") -> bool:
        """Keep an imported tool result unless the same one is kept (the same id and kind): True when added. An id
        that holds a result of another kind is not this one: it is kept under an id of its own."""
        held = self.tool_kind(record.id)
        if held == record.kind:
            return False
        if held is not None:
            record.id = ToolRecord(kind=record.kind, result={}).id
        self.save_tool(record)
        return True

    def has_tool(self, tool_id: str, kind: str | None = None) -> bool:
        """Whether a tool result with this id (and, when given, of this kind) is kept."""
        return self.tool_kind(tool_id) is not None if kind is None else self.tool_kind(tool_id) == kind

    def tool_kind(self, tool_id: str) -> str | None:
        """The kind of the tool result kept under this id, or None."""
        if not rows.is_text(tool_id):
            return None
        try:
            if not self._has_tools_table():
                return None
            row = self._db.execute("SELECT kind FROM tools WHERE id = ?", (tool_id,)).fetchone()
        except sqlite3.DatabaseError as exc:
            raise schema.explain(exc, self.path) from None
        return str(row["kind"]) if row is not None else None

    def tool(self, tool_id: str) -> "ToolRecord | None":
        """The tool result kept under this id (checked as `tools` checks it), or None."""
        found = self.tools(tool_id=tool_id) if rows.is_text(tool_id) else []
        return found[0] if found else None

    def tools(self, kinds: tuple[str, ...] | None = None, tool_id: str | None = None) -> list["ToolRecord"]:
        """Every kept tool result (of `kinds`, when given), oldest first, each checked against its kind's declared
        shape; one that fails (written by an older version, or changed outside the app) comes as a record with
        `problem` set and an empty result, which the views show as "cannot be shown" with Delete. With `tool_id`,
        that one result alone (tool_notices then stay as they were)."""
        from ..basics.shape import ShapeError
        from ..tools.registry import validated
        from ..tools.records import MAX_STORED_BYTES

        try:
            if not self._has_tools_table():
                rows_in = []
            elif tool_id is not None:
                rows_in = self._db.execute("SELECT * FROM tools WHERE id = ?", (tool_id,)).fetchall()
            elif kinds is None:
                rows_in = self._db.execute("SELECT * FROM tools ORDER BY rowid").fetchall()
            else:
                marks = ",".join("?" * len(kinds))
                rows_in = self._db.execute(f"SELECT * FROM tools WHERE kind IN ({marks}) ORDER BY rowid",
                                           tuple(kinds)).fetchall()
        except sqlite3.DatabaseError as exc:
            raise schema.explain(exc, self.path) from None
        out = []
        for row in rows_in:
            kind, ident, when = (str(row[k])[:200] for k in ("kind", "id", "created_at"))
            text = row["result_json"]
            try:
                if not isinstance(text, str) or len(text) > MAX_STORED_BYTES:
                    raise ShapeError("", "is larger than any tool makes")
                out.append(ToolRecord(kind=kind, result=validated(kind, json.loads(text)), id=ident, created_at=when))
            except (ShapeError, ValueError) as exc:  # json's errors are ValueErrors
                why = f"its {exc.path or 'content'} {exc.why}" if isinstance(exc, ShapeError) else \
                    "its stored JSON cannot be read"
                out.append(ToolRecord(kind=kind, result={}, id=ident, created_at=when,
                                      problem=f"This {printable(kind)[:40]} result cannot be shown: {why}."))
        out = by_time(out)
        if tool_id is not None:
            return out
        broken = [r for r in out if r.problem]
        self.tool_notices = [f"{plural(len(broken), 'stored tool result')} cannot be shown (first: {broken[0].id}: "
                             f"{broken[0].problem}); `mpsstudio history --delete ID` or Delete in the Tools tab "
                             "removes it."] if broken else []
        return out

    def _has_tools_table(self) -> bool:
        """A read-only history written by an older version has no tools table (it cannot be added there)."""
        return self._db.execute("SELECT 1 FROM sqlite_master WHERE type='table' AND name='tools'").fetchone() \
            is not None

    # -- reading --------------------------------------------------------------------------------------------
    def get(self, run_id: str) -> RunResult | None:
        """One run, whole (steps, windows, epochs), or None when it is not here or cannot be read (`notices`)."""
        if not rows.is_text(run_id):
            return None
        found = self._select("SELECT * FROM runs WHERE id = ?", (run_id,))
        return found[0] if found else None

    def all(self) -> list[RunResult]:
        """Every readable run whole, oldest first; unreadable ones are skipped and named in `notices`."""
        return by_time(self._select("SELECT * FROM runs ORDER BY rowid"))

    def summaries(self) -> list[RunResult]:
        """Every readable run without its steps, windows and epochs (`is_summary`), oldest first: what the
        history table and its comparisons need, about 10x less to read and check than all(); unreadable
        ones are skipped and named in `notices`."""
        have = schema.run_columns(self._db)
        cols = [c if c in have else f"{chr(39) * 2 if c == 'note' else 'NULL'} AS {c}" for c in rows.SUMMARY_COLUMNS]
        sql = (f"SELECT {', '.join(cols)}, CASE WHEN {'rates' if 'rates' in have else 'NULL'} IS NULL THEN "
               "windows_json END AS windows_json FROM runs ORDER BY rowid")
        return by_time(self._select(sql, reader=rows.summary))

    def set_note(self, run_id: str, note: str) -> None:
        """Keep the user's note on a run ("" removes it)."""
        if self.read_only:
            raise UserError(f"The run history at {self.path} is read-only, so the note is not kept; make the file "
                            "writable or set MPSSTUDIO_DATA_DIR to another folder.")
        note = rows.text(note)
        if not rows.is_text(run_id):
            return
        if len(note) > MAX_NOTE:
            raise UserError(f"A note holds at most {MAX_NOTE:,} characters; this one has {len(note):,}.")
        try:
            with self._db:
                self._db.execute("UPDATE runs SET note = ? WHERE id = ?", (note, run_id))
        except sqlite3.DatabaseError as exc:
            raise schema.explain(exc, self.path) from None

    def _select(self, sql: str, params: tuple = (), reader=None) -> list[RunResult]:
        reader = reader or rows.result
        try:
            found = self._db.execute(sql, params).fetchall()
        except sqlite3.DatabaseError as exc:
            raise schema.explain(exc, self.path) from None
        out, bad = [], []
        for row in found:
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


def keep_run(result: RunResult, store: RunStore | None = None) -> str:
    """Save `result` in the history (`store`, or the default one opened for this): "" when it is kept there (or what
    opening it added), one sentence when the history stayed locked and it went to the pending folder instead
    (pending.py). UserError when neither could keep it."""
    return _keep(store, lambda s: s.save(result), "run", lambda: result.to_dict(), result.id, "this run")


def keep_tool(record: ToolRecord, store: RunStore | None = None) -> str:
    """As keep_run, for a tool result."""
    return _keep(store, lambda s: s.save_tool(record), "tool",
                 lambda: {"id": record.id, "created_at": record.created_at, "kind": record.kind,
                          "result": json_safe(record.result)}, record.id, f"the {record.kind} result")


def _keep(store, save, kind: str, data, ident: str, what: str) -> str:
    history = store.path if store is not None else default_data_dir() / "runs.sqlite3"
    try:
        return _save(store, save)
    except HistoryBusy:
        pass
    try:
        path = pending.write(history, kind, data(), ident)
    except (OSError, ValueError) as exc:
        raise UserError(f"The run history at {history} was in use by another program, and {what} could not be "
                        f"written beside it either ({getattr(exc, 'strerror', None) or exc}); export it as JSON to "
                        "keep it.") from None
    return (f"The run history at {history} was in use by another program for more than {schema.LOCK_WAIT_S:g} s, "
            f"so {what} was written to {path}; it is added to the history the next time MPS Studio starts.")


def _save(store, save) -> str:
    """Save through `store`, or through the default history opened for it (which first adds what was pending:
    those sentences are returned)."""
    if store is not None:
        save(store)
        return ""
    opened = RunStore()
    try:
        save(opened)
    finally:
        opened.close()
    return " ".join(opened.pending_notices)


def _redacted(r: RunResult) -> RunResult:
    """An imported run as a new run is kept: its script's arguments and its error with secrets redacted."""
    import dataclasses

    from ..basics.redact import KEEP_ARGS, redact_text, redacted_options

    options = redacted_options({k: v for k, v in r.config.options.items() if k != KEEP_ARGS})
    return dataclasses.replace(r, config=dataclasses.replace(r.config, options=options),
                               error=redact_text(r.error) if r.error else r.error)


def by_time(found: list) -> list:
    """Runs or tool results oldest first by the clock, not by their text: each keeps the offset it was written with,
    and "23:00+14:00" (09:00 UTC) is before "10:00+00:00". Equal instants stay in the order they were kept."""
    return sorted(found, key=lambda r: instant(r.created_at))
