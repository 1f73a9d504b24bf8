"""Independent check of `mpsstudio max-batch` on CUDA: a bare PyTorch training loop (torchvision model, SGD, no
MPS Studio code) at the batch sizes given; prints whether each trains or raises out of memory.

    python benchmarks/oom_check.py --model resnet50 --batch-sizes 800,1600
"""

from __future__ import annotations

import argparse
import gc

import torch
import torchvision


def trains(model_name: str, batch: int, device: str, steps: int = 2) -> str:
    model = getattr(torchvision.models, model_name)(num_classes=1000).to(device)
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    try:
        x = torch.randn(batch, 3, 224, 224, device=device)
        y = torch.randint(0, 1000, (batch,), device=device)
        for _ in range(steps):
            opt.zero_grad(set_to_none=True)
            torch.nn.functional.cross_entropy(model(x), y).backward()
            opt.step()
        torch.cuda.synchronize()
        return f"trains (peak allocated {torch.cuda.max_memory_allocated() / 2**30:.1f} GiB)"
    except torch.OutOfMemoryError as exc:
        return f"out of memory: {str(exc).splitlines()[0][:120]}"
    finally:
        del model, opt
        gc.collect()
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats()


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--model", default="resnet50")
    p.add_argument("--batch-sizes", required=True)
    p.add_argument("--device", default="cuda")
    args = p.parse_args()
    for b in (int(v) for v in args.batch_sizes.split(",")):
        print(f"bare PyTorch {args.model} batch {b}: {trains(args.model, b, args.device)}", flush=True)


if __name__ == "__main__":
    main()
