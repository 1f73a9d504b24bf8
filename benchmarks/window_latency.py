"""Run to first step in the window: from pressing Run to the window drawing the run's start, with the window's
spare run process (made for the checked device while the window was idle) and without one.

Two main windows (one keeping a spare, one not), shown offscreen, each given the same setup; repetitions
alternate them. The clock starts at `start_run()` (what Run and Ctrl+R call) and stops when the window has
handled the run's Started event (sent by the run loop right before its first step) and at its first measured
window. Settings, history and data go to a temporary folder, never the user's.

    QT_QPA_PLATFORM=offscreen python benchmarks/window_latency.py [--reps 5] [--model mlp] [--device cpu]
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from mpsstudio.engine.basics.config import RunConfig  # noqa: E402
from mpsstudio.engine.basics.events import Started, Window  # noqa: E402

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
    marks: dict[str, float] = {}

    def on_event(event) -> None:  # connected after the window's own slot: the window has drawn the event
        if isinstance(event, Started):
            marks.setdefault("started", time.perf_counter() - t0)
        elif isinstance(event, Window):
            marks.setdefault("window", time.perf_counter() - t0)
    t0 = time.perf_counter()
    window.start_run()
    window.worker.event.connect(on_event)
    wait(app, lambda: window.worker is None, 300, "the run ending")
    ended = window.run_ended[-1]
    if ended.status != "finished":
        raise SystemExit(f"run failed: {ended.error}")
    return marks["started"], marks["window"]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--model", default="mlp")
    ap.add_argument("--dataset", default="synthetic")
    ap.add_argument("--device", default="cpu")
    args = ap.parse_args()
    tmp = tempfile.mkdtemp(prefix="mpsstudio-latency-")  # here, not at import: run processes import this script
    for name in ("DATA", "CONFIG", "CACHE", "LOG"):
        os.environ.setdefault(f"MPSSTUDIO_{name}_DIR", os.path.join(tmp, name.lower()))
    cfg = RunConfig(model=args.model, dataset=args.dataset, device=args.device, batch_size=64, steps=20,
                    epochs=None, warmup_steps=1)
    from PySide6.QtWidgets import QApplication

    from mpsstudio.gui.window import MainWindow

    app = QApplication.instance() or QApplication([])
    windows = {}
    for keep in (True, False):
        w = windows[keep] = MainWindow(keep_spare=keep)
        w.show()
        w.start_loading()
        wait(app, lambda: w.catalog is not None, 300, "the model catalogue loading")
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
    (w_start, w_win), (f_start, f_win) = ((statistics.median(v) for v in zip(*timings[k])) for k in (True, False))
    print(f"the window, {args.model} on {args.dataset} ({args.device}), {args.reps} alternating repetitions, medians:")
    print(f"  without a spare: Run -> first step drawn {f_start:.2f} s, -> first window drawn {f_win:.2f} s")
    print(f"  with its spare:  Run -> first step drawn {w_start:.2f} s, -> first window drawn {w_win:.2f} s")
    print(f"  the spare saves {f_start - w_start:.2f} s ({w_start / f_start:.2f} of the latency without it)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
