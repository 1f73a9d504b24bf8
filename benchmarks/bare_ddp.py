"""A bare DDP training loop, the yardstick of runs on several GPUs (benchmarks/ddp_scaling.py): what a user would
write by hand, launched by torchrun. No engine code: torchvision's model, DDP's defaults (no DDP on one GPU, as
the engine's --gpus 1 runs), synthetic batches made
once on the GPU (uint8 pixels normalised there, as the engine's are), SGD with momentum, bf16 autocast and
channels_last when asked. Timed in spans of --span steps with a device sync before each clock read; a span is the
slowest rank's (all-reduced MAX), throughput = every rank's samples / that span. Rank 0 prints one JSON line:
{"gpus": N, "samples_per_s": median over spans, "spans": [...]}.

    torchrun --nproc-per-node N benchmarks/bare_ddp.py --model resnet50 --batch-size 128 --precision bf16 \
        --channels-last [--warmup 10] [--steps 200] [--span 20]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time
from contextlib import nullcontext
from datetime import timedelta

import torch
import torch.distributed as dist
import torch.nn.functional as F
import torchvision


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--model", default="resnet50")
    p.add_argument("--batch-size", type=int, default=128)
    p.add_argument("--precision", choices=("fp32", "bf16", "fp16"), default="bf16")
    p.add_argument("--channels-last", action="store_true")
    p.add_argument("--warmup", type=int, default=10)
    p.add_argument("--steps", type=int, default=200)
    p.add_argument("--span", type=int, default=20)
    p.add_argument("--image-size", type=int, default=224)
    args = p.parse_args()
    local = int(os.environ.get("LOCAL_RANK", "0"))
    world = int(os.environ.get("WORLD_SIZE", "1"))
    torch.cuda.set_device(local)
    dev = torch.device("cuda", local)
    dist.init_process_group("nccl", timeout=timedelta(seconds=120), device_id=dev)
    torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = False  # as the engine's runs
    torch.manual_seed(0)
    model = getattr(torchvision.models, args.model)(num_classes=10).to(dev)
    if args.channels_last:
        model = model.to(memory_format=torch.channels_last)
    if world > 1:  # one GPU: the plain loop a user runs there (DDP of one rank still buckets and all-reduces)
        model = torch.nn.parallel.DistributedDataParallel(model, device_ids=[local])
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    g = torch.Generator().manual_seed(int(os.environ.get("RANK", "0")))
    batches = []
    for _ in range(4):
        x = torch.randint(0, 256, (args.batch_size, 3, args.image_size, args.image_size), generator=g,
                          dtype=torch.uint8).to(dev).float().mul_(1 / (255 * 0.2887)).add_(-0.5 / 0.2887)
        if args.channels_last:
            x = x.contiguous(memory_format=torch.channels_last)
        batches.append((x, torch.randint(0, 10, (args.batch_size,), generator=g).to(dev)))
    dtype = {"bf16": torch.bfloat16, "fp16": torch.float16}.get(args.precision)
    autocast = (lambda: torch.autocast("cuda", dtype=dtype)) if dtype else nullcontext

    def step(i: int) -> None:
        x, y = batches[i % 4]
        opt.zero_grad(set_to_none=True)
        with autocast():
            loss = F.cross_entropy(model(x), y)
        loss.backward()
        opt.step()

    for i in range(args.warmup):
        step(i)
    torch.cuda.synchronize()
    spans = []
    done = 0
    while done < args.steps:
        n = min(args.span, args.steps - done)
        t = time.perf_counter()
        for i in range(n):
            step(done + i)
        torch.cuda.synchronize()
        seconds = torch.tensor([time.perf_counter() - t], device=dev, dtype=torch.float64)
        dist.all_reduce(seconds, op=dist.ReduceOp.MAX)
        spans.append(n * args.batch_size * world / seconds.item())
        done += n
    if int(os.environ.get("RANK", "0")) == 0:
        print(json.dumps({"gpus": world, "samples_per_s": statistics.median(spans), "spans": spans}), flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
