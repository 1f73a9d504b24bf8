"""How long the commands a user types to look around take, as whole processes: `mpsstudio --version`, `models` and
`devices`, each paired with the same command at a reference revision (a git worktree of REV, default HEAD~1) in
alternating order, A B B A ..., the median of each and of the pair-by-pair ratio. The target: each under 1.5 s on
the build machine.

    python benchmarks/fast_commands.py [--against REV] [--runs 7]

`models` reads the parameter counts shipped with the package (a fresh install's first call too, timed apart with an
empty cache folder: the target is under 1.5 s); `devices` imports torch to ask it which devices there are, so it is
also paired with `python -c "import torch"` alone (the target: within 0.3 s of it).
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
COMMANDS = (["--version"], ["models"], ["devices"])


def timed(tree: Path, args: list[str], env: dict) -> float:
    started = time.perf_counter()
    subprocess.run([sys.executable, "-m", "mpsstudio", *args], cwd=tree, env={**env, "PYTHONPATH": str(tree)},
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False)
    return time.perf_counter() - started


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--against", default="HEAD~1", help="the reference revision (default: HEAD~1)")
    parser.add_argument("--runs", type=int, default=7)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        reference = Path(tmp) / "reference"
        subprocess.run(["git", "worktree", "add", "--detach", str(reference), args.against], cwd=ROOT, check=True,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        env = {**os.environ, "MPSSTUDIO_CACHE_DIR": str(Path(tmp) / "cache"), "MPSSTUDIO_DATA_DIR": str(Path(tmp) / "data"),
               "MPSSTUDIO_CONFIG_DIR": str(Path(tmp) / "config"), "MPSSTUDIO_LOG_DIR": str(Path(tmp) / "log")}
        try:
            print(f"python {sys.version.split()[0]}, {os.cpu_count()} cores; this tree vs {args.against}; "
                  f"{args.runs} pairs a command, alternating")
            fresh = []
            for i in range(args.runs):  # a fresh install's first `models`: no cache folder yet
                env_fresh = {**env, "MPSSTUDIO_CACHE_DIR": str(Path(tmp) / f"fresh-{i}")}
                fresh.append(timed(ROOT, ["models"], env_fresh))
            print(f"mpsstudio models, first call of a fresh install: {statistics.median(fresh):.2f} s "
                  f"(min {min(fresh):.2f}, max {max(fresh):.2f})")
            torch_only, devices = [], []
            for i in range(args.runs):
                for which in ((0, 1) if i % 2 == 0 else (1, 0)):
                    if which == 0:
                        started = time.perf_counter()
                        subprocess.run([sys.executable, "-c", "import torch"], env=env, check=False)
                        torch_only.append(time.perf_counter() - started)
                    else:
                        devices.append(timed(ROOT, ["devices"], env))
            gap = statistics.median(d - t for d, t in zip(devices, torch_only))
            print(f"mpsstudio devices {statistics.median(devices):.2f} s against `import torch` "
                  f"{statistics.median(torch_only):.2f} s: {gap:+.2f} s (median of the pairs' differences)")
            for command in COMMANDS:
                for tree in (ROOT, reference):
                    timed(tree, command, env)  # warm: the file cache, and models' parameter counts
                now, before = [], []
                for i in range(args.runs):
                    order = (ROOT, reference) if i % 2 == 0 else (reference, ROOT)
                    got = {tree: timed(tree, command, env) for tree in order}
                    now.append(got[ROOT])
                    before.append(got[reference])
                ratio = statistics.median(a / b for a, b in zip(now, before))
                print(f"mpsstudio {' '.join(command):10s} now {statistics.median(now):.2f} s (min {min(now):.2f}), "
                      f"{args.against} {statistics.median(before):.2f} s (min {min(before):.2f}); now / before "
                      f"{ratio:.2f}")
        finally:
            subprocess.run(["git", "worktree", "remove", "--force", str(reference)], cwd=ROOT, check=False,
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return 0


if __name__ == "__main__":
    sys.exit(main())
