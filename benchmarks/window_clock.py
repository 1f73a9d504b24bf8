"""CUDA windows timed by events in the stream against the synchronized wall clock, side by side (issue "Past one
machine", item 6): are the figures unchanged, and what does the drain at each window cost?

Alternating pairs of the same engine run (trainer.run in this process): one with the default clock (CUDA events,
no drain at a window's end), one with MPSSTUDIO_WINDOW_CLOCK=sync (synchronize, then read the wall clock, as
before). Per pair: the median window throughput of each (events / sync: the figures) and the wall-clock
throughput of the measured phase (events / sync: what the drain cost).

    python benchmarks/window_clock.py [--model resnet18] [--batch-size 64] [--steps 300] [--pairs 6]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from mpsstudio.engine.basics.config import RunConfig
from mpsstudio.engine.machine import devices
from mpsstudio.engine.run import trainer
from mpsstudio.engine.run.setup import load_data
from mpsstudio.engine.run.windows import WINDOW_CLOCK_VAR


def one(cfg, dev, data, clock: str) -> tuple[float, float]:
    os.environ[WINDOW_CLOCK_VAR] = clock
    try:
        result = trainer.run(cfg, device=dev, data=data)
    finally:
        os.environ.pop(WINDOW_CLOCK_VAR, None)
    if result.status != "finished":
        raise SystemExit(f"run failed: {result.error}")
    return result.summary["samples_per_s"], result.summary["wall_samples_per_s"]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="resnet18")
    ap.add_argument("--batch-size", type=int, default=64)
    ap.add_argument("--steps", type=int, default=300)
    ap.add_argument("--pairs", type=int, default=6)
    args = ap.parse_args()
    dev = devices.resolve_device("cuda")
    cfg = RunConfig(model=args.model, dataset="synthetic", device=dev.id, batch_size=args.batch_size,
                    steps=args.steps, epochs=None, warmup_steps=20)
    data = load_data(cfg)
    medians, walls = [], []
    for i in range(args.pairs):
        order = ("events", "sync") if i % 2 == 0 else ("sync", "events")
        got = {clock: one(cfg, dev, data, clock) for clock in order}
        medians.append(got["events"][0] / got["sync"][0])
        walls.append(got["events"][1] / got["sync"][1])
        print(f"pair {i + 1}: events {got['events'][0]:,.0f} samples/s (wall {got['events'][1]:,.0f}), "
              f"sync {got['sync'][0]:,.0f} (wall {got['sync'][1]:,.0f})", flush=True)
    print(f"{args.model} batch {args.batch_size} on {dev.name}: window medians events/sync "
          f"{statistics.median(medians):.4f} [range {min(medians):.4f}-{max(medians):.4f}]; wall throughput "
          f"events/sync {statistics.median(walls):.4f} [range {min(walls):.4f}-{max(walls):.4f}], {args.pairs} pairs")
    return 0


if __name__ == "__main__":
    sys.exit(main())
