"""blocks.py with a common debugging habit: after each block, `.item()` reads whether the activations are finite, so
the host waits for the GPU eight times a step (benchmarks/cuda_diagnose.sh: the sync-bound case)."""
import math
import os

import torch
from torch import nn

WIDTH = int(os.environ.get("BLOCKS_WIDTH", "1024"))
DEPTH = int(os.environ.get("BLOCKS_DEPTH", "8"))
EXTRA = int(os.environ.get("BLOCKS_EXTRA", "0"))  # small elementwise operations per block: host work


class CheckedBlocks(nn.Module):
    def __init__(self, num_classes, input_shape):
        super().__init__()
        self.stem = nn.Linear(math.prod(input_shape), WIDTH)
        self.blocks = nn.ModuleList(nn.Sequential(nn.Linear(WIDTH, WIDTH), nn.GELU()) for _ in range(DEPTH))
        self.head = nn.Linear(WIDTH, num_classes)

    def forward(self, x):
        h = self.stem(x.flatten(1))
        for block in self.blocks:
            h = block(h)
            for _ in range(EXTRA):
                h = h * 1.0
            if not torch.isfinite(h).all().item():
                raise FloatingPointError("activations are not finite")
        return self.head(h)


def build_model(num_classes, input_shape):
    return CheckedBlocks(num_classes, input_shape)
