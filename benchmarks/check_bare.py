"""The device check's timing beside a bare loop of the same products, in one run (docs/benchmarks.md, "Is the
device right today"): each of `--processes` fresh processes of `mpsstudio check`'s timing (tools/check/timing.py)
against the same shapes timed by a plain loop written here, in this process, alternated.

Usage: PYTHONPATH=. python benchmarks/check_bare.py --device cuda [--processes 10] [--rounds 5]
Prints, per shape, the check's fastest mode (median and range over its processes), the bare loop's median and
range over its rounds, and their ratio.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from mpsstudio.engine.tools.check import modes, timing


def bare(device: str, n: int) -> float:
    """ms of one n x n x n fp32 product: the median of 10 synchronized calls after 3 warm-up calls, plainly."""
    import torch

    a, b = torch.randn(n, n, device=device), torch.randn(n, n, device=device)
    sync = torch.cuda.synchronize if device.startswith("cuda") else (lambda: None)
    for _ in range(3):
        a @ b
    sync()
    times = []
    for _ in range(10):
        start = time.perf_counter()
        a @ b
        sync()
        times.append(time.perf_counter() - start)
    return 1000 * statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--processes", type=int, default=10)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    found, problems = timing.across_processes(args.device, args.processes)
    for line in problems:
        print(line)
    loops = {n: [bare(args.device, n) for _ in range(args.rounds)] for n in timing.SHAPES}
    print(f"{'shape':<22} {'check (fastest mode)':>28} {'modes':>6} {'bare loop':>26} {'ratio':>6}")
    for n in timing.SHAPES:
        key = f"{n}x{n}x{n} fp32"
        split = modes.split([f[key] for f in found if key in f])
        fast = split[0] if split else []
        loop = sorted(loops[n])
        if not fast:
            print(f"{key:<22} no timing")
            continue
        ratio = statistics.median(fast) / statistics.median(loop)
        print(f"{key:<22} {statistics.median(fast):>10.3f} ms [{fast[0]:.3f}-{fast[-1]:.3f}] {len(split):>6} "
              f"{statistics.median(loop):>9.3f} ms [{loop[0]:.3f}-{loop[-1]:.3f}] {ratio:>6.3f}")


if __name__ == "__main__":
    main()
