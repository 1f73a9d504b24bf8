"""A sandbox for one `python -m mpsstudio ...` process: a temporary HOME and MPS Studio folders; the window's demo,
started early by conftest.py."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from pathlib import Path

DEMO_TEST = "test_demo_runs_the_default_comparison_and_writes_a_screenshot"


class Sandbox:
    """A temporary HOME and MPS Studio folders for one `python -m mpsstudio ...` process."""

    def __init__(self, root: Path):
        self.root = root
        self.home = root / "home"
        self.home.mkdir(parents=True)
        self.folders = {name: root / name for name in ("data", "config", "cache", "logs")}
        self.env = {k: v for k, v in os.environ.items() if not k.startswith(("XDG_", "MPSSTUDIO_"))}
        self.env.update(HOME=str(self.home), QT_QPA_PLATFORM="offscreen",
                        MPSSTUDIO_DATA_DIR=str(self.folders["data"]), MPSSTUDIO_CONFIG_DIR=str(self.folders["config"]),
                        MPSSTUDIO_CACHE_DIR=str(self.folders["cache"]), MPSSTUDIO_LOG_DIR=str(self.folders["logs"]))

    def start(self, *args) -> subprocess.Popen:
        return subprocess.Popen([sys.executable, "-m", "mpsstudio", *args], stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True, env=self.env, cwd=self.root)

    def written_into_home(self) -> list[str]:
        return sorted(str(p.relative_to(self.home)) for p in self.home.rglob("*"))


def start_demo() -> tuple[Sandbox, subprocess.Popen]:
    """The window's `--demo --screenshot` in a fresh sandbox (conftest.py may start it early)."""
    box = Sandbox(Path(tempfile.mkdtemp(prefix="mpsstudio-demo-")))
    return box, box.start("--demo", "--screenshot", str(box.root / "demo.png"))
