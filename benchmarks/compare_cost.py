"""What a speedup's bootstrap interval costs (engine/analysis/compare.py), by the number of measurement windows per run.

Usage: python benchmarks/compare_cost.py [--reps 5]
Prints the median time of one uncached bootstrap_ratio per window count (the table computes each comparison's
interval once, then reads it from a cache).
"""

from __future__ import annotations

import argparse
import random
import statistics
import time

from mpsstudio.engine.analysis import compare


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--reps", type=int, default=5)
    args = parser.parse_args()
    compare.bootstrap_ratio([1.0, 2.0], [1.0, 2.0], seed=-1)  # numpy's import is not the bootstrap's cost
    rng = random.Random(0)
    print("windows  ms per interval (median)")
    for n in (10, 30, 100, 1000, 6000):
        times = []
        for rep in range(args.reps):
            a = [rng.gauss(1000, 50) for _ in range(n)]
            b = [rng.gauss(300, 20) for _ in range(n)]
            start = time.perf_counter()
            compare.bootstrap_ratio(a, b, seed=rep * 100_000 + n)
            times.append(time.perf_counter() - start)
        print(f"{n:7d}  {1000 * statistics.median(times):.1f}")


if __name__ == "__main__":
    main()
