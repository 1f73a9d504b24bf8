"""The run history: SQLite under the platformdirs user data dir, one transaction per finished run."""

from __future__ import annotations

import json
import sqlite3
from array import array
from pathlib import Path

from . import paths
from .config import RunConfig
from .errors import UserError
from .results import RunResult

SCHEMA_VERSION = 1


def default_data_dir() -> Path:
    """Where the history lives (MPSSTUDIO_DATA_DIR overrides it: tests, portable use)."""
    return paths.data_dir()


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
    losses BLOB NOT NULL
);
CREATE INDEX IF NOT EXISTS runs_created ON runs(created_at);
"""


class RunStore:
    """Runs kept between launches. SQLite's journal keeps earlier runs intact if the app dies mid-write."""

    def __init__(self, path: str | Path | None = None):
        self.path = Path(path) if path is not None else default_data_dir() / "runs.sqlite3"
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._db = sqlite3.connect(str(self.path), timeout=10, check_same_thread=False)
            self._migrate()
        except sqlite3.DatabaseError as exc:
            raise UserError(f"The run history at {self.path} cannot be opened ({exc}); move that file aside and start again.") from None
        except OSError as exc:
            raise UserError(f"The run history folder {self.path.parent} cannot be created ({exc.strerror}).") from None

    def _migrate(self) -> None:
        version = self._db.execute("PRAGMA user_version").fetchone()[0]
        if version > SCHEMA_VERSION:
            raise UserError(f"The run history at {self.path} was written by a newer MPS Studio; update the app to read it.")
        with self._db:
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.executescript(_SCHEMA)
            self._db.execute(f"PRAGMA user_version={SCHEMA_VERSION}")

    def close(self) -> None:
        self._db.close()

    def save(self, result: RunResult) -> None:
        """Insert or replace one run in a single transaction."""
        c = result.config
        row = (
            result.id, result.created_at, result.status, result.origin, c.model, c.dataset, c.device,
            c.batch_size, c.precision, result.machine, result.error,
            json.dumps(c.to_dict()), json.dumps(result.env), json.dumps(result.summary),
            json.dumps(result.windows), json.dumps(result.epochs),
            array("f", result.losses).tobytes(),
        )
        with self._db:
            self._db.execute(f"INSERT OR REPLACE INTO runs VALUES ({','.join('?' * len(row))})", row)

    def delete(self, run_ids: list[str]) -> None:
        with self._db:
            self._db.executemany("DELETE FROM runs WHERE id = ?", [(i,) for i in run_ids])

    def get(self, run_id: str) -> RunResult | None:
        row = self._db.execute("SELECT * FROM runs WHERE id = ?", (run_id,)).fetchone()
        return _row_to_result(row) if row else None

    def all(self) -> list[RunResult]:
        """Every run, oldest first."""
        rows = self._db.execute("SELECT * FROM runs ORDER BY created_at, rowid").fetchall()
        return [_row_to_result(r) for r in rows]

    def __len__(self) -> int:
        return self._db.execute("SELECT COUNT(*) FROM runs").fetchone()[0]


def _row_to_result(row) -> RunResult:
    (run_id, created_at, status, origin, _m, _d, _dev, _b, _p, _machine, error,
     config_json, env_json, summary_json, windows_json, epochs_json, losses_blob) = row
    losses = array("f")
    losses.frombytes(losses_blob)
    return RunResult(
        config=RunConfig.from_dict(json.loads(config_json)), status=status, env=json.loads(env_json),
        summary=json.loads(summary_json), losses=losses.tolist(), windows=json.loads(windows_json),
        epochs=json.loads(epochs_json), error=error, id=run_id, created_at=created_at, origin=origin,
    )
