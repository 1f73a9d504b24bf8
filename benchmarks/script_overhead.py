"""What `mpsstudio run` costs a training script as it is: the same script (benchmarks/scripts/gpt_train.py: a small
GPT, AdamW, bf16 autocast on CUDA, a `loss.item()` every step, launch-bound) run alone (`python SCRIPT`) and under
`mpsstudio run SCRIPT`, in pairs of alternating order (A B, B A, ...), the same iterations both ways. Each side is
timed by the script's own clock (its sequences/s after its own warm-up, written to a file), so the ratio tracked /
alone is what the user's own log would show. Printed: every pair, then the median ratio with a 95 % bootstrap
interval over the pairs (the target: 0.99 or more).

    python benchmarks/script_overhead.py [--device cpu|cuda|mps] [--pairs 6] [--iters 300] [-- SCRIPT ARGS]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "benchmarks" / "scripts" / "gpt_train.py"


def side(tracked: bool, device: str, extra: list[str], out: Path, env: dict) -> float:
    """One run of the script; its own sequences/s."""
    args = ["--device", device, "--out", str(out), *extra]
    if tracked:
        command = [sys.executable, "-m", "mpsstudio", "run", str(SCRIPT), "--devices", device, "--no-save", "--",
                   *args]
    else:
        command = [sys.executable, str(SCRIPT), *args]
    if out.exists():
        out.unlink()
    done = subprocess.run(command, capture_output=True, text=True, env=env, cwd=ROOT, timeout=1800)
    if not out.exists():
        sys.exit(f"{'tracked' if tracked else 'alone'} run wrote no rate (exit {done.returncode}):\n"
                 f"{done.stdout[-2000:]}\n{done.stderr[-3000:]}")
    return json.loads(out.read_text())["sequences_per_s"]


def bootstrap(ratios: list[float], rounds: int = 5000) -> tuple[float, float]:
    rng = random.Random(0)
    medians = sorted(statistics.median(rng.choices(ratios, k=len(ratios))) for _ in range(rounds))
    return medians[int(0.025 * rounds)], medians[int(0.975 * rounds) - 1]


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--device", default="cuda")
    p.add_argument("--pairs", type=int, default=6)
    p.add_argument("--iters", type=int, default=300)
    p.add_argument("extra", nargs="*", help="more arguments for the script (after --)")
    a = p.parse_args()
    env = {**os.environ, "PYTHONPATH": str(ROOT), "PYTHONUNBUFFERED": "1"}
    env.setdefault("MPSSTUDIO_DATA_DIR", tempfile.mkdtemp(prefix="script-overhead-"))
    extra = ["--iters", str(a.iters), *a.extra]
    out = Path(tempfile.mkdtemp(prefix="script-overhead-")) / "rate.json"
    side(False, a.device, extra, out, env)  # warm the disk cache and the device once, not counted
    ratios = []
    for i in range(a.pairs):
        order = (False, True) if i % 2 == 0 else (True, False)
        rates = {}
        for tracked in order:
            rates[tracked] = side(tracked, a.device, extra, out, env)
        ratio = rates[True] / rates[False]
        ratios.append(ratio)
        print(f"pair {i + 1}: alone {rates[False]:,.1f} seq/s, tracked {rates[True]:,.1f} seq/s, "
              f"tracked/alone {ratio:.4f}", flush=True)
        time.sleep(0.5)
    low, high = bootstrap(ratios)
    print(f"{a.device}: tracked/alone {statistics.median(ratios):.4f} [{low:.4f}, {high:.4f}] (median of "
          f"{len(ratios)} pairs, 95 % bootstrap interval); script {SCRIPT.name} {' '.join(extra)}")


if __name__ == "__main__":
    main()
