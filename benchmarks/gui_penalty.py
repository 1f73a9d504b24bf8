"""Does watching a run slow it down? The same config run with live plots on screen and without, side by side.

Both go through the GUI's RunWorker (the QThread the window uses; each run in a process of its own); one feeds
a visible LivePlots widget, the other ignores the events. Repetitions alternate. Prints the median samples/s of
each and the ratio.

    QT_QPA_PLATFORM=offscreen python benchmarks/gui_penalty.py [--reps 3] [--model mlp] [--epochs 2]
        [--redraw-ms 100] [--threads N]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from PySide6.QtCore import QEventLoop  # noqa: E402
from PySide6.QtWidgets import QApplication  # noqa: E402

from mpsstudio.engine.basics.config import RunConfig  # noqa: E402
from mpsstudio.engine.basics.events import Ended, Started, Warmup, Window  # noqa: E402
from mpsstudio.gui.plots import BUSY_REDRAW_INTERVAL_MS, REDRAW_INTERVAL_MS, LivePlots  # noqa: E402
from mpsstudio.gui.worker import RunWorker  # noqa: E402


RESULTS = []
INTERVALS = []
REDRAW_MS = None


def one_run(config: RunConfig, plots: LivePlots | None) -> float:
    results = []

    def on_event(e):
        if isinstance(e, Ended):
            results.append(e.result)
        elif plots is None:
            return
        elif isinstance(e, Started):
            plots.start_run(e.run_id, e.config["device"], e.warmup_steps)
            if REDRAW_MS is None:  # the window's rule (window.live._on_event)
                threads = e.env.get("threads")
                plots.set_cores_busy(e.config["device"] == "cpu" and threads >= (os.cpu_count() or 1))
            else:
                plots.redraws.set_interval_ms(REDRAW_MS)
            INTERVALS.append(plots.redraw_interval_ms())
        elif isinstance(e, Warmup):
            plots.add_warmup(plots.run_ids()[-1], e.losses)
        elif isinstance(e, Window):
            plots.add_window(plots.run_ids()[-1], e.first_step, e.losses, e.samples_per_s, e.memory)

    worker = RunWorker([config])
    worker.event.connect(on_event)
    loop = QEventLoop()
    worker.all_done.connect(loop.quit)
    worker.start()
    loop.exec()
    worker.wait()
    [result] = results
    RESULTS.append(result)
    if result.status != "finished":
        raise SystemExit(f"run failed: {result.error}")
    return result.summary["samples_per_s"]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--model", default="mlp")
    ap.add_argument("--epochs", type=int, default=2)
    ap.add_argument("--redraw-ms", type=int, default=None,
                    help=f"plot redraw interval (default: the window's rule: {REDRAW_INTERVAL_MS} ms, "
                         f"{BUSY_REDRAW_INTERVAL_MS} ms while a CPU run uses every core)")
    ap.add_argument("--threads", type=int, default=None, help="torch threads of the run (default: torch's)")
    args = ap.parse_args()
    global REDRAW_MS
    REDRAW_MS = args.redraw_ms
    app = QApplication.instance() or QApplication(sys.argv[:1])
    config = RunConfig(model=args.model, epochs=args.epochs, threads=args.threads)
    plain, watched = [], []
    for rep in range(args.reps):
        for with_plots in ((False, True) if rep % 2 == 0 else (True, False)):
            if with_plots:
                plots = LivePlots()
                plots.resize(1100, 520)
                plots.show()
                watched.append(one_run(config, plots))
                plots.close()
            else:
                plain.append(one_run(config, None))
    a, b = statistics.median(plain), statistics.median(watched)
    threads = {r.env.get("threads") for r in RESULTS}
    print(f"{args.model}, {args.epochs} epochs on {config.dataset}, run threads {sorted(threads)}, redraw every "
          f"{sorted(set(INTERVALS))} ms, {os.cpu_count()} CPUs: without plots {a:,.0f} "
          f"samples/s, with live plots {b:,.0f} samples/s, ratio {b / a:.3f}")
    del app
    return 0


if __name__ == "__main__":
    sys.exit(main())
