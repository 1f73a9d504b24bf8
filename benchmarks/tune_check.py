"""Does `mpsstudio tune` find what a bare loop finds? On one device, in one call: the tune of resnet50 (fp32 and bf16,
channels_last both ways, at one batch size; or, with --default-grid, every default candidate around --batch), then a
bare PyTorch training loop of the same model in the same settings at --compare-batch, the two settings alternating
(A B B A ...), and the ratio of bf16 + channels_last to fp32 (TF32 off) from each.

    python benchmarks/tune_check.py [--device cuda] [--model resnet50] [--batch 64] [--budget 4] [--pairs 3]
    python benchmarks/tune_check.py --default-grid --budget 8 --batch 64 --compare-batch 128   # issue 48's done-when

With --default-grid it also prints the fewest rounds any default candidate had and the recommendation's ratio
interval as ± of its ratio (issue 48: at least 3 rounds each, within ±5 %), and the tune's own time.

The bare loop: the engine's model (models.build_model, same seed), one batch of random 224 px images kept on the
device, SGD, cross-entropy, bf16 by autocast, TF32 off (the engine's fp32 is full fp32), a synchronize before each
clock read, 10 warm-up steps, then `--steps` timed. Last line: tune_ratio, bare_ratio and their quotient.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def bare(model_name: str, device: str, batch: int, bf16_cl: bool, steps: int) -> float:
    import torch
    import torch.nn.functional as F

    from mpsstudio.engine.basics.spec import DataSpec
    from mpsstudio.engine.models import registry as models

    torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = False
    torch.manual_seed(0)
    spec = models.input_spec_for(model_name, DataSpec("image", 1000, channels=3, height=224, width=224))
    model = models.build_model(model_name, spec).to(device)
    x = torch.randn(batch, spec.channels, spec.height, spec.width, device=device)
    y = torch.randint(0, spec.num_classes, (batch,), device=device)
    if bf16_cl:
        model = model.to(memory_format=torch.channels_last)
        x = x.contiguous(memory_format=torch.channels_last)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)

    def step():
        with torch.autocast(device.split(":")[0], dtype=torch.bfloat16, enabled=bf16_cl):
            loss = F.cross_entropy(model(x), y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
    for _ in range(10):
        step()
    torch.cuda.synchronize() if device.startswith("cuda") else None
    started = time.perf_counter()
    for _ in range(steps):
        step()
    torch.cuda.synchronize() if device.startswith("cuda") else None
    return batch * steps / (time.perf_counter() - started)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--device", default="cuda")
    p.add_argument("--model", default="resnet50")
    p.add_argument("--batch", type=int, default=64)
    p.add_argument("--budget", type=float, default=4.0, help="the tune's budget, minutes")
    p.add_argument("--pairs", type=int, default=3)
    p.add_argument("--steps", type=int, default=60)
    p.add_argument("--default-grid", action="store_true", help="the tune's default candidates around --batch")
    p.add_argument("--compare-batch", type=int, default=None, help="the batch compared (default: --batch)")
    p.add_argument("--keep", default=None, help="a path where the tune's JSON is copied")
    args = p.parse_args()
    compare = args.compare_batch or args.batch
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "tune.json"
        cmd = [sys.executable, "-m", "mpsstudio", "tune", "--model", args.model, "--dataset", "synthetic",
               "--devices", args.device, "--batch-size", str(args.batch), "--budget", str(args.budget), "--no-save",
               "--wide", "--json", str(out)]
        if not args.default_grid:
            cmd[8:8] = ["--batch-sizes", str(args.batch), "--precisions", "fp32,bf16", "--channels-last", "both"]
        print("$", " ".join(cmd[2:]), flush=True)
        started = time.perf_counter()
        done = subprocess.run(cmd, cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)}, text=True,
                              capture_output=True)
        print(done.stdout)
        print(done.stderr[-3000:], file=sys.stderr)
        print(f"tune took {time.perf_counter() - started:.0f} s, exit {done.returncode}")
        result = json.loads(out.read_text())
        if args.keep:
            Path(args.keep).write_text(out.read_text())
    rows = {(r["precision"], r["channels_last"]): r for r in result["candidates"]
            if r["batch_size"] == compare and r.get("tf32") in (None, "off")}
    tuned = rows[("bf16", True)]
    chosen = result["recommendation"].get(next(iter(result["recommendation"]), ""), None)
    best = next((r for r in result["candidates"] if r["key"] == chosen), None)
    print(f"recommended: {best['label'] if best else None}")
    if best:
        print(f"its ratio to the current: {best['speedup']:.3f}x [{best['speedup_low']:.3f}-{best['speedup_high']:.3f}]"
              f", ±{max(best['speedup_high'] / best['speedup'] - 1, 1 - best['speedup_low'] / best['speedup']):.1%}")
    usable = [r for r in result["candidates"] if r["status"] not in ("refused",)]
    print(f"candidates {len(usable)}, rounds {result['rounds']}, fewest rounds of a candidate "
          f"{min((r['rounds'] for r in usable), default=0)} ({sum(r['status'] == 'dropped' for r in usable)} dropped), "
          f"elapsed {result['elapsed_s']:.0f} s")
    fp32, fast = [], []
    for i in range(args.pairs):
        for bf16_cl in ((False, True) if i % 2 == 0 else (True, False)):
            (fast if bf16_cl else fp32).append(bare(args.model, args.device, compare, bf16_cl, args.steps))
        print(f"bare pair {i + 1}: fp32 {fp32[-1]:,.0f}, bf16 + channels_last {fast[-1]:,.0f} samples/s", flush=True)
    bare_ratio = statistics.median(fast) / statistics.median(fp32)
    base = rows[("fp32", False)]
    # Like with like: both rows at the compared batch, round by round (the tune's "speedup" is against the current
    # setting, which may be another batch or TF32 state).
    paired = [f / s for f, s in zip(tuned.get("round_samples_per_s") or [], base.get("round_samples_per_s") or [])]
    tune_ratio = statistics.median(paired) if paired else tuned["samples_per_s"] / base["samples_per_s"]
    print(f"tune: fp32 {base['samples_per_s']:,.0f}, bf16 + channels_last {tuned['samples_per_s']:,.0f} samples/s, "
          f"{tune_ratio:.3f}x (median of {len(paired)} paired rounds"
          + (f", range {min(paired):.3f}-{max(paired):.3f})" if paired else ")"))
    print(f"bare: fp32 {statistics.median(fp32):,.0f}, bf16 + channels_last {statistics.median(fast):,.0f} samples/s, "
          f"{bare_ratio:.3f}x over {args.pairs} pairs")
    print(f"tune_ratio={tune_ratio:.3f} bare_ratio={bare_ratio:.3f} tune/bare={tune_ratio / bare_ratio:.3f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
