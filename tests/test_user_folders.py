"""The app's processes write only into the folders they are given: never into the user's real home.

Each subprocess path of the suite (the window's `--startup-timing` and `--demo`) runs here with HOME pointed at
an empty folder, the XDG variables unset and MPS Studio's own folders overridden; HOME must stay empty. These are
also the suite's end-to-end tests of those paths (one slow test per promise).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest


@pytest.fixture
def sandbox(tmp_path):
    home = tmp_path / "home"
    home.mkdir()
    folders = {name: tmp_path / name for name in ("data", "config", "cache", "logs")}
    env = {k: v for k, v in os.environ.items() if not k.startswith(("XDG_", "MPSSTUDIO_"))}
    env.update(HOME=str(home), QT_QPA_PLATFORM="offscreen", MPSSTUDIO_DATA_DIR=str(folders["data"]),
               MPSSTUDIO_CONFIG_DIR=str(folders["config"]), MPSSTUDIO_CACHE_DIR=str(folders["cache"]),
               MPSSTUDIO_LOG_DIR=str(folders["logs"]))

    def run(*args, timeout=300):
        return subprocess.run([sys.executable, "-m", "mpsstudio", *args], capture_output=True, text=True,
                              timeout=timeout, env=env, cwd=tmp_path)

    yield run, home, folders
    left = sorted(str(p.relative_to(home)) for p in home.rglob("*"))
    assert left == [], f"written into HOME: {left}"


def test_the_window_paints_before_torch_is_imported_and_keeps_its_settings_in_the_config_folder(sandbox):
    run, home, folders = sandbox
    done = run("--startup-timing", timeout=120)
    assert done.returncode == 0, done.stderr
    assert "torch imported before paint: False" in done.stdout
    assert "window icon: 7 sizes, 16-1024 px" in done.stdout  # loaded from mpsstudio.resources (resources/)
    assert (folders["config"] / "window.ini").is_file()  # the override reaches a child process


def test_demo_runs_the_default_comparison_and_writes_a_screenshot(sandbox):
    pytest.importorskip("PySide6")
    from PySide6.QtGui import QImage

    run, home, folders = sandbox
    shot = Path(folders["data"]).parent / "demo.png"
    done = run("--demo", "--screenshot", str(shot))
    assert done.returncode == 0, done.stderr[-2000:]
    image = QImage(str(shot))
    assert (image.width(), image.height()) == (1440, 900)  # the demo's window size, offscreen at 1x
    colours = {image.pixel(x, y) for x in range(0, image.width(), 9) for y in range(0, image.height(), 9)}
    assert len(colours) > 50
