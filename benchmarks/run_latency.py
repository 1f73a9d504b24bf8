"""Run to first step: how long after Run the first training step starts, with a spare run process and without.

Each run executes in a process of its own (mpsstudio/engine/process/). Without a spare, Run waits for a
fresh process to import torch and the engine; with one (started earlier for the chosen device, as the window
does once it is idle: torch imported, the device's context created), only the data and the model are left to
set up. Repetitions alternate the two; medians are printed with the ratio. "First step" is the Started event,
which the run loop sends right before its first step. Also printed: from the last window to the run handed on
(its Ended event, sent once the run's process has ended: what the window waits for before the row appears).

    python benchmarks/run_latency.py [--reps 5] [--model mlp] [--dataset synthetic] [--device cpu]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from mpsstudio.engine import process
from mpsstudio.engine.basics.config import RunConfig
from mpsstudio.engine.basics.events import Ended, Started, Window


ENDINGS: list[float] = []  # seconds from each run's last window to its Ended event


class Marks:
    """Seconds from `start()` to the first Started event (the first step) and to the first measurement window."""

    def __init__(self):
        self.t0, self.seen = 0.0, {}

    def start(self) -> None:
        self.t0 = time.perf_counter()

    def on_event(self, event) -> None:
        if isinstance(event, Started):
            self.seen.setdefault("started", time.perf_counter() - self.t0)
        elif isinstance(event, Window):
            self.seen.setdefault("window", time.perf_counter() - self.t0)
            self.seen["last_window"] = time.perf_counter()
        elif isinstance(event, Ended) and "last_window" in self.seen:
            ENDINGS.append(time.perf_counter() - self.seen["last_window"])

    def times(self) -> tuple[float, float]:
        return self.seen["started"], self.seen["window"]


def one(cfg: RunConfig, spare: process.Spare | None) -> tuple[float, float]:
    """Seconds from Run to the Started event and to the first measurement window."""
    marks = Marks()
    marks.start()
    [result] = process.run_isolated([cfg], on_event=marks.on_event, spare=spare)
    if result.status != "finished":
        raise SystemExit(f"run failed: {result.error}")
    return marks.times()


def arguments(doc: str) -> tuple[argparse.Namespace, RunConfig]:
    """The command line both latency benchmarks take, and the config of the run they time."""
    ap = argparse.ArgumentParser(description=doc.splitlines()[0])
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--model", default="mlp")
    ap.add_argument("--dataset", default="synthetic")
    ap.add_argument("--device", default="cpu")
    args = ap.parse_args()
    return args, RunConfig(model=args.model, dataset=args.dataset, device=args.device, batch_size=64, steps=20,
                           epochs=None, warmup_steps=1)


def report(what: str, reps: int, fresh: list, warm: list, drawn: str = "") -> None:
    """Medians of (first step, first window) without the spare and with it, and what the spare saves."""
    f_start, f_win = (statistics.median(v) for v in zip(*fresh))
    w_start, w_win = (statistics.median(v) for v in zip(*warm))
    print(f"{what}, {reps} alternating repetitions, medians:")
    print(f"  fresh process: Run -> first step{drawn} {f_start:.2f} s, -> first window{drawn} {f_win:.2f} s")
    print(f"  spare process: Run -> first step{drawn} {w_start:.2f} s, -> first window{drawn} {w_win:.2f} s")
    print(f"  the spare saves {f_start - w_start:.2f} s ({w_start / f_start:.2f} of the fresh latency)")


def main() -> int:
    args, cfg = arguments(__doc__)
    spare = process.Spare(cfg.mps_fallback, cfg.device)  # as the window makes it: for the device Run starts on
    fresh, warm = [], []
    try:
        for rep in range(args.reps):
            for use_spare in ((True, False) if rep % 2 == 0 else (False, True)):
                if use_spare:
                    spare.fill()
                    if not spare.wait_ready(120):
                        raise SystemExit("the spare process did not get ready within 120 s")
                    warm.append(one(cfg, spare))
                else:
                    fresh.append(one(cfg, None))
    finally:
        spare.close()
    report(f"{args.model} on {args.dataset} ({args.device})", args.reps, fresh, warm)
    print(f"  last window -> run handed on (its process ended): {statistics.median(ENDINGS):.3f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
