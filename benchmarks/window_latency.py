"""Run to first step in the window: from pressing Run to the window drawing the run's start, with the window's
spare run process (made for the checked device while the window was idle) and without one.

Two main windows (one keeping a spare, one not), shown offscreen, each given the same setup; repetitions
alternate them. The clock starts at `start_run()` (what Run and Ctrl+R call) and stops when the window has
handled the run's Started event (sent by the run loop right before its first step) and at its first measured
window. Settings, history and data go to a temporary folder, never the user's.

    QT_QPA_PLATFORM=offscreen python benchmarks/window_latency.py [--reps 5] [--model mlp] [--device cpu]
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from mpsstudio.engine.basics.config import RunConfig
from run_latency import Marks, arguments, report  # this folder is on the path: it holds the script

# Qt and the window are imported in main(): run processes are spawned and import this script again (as
# __mp_main__), and a run process importing Qt would start slower than the window's own do.


def wait(app, done, timeout: float, what: str) -> None:
    end = time.monotonic() + timeout
    while not done():
        if time.monotonic() > end:
            raise SystemExit(f"{what} did not happen within {timeout:g} s")
        app.processEvents()
        time.sleep(0.002)


def one(app, window, cfg: RunConfig) -> tuple[float, float]:
    if window.keep_spare:  # the user pressed Run after the window had been idle a while
        wait(app, lambda: window.spare.wait_ready(0.01), 180, "the spare process getting ready")
    marks = Marks()  # connected after the window's own slot: the window has drawn the event
    marks.start()
    window.start_run()
    window.state.run_job.event.connect(marks.on_event)
    wait(app, lambda: window.state.run_job is None, 300, "the run ending")
    ended = window.state.run_ended[-1]
    if ended.status != "finished":
        raise SystemExit(f"run failed: {ended.error}")
    return marks.times()


def main() -> int:
    args, cfg = arguments(__doc__)
    tmp = tempfile.mkdtemp(prefix="mpsstudio-latency-")  # here, not at import: run processes import this script
    for name in ("DATA", "CONFIG", "CACHE", "LOG"):
        os.environ.setdefault(f"MPSSTUDIO_{name}_DIR", os.path.join(tmp, name.lower()))
    from PySide6.QtWidgets import QApplication

    from mpsstudio.gui.window import MainWindow

    app = QApplication.instance() or QApplication([])
    windows = {}
    for keep in (True, False):
        w = windows[keep] = MainWindow(keep_spare=keep)
        w.show()
        w.start_loading()
        wait(app, lambda: w.state.catalog is not None, 300, "the model catalogue loading")
        w.setup.apply_config(cfg)
    timings: dict[bool, list[tuple[float, float]]] = {True: [], False: []}
    try:
        for rep in range(args.reps):
            for keep in ((True, False) if rep % 2 == 0 else (False, True)):
                timings[keep].append(one(app, windows[keep], cfg))
    finally:
        for w in windows.values():
            w.close()
        shutil.rmtree(tmp, ignore_errors=True)
    report(f"the window, {args.model} on {args.dataset} ({args.device})", args.reps, timings[False], timings[True],
           drawn=" drawn")
    return 0


if __name__ == "__main__":
    sys.exit(main())
