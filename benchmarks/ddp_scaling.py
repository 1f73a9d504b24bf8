"""The engine on several GPUs against a bare DDP loop, side by side in one call (issue "Past one machine").

For each round and each GPU count N (the order alternating between rounds), the engine's run
(`mpsstudio bench --gpus N ...`, its own process, launched by torchrun as a user's is) and the bare loop
(benchmarks/bare_ddp.py under torchrun) run one after the other. Each pair gives engine/bare (the engine's median
window throughput over the bare loop's median span throughput); per N: the median of the pairs and their range.
Then the engine's scaling of its newest runs (analysis/scaling.py): speedup, efficiency with its interval, and the
all-reduce's share of a step.

    python benchmarks/ddp_scaling.py [--gpus 1,2] [--rounds 3] [--model resnet50] [--batch-size 128]
        [--precision bf16] [--channels-last] [--steps 150] [--out DIR]

Last line: min_ratio=<x> (target >= 0.97: within 3 %).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def engine(n: int, args, out: Path, i: int) -> float | None:
    target = out / f"engine-{n}-{i}.json"
    cmd = [sys.executable, "-m", "mpsstudio", "bench", "--model", args.model, "--dataset", "synthetic",
           "--devices", "cuda", "--gpus", str(n), "--batch-size", str(args.batch_size), "--precision", args.precision,
           "--steps", str(args.steps), "--warmup", "20", "--no-inspect", "--no-save", "--json", str(target),
           *(["--channels-last"] if args.channels_last else [])]
    done = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True)
    if done.returncode != 0 or not target.exists():
        print(f"engine {n} GPUs failed ({done.returncode}): {done.stderr[-800:]}", flush=True)
        return None
    run = json.loads(target.read_text())["runs"][0]
    return float(run["summary"]["samples_per_s"])


def bare(n: int, args) -> float | None:
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc-per-node={n}",
           str(ROOT / "benchmarks" / "bare_ddp.py"), "--model", args.model, "--batch-size", str(args.batch_size),
           "--precision", args.precision, "--steps", str(args.steps), "--warmup", "20",
           *(["--channels-last"] if args.channels_last else [])]
    done = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True)
    lines = [line for line in done.stdout.splitlines() if line.startswith("{")]
    if done.returncode != 0 or not lines:
        print(f"bare {n} GPUs failed ({done.returncode}): {done.stderr[-800:]}", flush=True)
        return None
    return float(json.loads(lines[-1])["samples_per_s"])


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--gpus", default="1,2")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--model", default="resnet50")
    ap.add_argument("--batch-size", type=int, default=128)
    ap.add_argument("--precision", default="bf16")
    ap.add_argument("--channels-last", action="store_true")
    ap.add_argument("--steps", type=int, default=150)
    ap.add_argument("--out", default=None)
    args = ap.parse_args()
    counts = [int(v) for v in args.gpus.split(",")]
    out = Path(args.out or tempfile.mkdtemp(prefix="ddp-scaling-"))
    out.mkdir(parents=True, exist_ok=True)
    pairs: dict[int, list[tuple[float, float]]] = {n: [] for n in counts}
    for i in range(args.rounds):
        for n in (counts if i % 2 == 0 else counts[::-1]):
            first, second = (engine, bare) if i % 2 == 0 else (bare, engine)
            a = first(n, args, out, i) if first is engine else first(n, args)
            b = second(n, args, out, i) if second is engine else second(n, args)
            e, r = (a, b) if first is engine else (b, a)
            print(f"round {i + 1}, {n} GPU(s): engine {e or 0:,.0f} samples/s, bare DDP {r or 0:,.0f}"
                  + (f", ratio {e / r:.3f}" if e and r else ""), flush=True)
            if e and r:
                pairs[n].append((e, r))
    ratios = {}
    for n, got in pairs.items():
        if not got:
            continue
        values = sorted(e / r for e, r in got)
        ratios[n] = statistics.median(values)
        print(f"{n} GPU(s): engine {statistics.median(e for e, _ in got):,.0f} samples/s, bare "
              f"{statistics.median(r for _, r in got):,.0f}; engine/bare median {ratios[n]:.3f} "
              f"[range {values[0]:.3f}-{values[-1]:.3f}, {len(values)} pairs]", flush=True)
    if len(counts) == 2 and all(pairs[n] for n in counts):
        # Scaling from each side's own runs (N GPUs over 1, medians over rounds): what issue 48 compares.
        lo, hi = counts
        e_scale = statistics.median(e for e, _ in pairs[hi]) / statistics.median(e for e, _ in pairs[lo])
        b_scale = statistics.median(r for _, r in pairs[hi]) / statistics.median(r for _, r in pairs[lo])
        print(f"scaling {hi} over {lo} GPU(s): engine {e_scale:.3f}x ({e_scale / hi * lo:.0%} efficiency), bare DDP "
              f"{b_scale:.3f}x ({b_scale / hi * lo:.0%}); engine/bare {e_scale / b_scale:.3f}", flush=True)
    from mpsstudio.engine.analysis.scaling import scalings
    from mpsstudio.engine.history.runfiles import import_json

    runs = [r for path in sorted(out.glob("engine-*.json")) for r in import_json(path)]
    for found in scalings(runs):
        headers, rows = found.table()
        print(" | ".join(headers))
        for row in rows:
            print(" | ".join(row))
        print(found.verdict())
    print(f"min_ratio={min(ratios.values()) if ratios else 0:.3f} (target >= 0.97)")
    return 0


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    sys.exit(main())
