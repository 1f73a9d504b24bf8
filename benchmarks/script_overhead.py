"""What `mpsstudio run` costs a training script as it is: the same script (benchmarks/scripts/gpt_train.py: a small
GPT, AdamW, bf16 autocast on CUDA, a `loss.item()` every step, launch-bound) run alone (`python SCRIPT`) and under
`mpsstudio run SCRIPT`, in pairs of alternating order (A B, B A, ...), the same iterations both ways. Each side is
timed by the script's own clock (its sequences/s after its own warm-up, written to a file), so the ratio tracked /
alone is what the user's own log would show. Printed: every pair, then the median ratio with a 95 % bootstrap
interval over the pairs (the target: 0.99 or more).

    python benchmarks/script_overhead.py [--device cpu|cuda|mps] [--pairs 6] [--iters 300] [--also ROOT]
                                         [-- SCRIPT ARGS]

`--in-process`: both sides in this one process, alternated (`runpy` of the script, and the engine's own
`run_script` of it as a run process runs it: hooks, tracker, windows, the machine shown to the script): what the
measuring itself costs, without what differs between two processes (which core, the memory's layout, the GPU's
clocks as a process starts), which varies a launch-bound script by several percent from one process to the next.

`--self-time`: one tracked run in this process with a clock around each of MPS Studio's entry points in the
script's thread (the optimizer hook with the tracker's step and its windows' books, backward()'s wrapper, the model's
forward pre-hook): the time the measuring itself spends per step, beside the step's own time. Repeatable where
whole-run ratios are not (a launch-bound script varies by ~10 % between two runs of itself on the lent machines).

`--also ROOT`: a second tracked side, another checkout of MPS Studio (an older commit: `git worktree add ROOT
COMMIT`), run in the same rounds, so that a change is measured against what it replaced on the same machine.
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
RATE = "sequences_per_s"  # --clock cpu: "sequences_per_cpu_s" (the script's own thread's CPU time)


def side(tracked: bool, device: str, extra: list[str], out: Path, env: dict, root: Path = ROOT) -> float:
    """One run of the script (tracked: under `mpsstudio run` of the checkout at `root`); its own sequences/s."""
    args = ["--device", device, "--out", str(out), *extra]
    env = {**env, "PYTHONPATH": str(root)}
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
    return json.loads(out.read_text())[RATE]


def in_process(device: str, extra: list[str], out: Path, rounds: int) -> list[float]:
    """Rounds of the script alone (runpy) and tracked (run_script) in this process, alternated; tracked/alone."""
    import runpy

    sys.path.insert(0, str(ROOT))
    from mpsstudio.engine.run.script.runner import run_script, script_config

    args = ["--device", device, "--out", str(out), *extra]

    def alone() -> float:
        saved = list(sys.argv)
        sys.argv = [str(SCRIPT), *args]
        try:
            runpy.run_path(str(SCRIPT), run_name="__main__")
        finally:
            sys.argv = saved
        return json.loads(out.read_text())[RATE]

    def tracked() -> float:
        result = run_script(script_config(str(SCRIPT), args, device=device), on_event=lambda e: None,
                            should_stop=lambda: False)
        if result.status != "finished":
            sys.exit(f"the tracked run {result.status}: {result.error}")
        return json.loads(out.read_text())[RATE]

    alone(), tracked()  # the first of each compiles, caches and allocates: not counted
    ratios = []
    for i in range(rounds):
        first, second = (alone, tracked) if i % 2 == 0 else (tracked, alone)
        rates = {f.__name__: f() for f in (first, second)}
        ratios.append(rates["tracked"] / rates["alone"])
        print(f"round {i + 1} ({first.__name__} first): alone {rates['alone']:,.1f}, tracked {rates['tracked']:,.1f} "
              f"seq/s; tracked/alone {ratios[-1]:.4f}", flush=True)
    return ratios


def self_time(device: str, extra: list[str], out: Path, rounds: int) -> None:
    """Tracked runs with every entry point of MPS Studio's per-step code timed (in the script's thread)."""
    sys.path.insert(0, str(ROOT))
    from mpsstudio.engine.run.script import counter as counting
    from mpsstudio.engine.run.script.runner import run_script, script_config

    spent = {"ns": 0, "calls": 0}
    real_backward = counting.HookCounter._saw_backward

    def timed(function):
        def wrapper(*args, **kwargs):
            t0 = time.perf_counter_ns()
            try:
                return function(*args, **kwargs)
            finally:
                spent["ns"] += time.perf_counter_ns() - t0
                spent["calls"] += 1
        return wrapper
    for name in ("on_optimizer_step", "_model_call", "_saw_backward", "_pre_forward", "_post_forward"):
        setattr(counting.HookCounter, name, timed(getattr(counting.HookCounter, name)))
    from mpsstudio.engine.machine import devices
    from mpsstudio.engine.machine.energy import meter
    from mpsstudio.engine.run import windows

    parts: dict[str, int] = {}

    def part(owner, name, label):  # a part of the above (nested in the optimizer hook's step)
        function = getattr(owner, name)

        def wrapper(*args, **kwargs):
            t0 = time.perf_counter_ns()
            try:
                return function(*args, **kwargs)
            finally:
                parts[label] = parts.get(label, 0) + time.perf_counter_ns() - t0
        setattr(owner, name, wrapper)
    part(meter.Meter, "_close", "energy and busy readings")
    part(devices.Device, "memory", "memory readings")
    part(devices.Device, "synchronize", "synchronizations")
    part(windows.Windows, "fetch", "fetching the losses")
    args = ["--device", device, "--out", str(out), *extra]
    shares = []
    try:
        for i in range(rounds + 1):
            spent.update(ns=0, calls=0)
            parts.clear()
            result = run_script(script_config(str(SCRIPT), args, device=device), on_event=lambda e: None,
                                should_stop=lambda: False)
            if result.status != "finished":
                sys.exit(f"the tracked run {result.status}: {result.error}")
            steps = result.summary["measured_steps"] + result.summary["warmup_steps"]
            own = json.loads(out.read_text())
            step_s = own["seconds"] / own["iters"]
            per_step = spent["ns"] / 1e9 / steps
            if i:  # the first run compiles, caches and allocates: not counted
                shares.append(per_step / step_s)
                print(f"run {i}: {per_step * 1e6:,.1f} µs of MPS Studio's code per step ({spent['calls'] / steps:.1f} "
                      f"calls), the step {step_s * 1e3:,.2f} ms: {100 * per_step / step_s:.2f} %; of which "
                      + ", ".join(f"{k} {v / 1e3 / steps:,.1f} µs" for k, v in sorted(parts.items())), flush=True)
    finally:
        counting.HookCounter._saw_backward = real_backward
    print(f"{device}: the measuring's own time, {statistics.median(shares) * 100:.2f} % of a step (median of "
          f"{len(shares)} runs, range {min(shares) * 100:.2f}-{max(shares) * 100:.2f} %); script {SCRIPT.name} "
          f"{' '.join(extra)}")


def bootstrap(ratios: list[float], rounds: int = 5000) -> tuple[float, float]:
    rng = random.Random(0)
    medians = sorted(statistics.median(rng.choices(ratios, k=len(ratios))) for _ in range(rounds))
    return medians[int(0.025 * rounds)], medians[int(0.975 * rounds) - 1]


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--device", default="cuda")
    p.add_argument("--pairs", type=int, default=6)
    p.add_argument("--iters", type=int, default=300)
    p.add_argument("--clock", choices=("wall", "cpu"), default="wall",
                   help="the script's wall clock (default), or its own thread's CPU time (a shared CPU's noise out)")
    p.add_argument("--self-time", action="store_true", help="time MPS Studio's own code inside tracked runs")
    p.add_argument("--in-process", action="store_true", help="both sides in this process (the measuring's own cost)")
    p.add_argument("--also", type=Path, default=None, metavar="ROOT",
                   help="another checkout of MPS Studio, tracked in the same rounds (an older commit)")
    p.add_argument("extra", nargs="*", help="more arguments for the script (after --)")
    a = p.parse_args()
    global RATE
    RATE = "sequences_per_cpu_s" if a.clock == "cpu" else "sequences_per_s"
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    env.setdefault("MPSSTUDIO_DATA_DIR", tempfile.mkdtemp(prefix="script-overhead-"))
    extra = ["--iters", str(a.iters), *a.extra]
    out = Path(tempfile.mkdtemp(prefix="script-overhead-")) / "rate.json"
    if a.self_time:
        os.environ.setdefault("MPSSTUDIO_DATA_DIR", env["MPSSTUDIO_DATA_DIR"])
        self_time(a.device, extra, out, a.pairs)
        return
    if a.in_process:
        os.environ.setdefault("MPSSTUDIO_DATA_DIR", env["MPSSTUDIO_DATA_DIR"])
        values = in_process(a.device, extra, out, a.pairs)
        low, high = bootstrap(values)
        print(f"{a.device}: in one process, by the {a.clock} clock, tracked/alone {statistics.median(values):.4f} [{low:.4f}, {high:.4f}] "
              f"(median of {len(values)} rounds, 95 % bootstrap interval); script {SCRIPT.name} {' '.join(extra)}")
        return
    side(False, a.device, extra, out, env)  # warm the disk cache and the device once, not counted
    sides = {"alone": (False, ROOT), "tracked": (True, ROOT)}
    if a.also is not None:
        sides["also"] = (True, a.also.resolve())
    ratios: dict[str, list[float]] = {name: [] for name in sides if name != "alone"}
    for i in range(a.pairs):
        names = list(sides)
        order = names[i % len(names):] + names[:i % len(names)]  # each side first in turn
        if i % 2:
            order.reverse()
        rates = {name: side(*sides[name][:1], a.device, extra, out, env, sides[name][1]) for name in order}
        for name in ratios:
            ratios[name].append(rates[name] / rates["alone"])
        print(f"round {i + 1} ({' '.join(order)}): " + ", ".join(f"{n} {rates[n]:,.1f}" for n in names)
              + " seq/s; " + ", ".join(f"{n}/alone {rates[n] / rates['alone']:.4f}" for n in ratios), flush=True)
        time.sleep(0.5)
    for name, values in ratios.items():
        low, high = bootstrap(values)
        what = "tracked" if name == "tracked" else f"tracked by {a.also}"
        print(f"{a.device}: by the {a.clock} clock, {what}/alone {statistics.median(values):.4f} [{low:.4f}, {high:.4f}] (median of "
              f"{len(values)} rounds, 95 % bootstrap interval); script {SCRIPT.name} {' '.join(extra)}")


if __name__ == "__main__":
    main()
