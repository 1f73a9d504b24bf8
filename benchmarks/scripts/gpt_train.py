"""A launch-bound training script of the common shape, written as people write them (nothing of MPS Studio in it):
a small GPT (token and position embeddings, pre-norm blocks of causal self-attention and an MLP, a tied head), AdamW,
bf16 autocast on CUDA, a `loss.item()` every step for the log. It times itself: after `--warmup` steps, the wall
clock over `--iters` steps (the device synchronized at both ends by the last `.item()`), and writes its own
sequences/s to `--out` (one line of JSON), so that a run alone and a run under `mpsstudio run` are compared by the
script's own clock; also the CPU time of its own thread over those steps (`time.thread_time`: what a busy machine's
other programs do not add, where the wall clock on a shared 2-core machine varies by 20 %).
benchmarks/script_overhead.py runs it both ways.

    python benchmarks/scripts/gpt_train.py --device cuda --iters 300 --out rate.json
"""

import argparse
import json
import math
import time

import torch
from torch import nn
from torch.nn import functional as F


class Block(nn.Module):
    def __init__(self, width: int, heads: int):
        super().__init__()
        self.ln1, self.ln2 = nn.LayerNorm(width), nn.LayerNorm(width)
        self.qkv, self.proj = nn.Linear(width, 3 * width), nn.Linear(width, width)
        self.fc, self.out = nn.Linear(width, 4 * width), nn.Linear(4 * width, width)
        self.heads = heads

    def forward(self, x):
        b, t, c = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(c, dim=2)
        q, k, v = (z.view(b, t, self.heads, c // self.heads).transpose(1, 2) for z in (q, k, v))
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.proj(y.transpose(1, 2).contiguous().view(b, t, c))
        return x + self.out(F.gelu(self.fc(self.ln2(x))))


class GPT(nn.Module):
    def __init__(self, vocab: int, context: int, width: int, layers: int, heads: int):
        super().__init__()
        self.tok, self.pos = nn.Embedding(vocab, width), nn.Embedding(context, width)
        self.blocks = nn.ModuleList(Block(width, heads) for _ in range(layers))
        self.ln = nn.LayerNorm(width)
        self.head = nn.Linear(width, vocab, bias=False)
        self.head.weight = self.tok.weight
        nn.init.normal_(self.tok.weight, std=0.02)

    def forward(self, idx, targets=None):
        x = self.tok(idx) + self.pos(torch.arange(idx.shape[1], device=idx.device))
        for block in self.blocks:
            x = block(x)
        logits = self.head(self.ln(x))
        loss = None if targets is None else F.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1))
        return logits, loss


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    p.add_argument("--iters", type=int, default=300)
    p.add_argument("--warmup", type=int, default=20)
    p.add_argument("--batch-size", type=int, default=16)
    p.add_argument("--context", type=int, default=64)
    p.add_argument("--width", type=int, default=128)
    p.add_argument("--layers", type=int, default=6)
    p.add_argument("--threads", type=int, default=None, help="torch's CPU threads (default: torch's)")
    p.add_argument("--out", default=None)
    a = p.parse_args()
    if a.threads:
        torch.set_num_threads(a.threads)
    torch.manual_seed(0)
    device = torch.device(a.device)
    dtype = torch.bfloat16 if device.type == "cuda" else None
    vocab = 512
    data = torch.randint(0, vocab, (200_000,))
    model = GPT(vocab, a.context, a.width, a.layers, heads=4).to(device)
    opt = torch.optim.AdamW(model.parameters(), lr=6e-4, weight_decay=0.1)

    def batch():
        ix = torch.randint(len(data) - a.context - 1, (a.batch_size,))
        x = torch.stack([data[i:i + a.context] for i in ix])
        y = torch.stack([data[i + 1:i + 1 + a.context] for i in ix])
        return x.to(device, non_blocking=True), y.to(device, non_blocking=True)

    started = None
    for it in range(a.warmup + a.iters):
        if it == a.warmup:
            started, cpu_started = time.perf_counter(), time.thread_time()
        lr = 6e-4 * min(1.0, (it + 1) / 50) * 0.5 * (1 + math.cos(math.pi * it / (a.warmup + a.iters)))
        for group in opt.param_groups:
            group["lr"] = lr
        x, y = batch()
        with torch.autocast(device.type, dtype=dtype, enabled=dtype is not None):
            _, loss = model(x, y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        value = loss.item()  # the log's number: a host sync every step, as most scripts do
        if it % 100 == 0:
            print(f"iter {it} loss {value:.4f}")
    seconds, cpu_seconds = time.perf_counter() - started, time.thread_time() - cpu_started
    rate = a.iters * a.batch_size / seconds
    print(f"{rate:.1f} sequences/s over {a.iters} iterations")
    if a.out:
        with open(a.out, "w") as f:
            json.dump({"sequences_per_s": rate, "seconds": seconds, "iters": a.iters, "cpu_seconds": cpu_seconds,
                       "sequences_per_cpu_s": a.iters * a.batch_size / cpu_seconds}, f)


if __name__ == "__main__":
    main()
