"""Does the engine's reported throughput match CUDA's own clock? (target: within 2 %)

CUDA events are recorded from the engine's event callbacks: one when warm-up ends and one at the end of
every measurement window (the device is idle at those points, the engine having just synchronized).
Each window's event-timed length gives an independent samples/s; we compare medians and totals.

    python benchmarks/cuda_events.py [--model resnet18] [--batch-size 128] [--steps 300]
"""

from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import torch

from mpsstudio.engine.machine import devices
from mpsstudio.engine.run import trainer
from mpsstudio.engine.basics.config import RunConfig
from mpsstudio.engine.basics.events import Warmup, Window


def measure(model: str, batch_size: int, steps: int, precision: str, channels_last: bool) -> dict:
    dev = devices.resolve_device("cuda")
    marks: list[torch.cuda.Event] = []
    windows: list[Window] = []

    def on_event(event):
        if isinstance(event, (Warmup, Window)):
            e = torch.cuda.Event(enable_timing=True)
            e.record()
            marks.append(e)
            if isinstance(event, Window):
                windows.append(event)

    cfg = RunConfig(model=model, dataset="synthetic", device=dev.id, batch_size=batch_size, steps=steps,
                    epochs=None, warmup_steps=20, precision=precision, channels_last=channels_last)
    result = trainer.run(cfg, device=dev, on_event=on_event)
    if result.status != "finished":
        raise SystemExit(f"run failed: {result.error}")
    torch.cuda.synchronize()
    event_s = [a.elapsed_time(b) / 1000 for a, b in zip(marks, marks[1:])]
    event_rates = [w.samples / s for w, s in zip(windows, event_s)]
    engine_median = result.summary["samples_per_s"]
    event_median = statistics.median(event_rates)
    total_engine = sum(w.seconds for w in windows)
    total_event = sum(event_s)
    return {"model": model, "batch": batch_size, "precision": precision, "windows": len(windows),
            "engine_median": engine_median, "event_median": event_median,
            "median_ratio": engine_median / event_median,
            "total_engine_s": total_engine, "total_event_s": total_event, "total_ratio": total_event / total_engine}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="resnet18")
    ap.add_argument("--batch-size", type=int, default=128)
    ap.add_argument("--steps", type=int, default=300)
    ap.add_argument("--precision", default="fp32")
    ap.add_argument("--channels-last", action="store_true")
    args = ap.parse_args()
    r = measure(args.model, args.batch_size, args.steps, args.precision, args.channels_last)
    print(f"{r['model']} batch {r['batch']} {r['precision']}: {r['windows']} windows; "
          f"engine median {r['engine_median']:,.0f} samples/s, CUDA-event median {r['event_median']:,.0f} "
          f"(ratio {r['median_ratio']:.4f}); measured time engine {r['total_engine_s']:.3f} s vs events "
          f"{r['total_event_s']:.3f} s (ratio {r['total_ratio']:.4f})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
