"""Engine overhead: the engine's run loop vs a bare PyTorch loop, side by side on one device, with an interval.

Both train the same model (same seed) on the same batches kept on the device, with SGD (momentum 0.9),
after the same warm-up. The bare loop is the seed loop: forward, loss, backward, step, no per-step .item().
Pairs alternate the order (engine first, then bare first). Each pair gives one ratio (the engine's *wall-clock*
throughput over its measured phase, every window, sync, loss fetch and event included, over the bare run beside
it); the result is the median of the paired ratios with a 95 % bootstrap interval (resampling the pairs). Pairs are
added until the interval is within +-3 % of the median (--precision) or --max-pairs is reached, in which case the
line says the interval is wider than asked. With --isolated the engine runs in its own process, as the front ends
run it: a spare process made ready before each pair, so no process starts while either side is timed.

    python benchmarks/overhead.py [--device cpu|cuda|mps] [--models mlp,mnist_cnn] [--seconds 2] [--isolated]
        [--min-pairs 6] [--max-pairs 30] [--precision 0.03]

Last line: min_ratio=<x> (target >= 0.98), with the interval of that model.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import numpy as np
import torch
import torch.nn.functional as F

from mpsstudio.engine import process
from mpsstudio.engine.machine import devices
from mpsstudio.engine.models import registry as models
from mpsstudio.engine.run import trainer
from mpsstudio.engine.run.setup import load_data
from mpsstudio.engine.basics.config import RunConfig

MODELS = ("mlp", "mnist_cnn", "resnet18")


def bare_loop(model_name: str, dev: devices.Device, data, batch_size: int, warmup: int, steps: int,
              seed: int = 0) -> float:
    """samples/s of the plain loop, timed with a sync before each clock read.

    TF32 is off and CPU denormals are flushed, as in the engine's runs (PyTorch's own defaults leave TF32
    on for cuDNN convolutions and keep denormals), so both sides do the same arithmetic.
    """
    saved = torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = False
    torch.set_flush_denormal(True)
    try:
        return _bare_loop(model_name, dev, data, batch_size, warmup, steps, seed)
    finally:
        torch.set_flush_denormal(False)
        torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32 = saved


def _bare_loop(model_name, dev, data, batch_size, warmup, steps, seed) -> float:
    tdev = torch.device(dev.torch_device or dev.id)
    torch.manual_seed(seed)
    model = models.build_model(model_name, models.input_spec_for(model_name, data.spec)).to(tdev)
    model.train()
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    mean = torch.tensor(data.mean).reshape(1, -1, 1, 1).to(tdev)
    std = torch.tensor(data.std).reshape(1, -1, 1, 1).to(tdev)
    x_all, y_all = data.train.x, data.train.y
    batches = []
    for i in range(4):  # the same 4 ready batches the engine cycles through for synthetic data
        idx = torch.arange(i * batch_size, (i + 1) * batch_size) % x_all.shape[0]
        x = (x_all[idx].to(tdev).float() / 255 - mean) / std
        batches.append((x, y_all[idx].to(tdev)))

    def step(i):
        x, y = batches[i % 4]
        opt.zero_grad(set_to_none=True)
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        opt.step()

    for i in range(warmup):
        step(i)
    dev.synchronize()
    t0 = time.perf_counter()
    for i in range(steps):
        step(warmup + i)
    dev.synchronize()
    return steps * batch_size / (time.perf_counter() - t0)


def engine_run(model_name: str, dev: devices.Device, data, batch_size: int, warmup: int, steps: int,
               spare: process.Spare | None = None):
    """The engine's run: in this process (trainer.run), or as the front ends run it, in a process of its own
    (process.run_isolated with a spare made ready beforehand; the child loads the same synthetic data itself).
    Process start-up is not in the measured phase either way: throughput counts from the end of the warm-up."""
    cfg = RunConfig(model=model_name, dataset="synthetic", device=dev.id, batch_size=batch_size, steps=steps,
                    epochs=None, warmup_steps=warmup)
    if spare is not None:
        [result] = process.run_isolated([cfg], spare=spare)
    else:
        result = trainer.run(cfg, device=dev, data=data)
    if result.status != "finished":
        raise SystemExit(f"engine run failed: {result.error}")
    return result.summary["wall_samples_per_s"], result.summary["samples_per_s"]


def median_interval(ratios: list[float], resamples: int = 4000, seed: int = 0) -> tuple[float, float, float]:
    """The median of the paired ratios and its 95 % bootstrap interval (percentiles of resampled medians)."""
    values = np.asarray(ratios, dtype=float)
    rng = np.random.default_rng(seed)
    medians = np.median(rng.choice(values, size=(resamples, len(values)), replace=True), axis=1)
    return float(np.median(values)), float(np.percentile(medians, 2.5)), float(np.percentile(medians, 97.5))


def calibrate(model_name, dev, data, batch_size, seconds) -> int:
    """Steps that take about `seconds` on this device (from a short bare run)."""
    rate = bare_loop(model_name, dev, data, batch_size, warmup=3, steps=5)
    return int(min(20000, max(10, seconds * rate / batch_size)))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--models", default=",".join(MODELS))
    ap.add_argument("--batch-size", type=int, default=64)
    ap.add_argument("--warmup", type=int, default=10)
    ap.add_argument("--seconds", type=float, default=2.0, help="target length of one measured phase")
    ap.add_argument("--min-pairs", type=int, default=6)
    ap.add_argument("--max-pairs", type=int, default=30)
    ap.add_argument("--precision", type=float, default=0.03, help="stop when the interval is within +- this")
    ap.add_argument("--isolated", action="store_true",
                    help="run the engine in its own process, as the CLI and the window do (engine/process/)")
    args = ap.parse_args()
    dev = devices.resolve_device(args.device)
    print(f"device {dev.id} ({dev.name}); torch {torch.__version__}; threads {torch.get_num_threads()}; "
          f"batch {args.batch_size}; pairs alternating until the 95 % interval is within +-{args.precision:.0%} "
          f"({args.min_pairs}-{args.max_pairs}); engine "
          f"{'in its own process (--isolated)' if args.isolated else 'in this process'}")
    print(f"{'model':<10} {'steps':>6} {'pairs':>5} {'bare samples/s':>15} {'engine wall':>12} {'engine median':>14} "
          f"{'wall/bare [95 % interval]':>27} {'median/bare':>12}")
    worst = None
    spare = process.Spare(True, dev.id) if args.isolated else None
    try:
        for name in args.models.split(","):
            # the data a run loads for itself (run/setup.load_data): the model's own input shape, 1,024 samples, so
            # the engine in its own process (--isolated) and the bare loop here compute the same thing
            data = load_data(RunConfig(model=name, dataset="synthetic"))
            steps = calibrate(name, dev, data, args.batch_size, args.seconds)
            bare, wall, med = [], [], []
            while True:
                rep = len(bare)
                if spare is not None:  # ready before either side is timed: no process starts while one is
                    spare.fill()
                    if not spare.wait_ready(300):
                        raise SystemExit("the spare process did not get ready within 300 s")
                for which in (("engine", "bare") if rep % 2 == 0 else ("bare", "engine")):
                    if which == "bare":
                        bare.append(bare_loop(name, dev, data, args.batch_size, args.warmup, steps))
                    else:
                        w, m = engine_run(name, dev, data, args.batch_size, args.warmup, steps, spare)
                        wall.append(w)
                        med.append(m)
                ratios = [w / b for w, b in zip(wall, bare)]
                mid, lo, hi = median_interval(ratios)
                if len(ratios) >= args.max_pairs or (len(ratios) >= args.min_pairs
                                                     and hi - mid <= args.precision and mid - lo <= args.precision):
                    break
            med_ratio = statistics.median(m / b for m, b in zip(med, bare))
            wide = "" if hi - mid <= args.precision and mid - lo <= args.precision else "  (wider than asked)"
            print(f"{name:<10} {steps:>6} {len(ratios):>5} {statistics.median(bare):>15,.0f} "
                  f"{statistics.median(wall):>12,.0f} {statistics.median(med):>14,.0f} "
                  f"{mid:>10.3f} [{lo:.3f}, {hi:.3f}]{'':>3} {med_ratio:>12.3f}{wide}", flush=True)
            if worst is None or mid < worst[0]:
                worst = (mid, lo, hi, name)
    finally:
        if spare is not None:
            spare.close()
    print(f"min_ratio={worst[0]:.3f} ({worst[3]}, 95 % interval {worst[1]:.3f}-{worst[2]:.3f})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
