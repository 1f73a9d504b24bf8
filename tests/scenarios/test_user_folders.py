"""The app's processes write only into the folders they are given: never into the user's real home.

Each subprocess path of the suite (the window's `--startup-timing` and `--demo`) runs here with HOME pointed at
an empty folder, the XDG variables unset and MPS Studio's own folders overridden; HOME must stay empty. These are
also the suite's end-to-end tests of those paths (one slow test per promise).

The demo takes ~10 s, mostly its own import of PyTorch; when the whole suite runs, conftest.py starts it as
soon as the tests are collected, so it runs beside the in-process tests, and its test here collects the result.
"""

from __future__ import annotations

import shutil

import pytest

from tests.support.sandbox import Sandbox, start_demo


def test_the_window_paints_before_torch_is_imported_and_keeps_its_settings_in_the_config_folder(tmp_path):
    box = Sandbox(tmp_path)
    out, err = box.start("--startup-timing").communicate(timeout=120)
    assert "torch imported before paint: False" in out, err
    assert "window icon: 7 sizes, 16-1024 px" in out  # loaded from mpsstudio.resources
    assert (box.folders["config"] / "window.ini").is_file()  # the override reaches a child process
    assert box.written_into_home() == []


@pytest.mark.long
def test_demo_runs_the_default_comparison_and_writes_a_screenshot(request):
    pytest.importorskip("PySide6")
    from PySide6.QtGui import QImage

    box, proc = getattr(request.config, "mpsstudio_demo", None) or start_demo()
    try:
        out, err = proc.communicate(timeout=300)
        assert proc.returncode == 0, err[-2000:]
        image = QImage(str(box.root / "demo.png"))
        assert (image.width(), image.height()) == (1440, 900)  # the demo's window size, offscreen at 1x
        colours = {image.pixel(x, y) for x in range(0, image.width(), 9) for y in range(0, image.height(), 9)}
        assert len(colours) > 50
        assert (box.folders["data"] / "runs.sqlite3").is_file()  # the demo's run is kept
        assert box.written_into_home() == []
    finally:
        shutil.rmtree(box.root, ignore_errors=True)
