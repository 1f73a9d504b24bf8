"""The runs that wait for a team's tracking server (team/push.py): kept in the history file beside the runs, so a
push the server did not take goes when it answers, after a restart too. A server is kept by its address alone
(team/server.check_url refuses one that carries a secret)."""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass
from pathlib import Path

from ..basics.errors import UserError
from ..basics.formatting import one_line
from ..basics.results import now_iso
from . import schema


@dataclass(frozen=True)
class Waiting:
    url: str
    run_id: str
    experiment: str  # "" where the run's own (team/mlflow_run.experiment_name)
    queued_at: str
    attempts: int
    last_error: str


class PushQueue:
    """The pushes table of one history (RunStore.queue)."""

    def __init__(self, db: sqlite3.Connection, path: Path, read_only: bool) -> None:
        self.db, self.path, self.read_only = db, path, read_only

    def add(self, url: str, run_ids: list[str], experiment: str = "") -> None:
        """Queue runs for a server (a run queued already keeps its place, with this experiment)."""
        if self.read_only:
            raise UserError(f"The run history at {self.path} is read-only, so runs cannot wait for the server; make "
                            "the file writable or set MPSSTUDIO_DATA_DIR to another folder.")
        at = now_iso()
        self._write("INSERT INTO pushes (url, run_id, experiment, queued_at) VALUES (?,?,?,?) ON CONFLICT(url, run_id) "
                    "DO UPDATE SET experiment = excluded.experiment", [(url, i, experiment, at) for i in run_ids])

    def waiting(self, url: str | None = None) -> list[Waiting]:
        sql = "SELECT url, run_id, experiment, queued_at, attempts, last_error FROM pushes"
        try:
            rows = (self.db.execute(sql + " WHERE url = ? ORDER BY queued_at, rowid", (url,)) if url is not None else
                    self.db.execute(sql + " ORDER BY queued_at, rowid")).fetchall()
        except sqlite3.OperationalError:  # a history opened read-only before version 4: nothing waits
            return []
        except sqlite3.DatabaseError as exc:
            raise schema.explain(exc, self.path) from None
        return [Waiting(*tuple(r)) for r in rows]

    def done(self, url: str, run_id: str) -> None:
        self._write("DELETE FROM pushes WHERE url = ? AND run_id = ?", [(url, run_id)])

    def drop(self, url: str | None = None) -> int:
        """Stop waiting for that server (None: every server): how many runs and tool results waited. They stay in
        the history; only the intent to push them goes."""
        held = len(self.waiting(url))
        if url is None:
            self._write("DELETE FROM pushes", [()])
        else:
            self._write("DELETE FROM pushes WHERE url = ?", [(url,)])
        return held

    def failed(self, url: str, run_id: str, why: str) -> None:
        self._write("UPDATE pushes SET attempts = attempts + 1, last_error = ? WHERE url = ? AND run_id = ?",
                    [(one_line(why, 300), url, run_id)])

    def _write(self, sql: str, rows: list[tuple]) -> None:
        if self.read_only:
            return
        try:
            with self.db:
                self.db.executemany(sql, rows)
        except sqlite3.DatabaseError as exc:
            raise schema.explain(exc, self.path) from None
