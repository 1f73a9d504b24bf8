"""A private PostgreSQL server for the team tests' long run against a PostgreSQL-backed MLflow store: Debian's
PostgreSQL binaries (/usr/lib/postgresql/N/bin), a fresh cluster in a temporary folder, trust authentication, on
127.0.0.1 only, stopped after. As root (CI here) the cluster belongs to the `postgres` user, as initdb requires."""

from __future__ import annotations

import glob
import os
import shutil
import subprocess
from pathlib import Path


def binaries() -> Path | None:
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"))
    return Path(found[-1]).parent if found else None


def _as_owner(command: list[str]) -> list[str]:
    if os.geteuid() == 0:
        runuser = shutil.which("runuser")
        return [runuser, "-u", "postgres", "--", *command] if runuser else command
    return command


class Postgres:
    def __init__(self, folder: Path, port: int) -> None:
        self.folder, self.port = folder, port
        self.data = folder / "pgdata"
        self.bin = binaries()

    def start(self) -> "Postgres":
        assert self.bin is not None
        self.folder.mkdir(parents=True, exist_ok=True)
        if os.geteuid() == 0:
            shutil.chown(self.folder, "postgres", "postgres")
            for parent in self.folder.parents:  # postgres must reach its folder
                if parent == Path("/"):
                    break
                os.chmod(parent, os.stat(parent).st_mode | 0o111)
        subprocess.run(_as_owner([str(self.bin / "initdb"), "-D", str(self.data), "-A", "trust", "-U", "postgres",
                                  "--no-sync"]), check=True, capture_output=True, timeout=120)
        subprocess.run(_as_owner([str(self.bin / "pg_ctl"), "-D", str(self.data), "-w", "-t", "60", "-l",
                                  str(self.folder / "pg.log"), "-o",
                                  f"-p {self.port} -h 127.0.0.1 -k {self.folder} -c fsync=off", "start"]),
                       check=True, capture_output=True, timeout=120)
        return self

    @property
    def uri(self) -> str:
        return f"postgresql+psycopg://postgres@127.0.0.1:{self.port}/postgres"

    def stop(self) -> None:
        if self.bin is not None and self.data.exists():
            subprocess.run(_as_owner([str(self.bin / "pg_ctl"), "-D", str(self.data), "-m", "immediate", "stop"]),
                           capture_output=True, timeout=60)
