"""A real MLflow tracking server for the team tests: `mlflow server` on 127.0.0.1 (a free port), its default
SQLAlchemy store in a SQLite file and artifacts served by it, from the environment `make mlflow-server` makes
(.venv-mlflow; MPSSTUDIO_MLFLOW names another mlflow executable). Restartable on the same port and store (a server
killed mid-push and started again)."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
START_S = 90.0


def executable() -> Path | None:
    named = os.environ.get("MPSSTUDIO_MLFLOW")
    found = Path(named) if named else ROOT / ".venv-mlflow" / "bin" / "mlflow"
    return found if found.exists() else None


def has_module(name: str) -> bool:
    """Whether mlflow's environment imports `name` (psycopg for PostgreSQL, flask_wtf for the basic-auth app)."""
    mlflow = executable()
    python = mlflow.parent / "python" if mlflow is not None else None
    return python is not None and python.exists() and subprocess.run(
        [str(python), "-c", f"import {name}"], capture_output=True, timeout=60).returncode == 0


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class MlflowServer:
    def __init__(self, folder: Path, store_uri: str | None = None, admin_password: str | None = None) -> None:
        """`store_uri`: the backend store (default: a SQLite file in `folder`; a PostgreSQL one for the long test);
        `admin_password`: MLflow's basic-auth app in front (`--app-name basic-auth`, its user "admin")."""
        self.admin_password = admin_password
        self.folder, self.port = folder, free_port()
        self.store_uri = store_uri or f"sqlite:///{folder / 'mlflow.db'}"
        self.url = f"http://127.0.0.1:{self.port}"
        self.process: subprocess.Popen | None = None

    def start(self) -> "MlflowServer":
        mlflow = executable()
        assert mlflow is not None, "no mlflow: run `make mlflow-server`"
        log = (self.folder / "server.log").open("ab")
        self.process = subprocess.Popen(
            [str(mlflow), "server", "--host", "127.0.0.1", "--port", str(self.port), "--workers", "1",
             "--backend-store-uri", self.store_uri,
             "--artifacts-destination", str(self.folder / "artifacts"),
             *(["--app-name", "basic-auth"] if self.admin_password else [])],
            stdout=log, stderr=subprocess.STDOUT, start_new_session=True, cwd=self.folder,
            env={**os.environ, **({"MLFLOW_AUTH_ADMIN_PASSWORD": self.admin_password,
                                   "MLFLOW_FLASK_SERVER_SECRET_KEY": "tests-only-key"} if self.admin_password else {})})
        deadline = time.monotonic() + START_S
        while time.monotonic() < deadline:
            assert self.process.poll() is None, (self.folder / "server.log").read_text()[-3000:]
            try:
                with urllib.request.urlopen(self.url + "/health", timeout=2) as answer:
                    if answer.status == 200:
                        return self
            except OSError:
                time.sleep(0.3)
        raise AssertionError(f"mlflow server did not answer in {START_S:g} s")

    def kill(self) -> None:
        """The whole server (its workers too) killed at once, as a crash or a pulled plug."""
        if self.process is not None and self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait(timeout=30)
        self.process = None
