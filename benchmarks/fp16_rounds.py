"""Why do a tune's fp16 rounds differ? One candidate's rounds as the tune runs them (a fresh model and GradScaler each
round, in one warm worker), beside a control (bf16), then a bare loop of the same shapes in five variants, interleaved
round by round (A B C D E, then E D C B A): fp16 with its GradScaler (whose step reads the inf check back, a host
sync each step), fp16 with fused SGD (the check stays on the GPU), fp16 without a scaler, bf16, and bf16 with a
synchronize after each step (the scaler's read, without fp16).

    python benchmarks/fp16_rounds.py [--model resnet50] [--batch 128] [--rounds 8] [--steps 16] [--warmup 3]
        [--skip-engine] [--skip-bare]

Prints, per round: the engine's samples/s for fp16 + channels_last and bf16 + channels_last (A B B A) and its
windows' samples/s; each bare variant's samples/s, its GPU step time from CUDA events (median, fastest, slowest) and
the host's time in step(). Last lines: each series' median and spread (max/min). The answer on the lent H200 is in
docs/benchmarks.md ("fp16's rounds").
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def engine_rounds(args) -> dict[str, list[float]]:
    from mpsstudio.engine.basics.config import RunConfig
    from mpsstudio.engine.process import runs
    from mpsstudio.engine.process.warm import Warm

    base = RunConfig(model=args.model, dataset="synthetic", device=args.device, batch_size=args.batch, steps=args.steps,
                     epochs=None, warmup_steps=args.warmup, channels_last=True)
    out: dict[str, list[float]] = {"fp16": [], "bf16": []}
    with Warm() as warm:
        for i in range(args.rounds):
            for prec in (("fp16", "bf16") if i % 2 == 0 else ("bf16", "fp16")):
                cfg = RunConfig.from_dict({**base.to_dict(), "precision": prec})
                r = runs.run_point(cfg, warm=warm)
                out[prec].append(r.summary.samples_per_s or 0.0)
                rates = [w.samples_per_s for w in r.windows if w.samples_per_s]
                print(f"engine round {i + 1} {prec}: {r.status} {out[prec][-1]:,.0f} samples/s; windows "
                      + " ".join(f"{x:,.0f}" for x in rates), flush=True)
    return out


VARIANTS = {  # name: (autocast dtype, GradScaler, fused SGD, a synchronize after each step)
    "fp16": ("float16", True, False, False),  # the engine's fp16: GradScaler.step reads found_inf (.item()) each step
    "fp16-fused": ("float16", True, True, False),  # fused SGD takes the scaler's inf check on the GPU: no read
    "fp16-unscaled": ("float16", False, False, False),  # no GradScaler (no read; underflow unguarded)
    "bf16": ("bfloat16", False, False, False),
    "bf16-sync": ("bfloat16", False, False, True),  # bf16 with the read fp16's scaler makes: is the read the noise?
}


def bare_round(args, variant: str, seed: int) -> float:
    """One round of the bare loop in `variant` (VARIANTS): samples/s; prints what its steps did."""
    import torch
    import torch.nn.functional as F

    from mpsstudio.engine.basics.spec import DataSpec
    from mpsstudio.engine.models import registry as models

    dtype_name, scaled, fused, sync = VARIANTS[variant]
    dtype = getattr(torch, dtype_name)
    spec = models.input_spec_for(args.model, DataSpec("image", 1000, channels=3, height=224, width=224))
    torch.manual_seed(seed)
    model = models.build_model(args.model, spec).cuda().to(memory_format=torch.channels_last)
    x = torch.randn(args.batch, 3, 224, 224, device="cuda").contiguous(memory_format=torch.channels_last)
    y = torch.randint(0, 1000, (args.batch,), device="cuda")
    opt = torch.optim.SGD(model.parameters(), lr=0.01, **({"fused": True} if fused else {}))
    scaler = torch.amp.GradScaler("cuda", enabled=scaled)
    events, issued = [], []

    def step() -> None:
        with torch.autocast("cuda", dtype=dtype):
            loss = F.cross_entropy(model(x), y)
        opt.zero_grad(set_to_none=True)
        scaler.scale(loss).backward()
        scaler.step(opt)
        scaler.update()
        if sync:
            torch.cuda.synchronize()
    for _ in range(args.warmup):
        step()
    torch.cuda.synchronize()
    started = time.perf_counter()
    for _ in range(args.steps):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        t = time.perf_counter()
        step()
        issued.append(time.perf_counter() - t)
        b.record()
        events.append((a, b))
    torch.cuda.synchronize()
    rate = args.batch * args.steps / (time.perf_counter() - started)
    ms = [a.elapsed_time(b) for a, b in events]
    print(f"bare {variant}: {rate:,.0f} samples/s; GPU step median {statistics.median(ms):.1f} ms (fastest "
          f"{min(ms):.1f}, slowest {max(ms):.1f}); host time in step() median {1e3 * statistics.median(issued):.1f} ms",
          flush=True)
    return rate


def bare_rounds(args) -> dict[str, list[float]]:
    import torch

    names = list(VARIANTS)
    out: dict[str, list[float]] = {n: [] for n in names}
    for i in range(args.rounds):
        print(f"round {i + 1}", flush=True)
        for n in (names if i % 2 == 0 else list(reversed(names))):
            out[n].append(bare_round(args, n, i))
            torch.cuda.empty_cache()  # the round's model and optimizer are gone: each round starts alike
    return out


def spread(name: str, xs: list[float]) -> None:
    xs = [x for x in xs if x]
    if xs:
        print(f"{name}: median {statistics.median(xs):,.0f}, min {min(xs):,.0f}, max {max(xs):,.0f}, "
              f"max/min {max(xs) / min(xs):.3f}")


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--model", default="resnet50")
    p.add_argument("--batch", type=int, default=128)
    p.add_argument("--rounds", type=int, default=8)
    p.add_argument("--steps", type=int, default=16)
    p.add_argument("--warmup", type=int, default=3)
    p.add_argument("--skip-engine", action="store_true")
    p.add_argument("--skip-bare", action="store_true")
    p.add_argument("--device", default="cuda", help="the engine's device (the bare loop is CUDA only)")
    args = p.parse_args()
    engine = {} if args.skip_engine else engine_rounds(args)
    bare = {} if args.skip_bare else bare_rounds(args)
    for k, v in engine.items():
        spread(f"engine {k}", v)
    for k, v in bare.items():
        spread(f"bare {k}", v)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
