"""Is max-batch's largest batch the real one? An independent bisection under the same allocator cap, then the tool.

The check caps PyTorch's allocator in this process at the limit (CUDA: torch.cuda.set_per_process_memory_fraction
of the card; MPS: torch.mps.set_per_process_memory_fraction of the recommended maximum), then finds the largest
batch for which two bare training steps complete without an out-of-memory error: the model built as runs build it,
random inputs of its input shape, cross-entropy, SGD with momentum 0.9, autocast for bf16/fp16, TF32 off (as the
engine runs unless asked), the allocator emptied between tries and cuBLAS's workspaces cleared (a run's first step
makes them among its own tensors; left in place from earlier tries they let a batch or two more fit: vit_b_16 under
16 GiB on an H100, 120-123 against 122 in a fresh process). Doubling from 1, then bisecting to the exact batch.
None of the tool's search code is used. Then `mpsstudio max-batch` runs with the same model, precision and
--memory-limit in a process of its own (as the front ends run it), and both are printed with their ratio (the
target: the tool within 2 % of the independent boundary). Last, each boundary and the batch above it is tried
in a process of its own, 4 steps, as a run starts: the boundary a run meets.

    python benchmarks/maxbatch_check.py --model resnet50 --memory-limit 8G [--precision bf16] [--device cuda]
"""

from __future__ import annotations

import argparse
import gc
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

from mpsstudio.cli.common import parse_size  # noqa: E402
from mpsstudio.engine.basics.config import RunConfig  # noqa: E402
from mpsstudio.engine.models import registry as models  # noqa: E402
from mpsstudio.engine.run.setup import load_data  # noqa: E402

DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16}


class Bare:
    """Two plain training steps at a batch size, on a fresh model, under the allocator cap."""

    def __init__(self, model: str, device: str, precision: str):
        self.name, self.device, self.dtype = model, torch.device(device), DTYPES.get(precision)
        self.spec = models.input_spec_for(model, load_data(RunConfig(model=model, dataset="synthetic")).spec)

    def trains(self, batch: int, steps: int = 2) -> bool:
        torch.manual_seed(0)
        model = models.build_model(self.name, self.spec).to(self.device)
        opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
        x = y = None
        try:
            x = torch.randn((batch, *self.spec.sample_shape), device=self.device)
            y = torch.randint(0, self.spec.num_classes, (batch,), device=self.device)
            for _ in range(steps):
                opt.zero_grad(set_to_none=True)
                with torch.autocast(self.device.type, dtype=self.dtype, enabled=self.dtype is not None):
                    loss = F.cross_entropy(model(x), y)
                loss.backward()
                opt.step()
            torch.cuda.synchronize() if self.device.type == "cuda" else torch.mps.synchronize()
            return True
        except torch.OutOfMemoryError:
            return False
        except RuntimeError as exc:  # MPS raises its allocator's error as a RuntimeError
            if "out of memory" not in str(exc):
                raise
            return False
        finally:
            del model, opt, x, y
            gc.collect()
            if self.device.type == "cuda":
                torch._C._cuda_clearCublasWorkspaces()
                torch.cuda.empty_cache()
            else:
                torch.mps.empty_cache()


def cap(device: str, limit: int) -> str:
    if device.startswith("cuda"):
        index = torch.device(device).index or 0
        fraction = limit / torch.cuda.get_device_properties(index).total_memory
        torch.cuda.set_per_process_memory_fraction(fraction, index)
    else:
        fraction = limit / torch.mps.recommended_max_memory()
        torch.mps.set_per_process_memory_fraction(fraction)
    return f"{fraction:.4f}"


def independent(bare: Bare, cap_batch: int = 65536) -> tuple[int, int]:
    """The largest batch that trains and the number of tries."""
    tries, fit, batch = 0, 0, 1
    while batch <= cap_batch:
        tries += 1
        if not bare.trains(batch):
            break
        fit, batch = batch, batch * 2
    fail = batch
    while fail - fit > 1:
        mid = (fit + fail) // 2
        tries += 1
        if bare.trains(mid):
            fit = mid
        else:
            fail = mid
    return fit, tries


def tool(args) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "mb.json"
        cmd = [sys.executable, "-m", "mpsstudio", "max-batch", "--model", args.model, "--dataset", "synthetic",
               "--device", args.device, "--precision", args.precision, "--memory-limit", args.memory_limit,
               "--no-save", "--json", str(out)]
        subprocess.run(cmd, cwd=ROOT, check=False, stdout=subprocess.DEVNULL)
        return json.loads(out.read_text())


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="resnet50")
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--precision", default="fp32", choices=("fp32", "bf16", "fp16"))
    ap.add_argument("--memory-limit", default="8G")
    ap.add_argument("--one", type=int, default=None, help=argparse.SUPPRESS)  # a fresh process trying one batch
    args = ap.parse_args()
    limit = parse_size(args.memory_limit)
    torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = False
    fraction = cap(args.device, limit)
    if args.one is not None:  # as a run does it: a fresh process, the model built, 4 training steps
        print("trains" if Bare(args.model, args.device, args.precision).trains(args.one, steps=4) else "oom")
        return 0
    start = time.perf_counter()
    largest, tries = independent(Bare(args.model, args.device, args.precision))
    took = time.perf_counter() - start
    result = tool(args)
    found = result.get("largest_batch")
    print(f"{args.model} {args.precision} on {args.device} under {args.memory_limit} (fraction {fraction}):")
    print(f"  independent bisection: largest batch {largest} ({tries} tries, {took:.0f} s)")
    failed = result.get("smallest_failed") or {}
    print(f"  mpsstudio max-batch:   largest batch {found}; smallest that did not: {failed.get('batch_size')} "
          f"({failed.get('why')}); {len(result.get('probes', []))} probes; {result.get('limit_enforced')}")
    if found and largest:
        print(f"  tool / independent = {found / largest:.3f}")
        # which of the two boundaries a run would meet: each batch in a process of its own, as a run starts
        verdicts = []
        for batch in sorted({largest, largest + 1, found, found + 1}):
            out = subprocess.run([sys.executable, __file__, "--model", args.model, "--device", args.device,
                                  "--precision", args.precision, "--memory-limit", args.memory_limit,
                                  "--one", str(batch)], capture_output=True, text=True, cwd=ROOT)
            verdicts.append(f"{batch} {(out.stdout.strip().splitlines() or ['failed'])[-1]}")
        print(f"  fresh processes, 4 steps each: {', '.join(verdicts)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
