"""How long a large run history takes to load: the store alone, and the window's results panel showing it.

Usage: QT_QPA_PLATFORM=offscreen python benchmarks/history_load.py [--runs 10000] [--long-every 10] [--reps 3]

Builds a history of RUNS runs in a temporary folder, copied from the runs in docs/runs/ (fresh ids and times,
each setup run on every device of one machine, so comparisons of 2-3 runs form as they do in use); one run in LONG_EVERY is a long one
(5,000 steps, 100 windows). Prints, side by side in one process, the median of REPS loads:
- store.all(): every run whole (per-step losses, windows, epochs; what the table read before issue 13);
- store.summaries(): what the table reads now (summary, config, environment, per-window throughput);
- the results panel: opening it on the history (summaries, comparisons, table), as the window does at launch;
- the one-time upgrade of the same history written by version 2 (each run checked whole, re-derived and sealed).
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from mpsstudio.engine.history import runfiles  # noqa: E402
from mpsstudio.engine.basics.results import new_run_id  # noqa: E402
from mpsstudio.engine.history.store import RunStore  # noqa: E402


def build(path: Path, runs: int, long_every: int) -> None:
    sources = runfiles.import_json(ROOT / "docs" / "runs" / "h200-default-comparison.json")
    store = RunStore(path)
    batch = []
    for i in range(runs):
        src = sources[i % len(sources)]
        run = type(src)(**{**src.__dict__})
        run.id = new_run_id()
        day, sec = divmod(i, 86_400)
        run.created_at = f"2026-{1 + day % 12:02d}-{1 + day % 28:02d}T{sec // 3600:02d}:{sec // 60 % 60:02d}:" \
                         f"{sec % 60:02d}+00:00"
        group = i // len(sources)  # a comparison: the same setup on each device, from one machine
        run.config = type(run.config)(**{**run.config.__dict__, "batch_size": 1 + group % 512,
                                         "seed": group // 512})
        run.env = {**run.env, "machine_label": f"machine-{(i // len(sources)) % 50}",  # each run's own, as in use:
                   "host_load": {"other_cpu_percent": i % 7 / 10, "own_cpu_percent": 90.0 + i % 9,
                                 "cores": 16, "seconds": 1.0 + i / 1000},
                   "energy": {"source": "nvml", "measure": "measured", "scope": "board", "reason": None}}
        if long_every and i % long_every == 0:
            run.losses = [0.5 + 0.001 * (k % 97) for k in range(5_000)]
            w = run.windows[0]
            run.windows = [dataclasses.replace(w, first_step=11 + 49 * k, steps=49) for k in range(100)]
        batch.append(run)
        if len(batch) == 500:
            store.add_imported(batch)
            batch = []
    store.add_imported(batch)
    store.close()


def timed(fn, reps: int) -> float:
    times = []
    for _ in range(reps):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=10_000)
    parser.add_argument("--long-every", type=int, default=10)
    parser.add_argument("--reps", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "runs.sqlite3"
        start = time.perf_counter()
        build(path, args.runs, args.long_every)
        size = path.stat().st_size + sum(p.stat().st_size for p in Path(tmp).glob("runs.sqlite3-*"))
        print(f"built {args.runs:,} runs ({size / 2**20:.0f} MiB) in {time.perf_counter() - start:.1f} s")

        def whole():
            s = RunStore(path)
            assert len(s.all()) == args.runs
            s.close()

        def summaries():
            s = RunStore(path)
            assert len(s.summaries()) == args.runs
            s.close()

        from PySide6.QtWidgets import QApplication

        from mpsstudio.gui.results.panel import ResultsPanel

        app = QApplication.instance() or QApplication([])

        def panel():
            s = RunStore(path)
            p = ResultsPanel(s)
            p.resize(1100, 400)
            p.show()
            app.processEvents()
            assert p.model.rowCount() == args.runs
            p.close()
            p.deleteLater()
            app.processEvents()
            s.close()

        import shutil
        import sqlite3

        old = Path(tmp) / "v2.sqlite3"  # the same runs as version 2 wrote them: the first launch upgrades it
        RunStore(path).close()
        shutil.copyfile(path, old)
        with sqlite3.connect(old) as db:
            for col in ("note", "rates", "seal", "evaluation_json"):
                db.execute(f"ALTER TABLE runs DROP COLUMN {col}")
            db.execute("PRAGMA user_version=2")
        start = time.perf_counter()
        RunStore(old).close()
        t_upgrade = time.perf_counter() - start

        t_whole = timed(whole, args.reps)
        t_summ = timed(summaries, args.reps)
        t_panel = timed(panel, args.reps)
        print(f"store.all() (whole runs)        {t_whole:7.2f} s")
        print(f"store.summaries()               {t_summ:7.2f} s   ({t_whole / t_summ:.1f}x faster than whole runs)")
        print(f"results panel, shown            {t_panel:7.2f} s   (target: under 2 s)")
        print(f"upgrading a version 2 history   {t_upgrade:7.2f} s   (once: every run checked, re-derived, sealed)")


if __name__ == "__main__":
    main()
