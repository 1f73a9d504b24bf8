"""The engine's GPU energy against an independent reading: nvidia-smi's power.draw sampled every 100 ms by a separate
process, integrated over the same interval as the engine's measurement windows (docs/benchmarks.md, "Energy").

    python benchmarks/energy_check.py [--model resnet50] [--batch-size 128] [--precision bf16] [--steps 400]

Runs one steady training run in this process (the engine's own run loop, cuda:0), with nvidia-smi started before
it. The interval is the measured phase: from the first window's start (its end event minus its seconds) to the last
window's end event. Prints both energies and average powers, their difference, and what one span's meter reads cost.
Last line: diff_percent=<x> (target: within +-5).
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time
from datetime import datetime
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from mpsstudio.engine.machine.energy import meter as energy
from mpsstudio.engine.run import trainer
from mpsstudio.engine.basics.config import RunConfig
from mpsstudio.engine.basics.events import Window


def smi_samples(path: Path) -> list[tuple[float, float]]:
    """(unix time, watts) from `nvidia-smi --query-gpu=timestamp,power.draw --format=csv,noheader,nounits`."""
    out = []
    for line in path.read_text().splitlines():
        stamp, _, watts = line.partition(",")
        try:
            t = datetime.strptime(stamp.strip(), "%Y/%m/%d %H:%M:%S.%f").timestamp()
            out.append((t, float(watts)))
        except ValueError:
            continue
    return out


def integrate(samples: list[tuple[float, float]], t0: float, t1: float) -> float:
    """Joules between t0 and t1: trapezoids between samples, the power held flat past the first and last one."""
    inside = [(t, w) for t, w in samples if t0 <= t <= t1]
    before = [s for s in samples if s[0] < t0][-1:]
    after = [s for s in samples if s[0] > t1][:1]
    points = before + inside + after
    if len(points) < 2:
        raise SystemExit("too few nvidia-smi samples in the interval")

    def at(t):  # linear interpolation
        for (ta, wa), (tb, wb) in zip(points, points[1:]):
            if ta <= t <= tb:
                return wa + (wb - wa) * (t - ta) / (tb - ta) if tb > ta else wa
        return points[0][1] if t < points[0][0] else points[-1][1]

    xs = [t0] + [t for t, _ in inside] + [t1]
    return sum((xb - xa) * (at(xa) + at(xb)) / 2 for xa, xb in zip(xs, xs[1:]))


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default="resnet50")
    ap.add_argument("--batch-size", type=int, default=128)
    ap.add_argument("--precision", default="bf16")
    ap.add_argument("--steps", type=int, default=400)
    ap.add_argument("--out", default="/tmp/energy_check")
    args = ap.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)

    meter = energy.meter_for("cuda", 0, None)
    print("meter:", meter.describe())
    t = time.perf_counter()
    for _ in range(200):
        meter.begin()
        meter.end(close=True)
    print(f"one energy span's meter reads (begin + end, busy share included): "
          f"{(time.perf_counter() - t) / 200 * 1e3:.3f} ms")
    meter.close()

    smi_path = out / "smi.csv"
    with open(smi_path, "w") as f:
        smi = subprocess.Popen(["nvidia-smi", "-i", "0", "--query-gpu=timestamp,power.draw",
                                "--format=csv,noheader,nounits", "-lms", "100"], stdout=f)
    time.sleep(1.0)
    ends: list[tuple[float, float]] = []  # (unix time at the window's end event, its seconds)

    def on_event(event):
        if isinstance(event, Window):
            ends.append((time.time(), event.seconds))

    cfg = RunConfig(model=args.model, dataset="synthetic", device="cuda:0", batch_size=args.batch_size,
                    precision=args.precision, steps=args.steps, warmup_steps=20)
    result = trainer.run(cfg, on_event=on_event)
    time.sleep(0.5)
    smi.terminate()
    smi.wait()
    s = result.summary
    print(f"run: {result.status} {result.error}; {s['samples_per_s']:.0f} samples/s, windows {s['windows']}, "
          f"busy {s['utilization']}")
    t0, t1 = ends[0][0] - ends[0][1], ends[-1][0]
    samples = smi_samples(smi_path)
    smi_j = integrate(samples, t0, t1)
    span = t1 - t0
    spans = [w for w in result.windows if w.get("energy_windows")]
    spans_s = sum(w["energy_s"] for w in spans)
    print(f"interval: {span:.2f} s from the first window's start to the last one's end; the engine's "
          f"{len(spans)} energy spans cover {spans_s:.2f} s of it ({100 * spans_s / span:.1f} %), its windows "
          f"{s['measured_s']:.2f} s; nvidia-smi samples inside: {sum(1 for t, _ in samples if t0 <= t <= t1)}")
    engine_w, smi_w = s["avg_power_w"], smi_j / span
    print(f"engine (NVML total-energy counter, summed over its spans): {s['energy_j']:.1f} J, {engine_w:.1f} W, "
          f"{s['j_per_sample']:.4f} J/sample")
    print(f"nvidia-smi power.draw every 100 ms, integrated over the interval: {smi_j:.1f} J, {smi_w:.1f} W")
    diff = 100 * (engine_w - smi_w) / smi_w
    print(f"diff_percent={diff:+.2f}")
    return 0 if abs(diff) <= 5 else 1


if __name__ == "__main__":
    sys.exit(main())
