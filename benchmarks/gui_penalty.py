"""Does watching a run slow it down? The same config run with live plots on screen and without, in pairs, with an
interval.

Both go through the GUI's Run job (gui/jobs.run_job, the QThread the window uses; each run in a process of its own, a spare made
ready before each run so no process starts while one is measured); one feeds a visible LivePlots widget redrawing
as the window's Preferences say (--refresh: auto, 10 or 2 Hz), the other ignores the events. Pairs alternate the
order. Each pair gives one ratio of the run's wall-clock throughput over its measured phase (every window
included: what a user's run loses) with plots over without; the result is the median ratio with a 95 % bootstrap
interval, pairs added until it is within +-2 % (--precision) or --max-pairs.

    QT_QPA_PLATFORM=offscreen python benchmarks/gui_penalty.py [--model mlp] [--epochs 2] [--threads N]
        [--refresh auto|10|2] [--min-pairs 6] [--max-pairs 24] [--precision 0.02]
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from mpsstudio.engine import process
from mpsstudio.engine.basics.config import RunConfig
from mpsstudio.engine.basics.events import Ended, Started, Warmup, Window
from overhead import median_interval  # this folder is on the path: it holds the script

# Qt is imported in main(): run processes are spawned and import this script again (as __mp_main__).
INTERVALS = []


def one_run(config: RunConfig, plots, spare: process.Spare, refresh: str, redraw_ms: int | None = None
            ) -> tuple[float, float]:
    """(wall-clock samples/s of the measured phase, the run's reported median samples/s)."""
    from PySide6.QtCore import QEventLoop

    from mpsstudio.gui.plots import interval_for
    from mpsstudio.gui.jobs import run_job

    results = []

    def on_event(e):
        if isinstance(e, Ended):
            results.append(e.result)
        elif plots is None:
            return
        elif isinstance(e, Started):
            plots.start_run(e.run_id, e.config["device"], e.warmup_steps)
            plots.set_redraw_interval_ms(redraw_ms or interval_for(refresh, e.config["device"], e.env.get("threads"),
                                                                   os.cpu_count() or 1))  # the window's rule

            INTERVALS.append(plots.redraw_interval_ms())
        elif isinstance(e, Warmup):
            plots.add_warmup(plots.run_ids()[-1], e.losses)
        elif isinstance(e, Window):
            plots.add_window(plots.run_ids()[-1], e.first_step, e.losses, e.samples_per_s, e.memory)

    spare.fill()
    if not spare.wait_ready(300):
        raise SystemExit("the spare process did not get ready within 300 s")
    worker = run_job([config], spare=spare)
    worker.event.connect(on_event)
    loop = QEventLoop()
    worker.ended.connect(loop.quit)
    worker.start()
    loop.exec()
    worker.wait()
    [result] = results
    if result.status != "finished":
        raise SystemExit(f"run failed: {result.error}")
    return result.summary["wall_samples_per_s"], result.summary["samples_per_s"]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="mlp")
    ap.add_argument("--epochs", type=int, default=2)
    ap.add_argument("--refresh", default="auto", choices=("auto", "10", "2"),
                    help="the Preferences' live plot refresh (default: auto: 10 Hz, 2 Hz while a CPU run uses "
                         "every core)")
    ap.add_argument("--threads", type=int, default=None, help="torch threads of the run (default: torch's)")
    ap.add_argument("--redraw-ms", type=int, default=None, help="a fixed redraw interval instead (diagnosis)")
    ap.add_argument("--min-pairs", type=int, default=6)
    ap.add_argument("--max-pairs", type=int, default=24)
    ap.add_argument("--precision", type=float, default=0.02, help="stop when the interval is within +- this")
    args = ap.parse_args()
    from PySide6.QtWidgets import QApplication

    from mpsstudio.gui.plots import LivePlots

    app = QApplication.instance() or QApplication(sys.argv[:1])
    config = RunConfig(model=args.model, epochs=args.epochs, threads=args.threads)
    spare = process.Spare(config.mps_fallback, config.device)
    plain, watched = [], []
    try:
        while True:
            for with_plots in ((False, True) if len(plain) % 2 == 0 else (True, False)):
                if with_plots:
                    plots = LivePlots()
                    plots.resize(1100, 520)
                    plots.show()
                    watched.append(one_run(config, plots, spare, args.refresh, args.redraw_ms))
                    plots.close()
                else:
                    plain.append(one_run(config, None, spare, args.refresh))
            ratios = [w[0] / p[0] for w, p in zip(watched, plain)]
            mid, lo, hi = median_interval(ratios)
            if len(ratios) >= args.max_pairs or (len(ratios) >= args.min_pairs and hi - mid <= args.precision
                                                 and mid - lo <= args.precision):
                break
    finally:
        spare.close()
    median_ratio = median_interval([w[1] / p[1] for w, p in zip(watched, plain)])[0]
    wide = "" if hi - mid <= args.precision and mid - lo <= args.precision else " (wider than asked)"
    print(f"{args.model}, {args.epochs} epochs on {config.dataset}, run threads {args.threads or 'default'}, "
          f"refresh {args.refresh}: redraw every {sorted(set(INTERVALS))} ms, {os.cpu_count()} CPUs, "
          f"{len(ratios)} pairs: wall-clock samples/s with plots / without {mid:.3f} [95 % interval {lo:.3f}, "
          f"{hi:.3f}]{wide}; reported median samples/s {median_ratio:.3f}")
    del app
    return 0


if __name__ == "__main__":
    sys.exit(main())
