"""What mpsstudio.track costs a training loop: the same loop with and without `mt.step(loss, batch_size=n)` after
each optimizer step, side by side in one process, in pairs of alternating order (A B, B A, ...).

Each side trains the same model (same seed) on the same 4 ready batches for `--steps` steps; its time is the
wall clock around them with the device synchronized at both ends. A pair's ratio is tracked time over bare time; the
result is the median ratio with a 95 % bootstrap interval over the pairs (the cost is `ratio - 1`; the target is
under 1 %). The tracker reports to a run that is not kept (nothing is written to the history).

    python benchmarks/track_overhead.py [--device cpu|cuda|mps] [--models mlp,mnist_cnn] [--steps 400] [--pairs 12]
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import torch
import torch.nn.functional as F

import mpsstudio.track as mt
from mpsstudio.engine.basics.config import RunConfig
from mpsstudio.engine.machine import devices
from mpsstudio.engine.models import registry as models
from mpsstudio.engine.run.script import tracker as tracked
from mpsstudio.engine.run.setup import synthetic_input


def loop(model_name: str, tdev: torch.device, sync, batch_size: int, steps: int, track: bool) -> float:
    """Seconds for `steps` training steps (after 20 untimed), with or without mt.step after each."""
    cfg = RunConfig(model=model_name, dataset="synthetic", device=str(tdev), batch_size=batch_size)
    spec = models.input_spec_for(model_name, synthetic_input(cfg))
    torch.manual_seed(0)
    model = models.build_model(model_name, spec).to(tdev)
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    batches = [(torch.randn((batch_size, *spec.sample_shape), device=tdev),
                torch.randint(0, spec.num_classes, (batch_size,), device=tdev)) for _ in range(4)]
    if track:
        tracker = tracked.Tracker(RunConfig(model="bench.py", dataset="script", device=str(tdev), steps=None,
                                            epochs=None, warmup_steps=10), lambda event: None)
        tracked.bind(tracker)

    def step(i):
        x, y = batches[i % 4]
        opt.zero_grad(set_to_none=True)
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        if track:
            mt.step(loss, batch_size=batch_size)
    try:
        for i in range(20):
            step(i)
        sync()
        started = time.perf_counter()
        for i in range(steps):
            step(i)
        sync()
        return time.perf_counter() - started
    finally:
        if track:
            tracker.finish()
            tracked.unbind()


def bootstrap(values: list[float], n: int = 2000, seed: int = 0) -> tuple[float, float]:
    rng = random.Random(seed)
    medians = sorted(statistics.median(rng.choices(values, k=len(values))) for _ in range(n))
    return medians[int(0.025 * n)], medians[int(0.975 * n) - 1]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--models", default="mlp,mnist_cnn")
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--steps", type=int, default=400)
    parser.add_argument("--pairs", type=int, default=12)
    args = parser.parse_args()
    dev = devices.resolve_device(args.device)
    tdev = torch.device(dev.torch_device or dev.id)
    torch.set_flush_denormal(True)
    print(f"device {dev.id} ({dev.name}), torch {torch.__version__}, batch {args.batch_size}, {args.steps} steps a "
          f"side, {args.pairs} pairs")
    worst = 0.0
    for name in args.models.split(","):
        ratios = []
        for p in range(args.pairs):
            order = (False, True) if p % 2 == 0 else (True, False)
            times = {track: loop(name, tdev, dev.synchronize, args.batch_size, args.steps, track) for track in order}
            ratios.append(times[True] / times[False])
        med = statistics.median(ratios)
        low, high = bootstrap(ratios)
        worst = max(worst, med)
        per_step = statistics.median([r - 1 for r in ratios])
        print(f"{name}: tracked / bare time {med:.4f} [{low:.4f}, {high:.4f}] (95 % bootstrap over {len(ratios)} "
              f"pairs); cost {100 * per_step:+.2f} % of a step")
    print(f"max_ratio={worst:.4f} (target <= 1.01)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
