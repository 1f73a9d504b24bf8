"""Is `max-batch --longest-sequence`'s answer the real one? An independent bisection under the same allocator cap.

A GPT-2-small-sized folder with 8,192 positions (GPT2Config's defaults otherwise: 124 M parameters, random weights,
written here with save_pretrained) fine-tuned in full, fp32, AdamW (lr 1e-4), at each --batches. The independent
search caps PyTorch's CUDA allocator in this process at --memory-limit (torch.cuda.set_per_process_memory_fraction),
loads the folder with transformers, and finds the longest sequence for which two training steps (random ids, the
ids as labels: transformers' causal-LM loss) complete without an out-of-memory error: a fresh model and optimizer each
try, the allocator emptied between, doubling from 1 then bisecting to a gap of at most 1/256 of the length. None of
the tool's search code is used. Then `mpsstudio max-batch --longest-sequence --at-batch B` with the same folder,
optimizer and --memory-limit runs in a process of its own (as the front ends run it), and both are printed with their
ratio (the target: within 2 %).

    python benchmarks/longest_sequence_check.py [--batches 1,8] [--memory-limit 4G]
"""

from __future__ import annotations

import argparse
import gc
import json
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import torch  # noqa: E402

POSITIONS = 8192


def make_folder(where: Path) -> Path:
    from transformers import GPT2Config, GPT2LMHeadModel

    torch.manual_seed(0)
    GPT2LMHeadModel(GPT2Config(n_positions=POSITIONS)).save_pretrained(str(where))
    return where


def trains(folder: Path, batch: int, length: int) -> bool:
    from transformers import AutoModelForCausalLM

    model = optimizer = ids = None
    try:
        model = AutoModelForCausalLM.from_pretrained(str(folder), local_files_only=True, dtype=torch.float32).cuda()
        model.train()
        optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)
        ids = torch.randint(0, model.config.vocab_size, (batch, length), device="cuda")
        for _ in range(2):
            optimizer.zero_grad(set_to_none=True)
            model(input_ids=ids, attention_mask=torch.ones_like(ids), labels=ids).loss.backward()
            optimizer.step()
        torch.cuda.synchronize()
        return True
    except torch.OutOfMemoryError:
        return False
    finally:
        del model, optimizer, ids
        gc.collect()
        torch.cuda.empty_cache()


def bisect(folder: Path, batch: int) -> int:
    fit, fail, length = 0, None, 1
    while length <= POSITIONS:
        if not trains(folder, batch, length):
            fail = length
            break
        fit, length = length, length * 2
    if fail is None:
        return fit
    while fail - fit > max(1, fit // 256):
        mid = (fit + fail) // 2
        if trains(folder, batch, mid):
            fit = mid
        else:
            fail = mid
    return fit


def tool(folder: Path, batch: int, limit: str) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "seq.json"
        subprocess.run([sys.executable, "-m", "mpsstudio", "max-batch", "--model", str(folder), "--device", "cuda",
                        "--longest-sequence", "--at-batch", str(batch), "--memory-limit", limit, "--optimizer",
                        "adamw", "--lr", "1e-4", "--json", str(out), "--no-save"], check=False, cwd=ROOT)
        return json.loads(out.read_text())


def main() -> int:
    from mpsstudio.engine.basics.formatting import parse_memory_size

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--batches", default="1,8")
    parser.add_argument("--memory-limit", default="4G")
    args = parser.parse_args()
    limit = parse_memory_size(args.memory_limit, "--memory-limit")
    total = torch.cuda.get_device_properties(0).total_memory
    with tempfile.TemporaryDirectory() as tmp:
        folder = make_folder(Path(tmp) / "gpt2-8k")
        for batch in (int(b) for b in args.batches.split(",")):
            torch.cuda.set_per_process_memory_fraction(limit / total, 0)
            independent = bisect(folder, batch)
            torch.cuda.set_per_process_memory_fraction(1.0, 0)
            result = tool(folder, batch, args.memory_limit)
            found = result.get("largest_batch")
            ratio = found / independent if found and independent else float("nan")
            print(f"batch {batch}: independent bisection {independent:,} tokens; the tool {found} tokens "
                  f"({ratio:.3f}); {result.get('sentence')}", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
