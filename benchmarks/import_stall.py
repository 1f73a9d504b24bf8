"""How long the window stops responding while it imports a large file of runs.

    QT_QPA_PLATFORM=offscreen .venv/bin/python benchmarks/import_stall.py --runs 15000

Writes a file of N runs (200 steps each) into a temporary folder, imports it through the results panel's
threaded import (the menu's path) and reports the total time and the longest gaps of a 20 ms QTimer: a gap is
time the GUI thread could not run. Uses a temporary history (MPSSTUDIO_DATA_DIR).
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--runs", type=int, default=15000)
    args = p.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="mpsstudio-import-"))
    os.environ["MPSSTUDIO_DATA_DIR"] = str(tmp / "data")
    from PySide6.QtCore import QEventLoop, QTimer
    from PySide6.QtWidgets import QApplication

    from mpsstudio.engine.basics.config import RunConfig
    from mpsstudio.engine.basics.results import RunResult
    from mpsstudio.engine.history.runfiles import export_json
    from mpsstudio.engine.history.store import RunStore
    from mpsstudio.gui.results.panel import ResultsPanel

    runs = [RunResult(RunConfig(device="cuda:0", steps=200, epochs=None), env={"machine_label": "server"},
                      summary={"samples_per_s": 900.0 + i, "samples_per_s_iqr": 9.0}, losses=[1.0] * 200,
                      id=f"r{i:06d}", created_at="2026-01-01T00:00:00+00:00") for i in range(args.runs)]
    path = tmp / "many.json"
    export_json(runs, path)
    app = QApplication.instance() or QApplication([])
    panel = ResultsPanel(RunStore())
    panel.resize(1200, 700)
    panel.show()
    gaps, last = [], [time.perf_counter()]

    def tick():
        now = time.perf_counter()
        gaps.append(now - last[0])
        last[0] = now
    timer = QTimer()
    timer.timeout.connect(tick)
    timer.start(20)
    loop = QEventLoop()
    panel.import_finished.connect(loop.quit)
    start = time.perf_counter()
    panel.files.start_import(str(path))
    loop.exec()
    total = time.perf_counter() - start
    gaps.sort()
    print(f"{args.runs:,} runs ({path.stat().st_size / 1e6:.0f} MB): import {total:.1f} s; longest GUI stalls "
          f"{', '.join(f'{g:.2f}' for g in gaps[-3:])} s; rows {panel.model.rowCount():,}")
    del app
    return 0


if __name__ == "__main__":
    sys.exit(main())
