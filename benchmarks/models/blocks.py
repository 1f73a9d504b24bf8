"""A stack of linear blocks (benchmarks/cuda_diagnose.sh): blocks_item.py is the same with a per-block `.item()`
check (its `after_block`), so the two differ only by the host's waits and the checks' operations."""
import math
import os

from torch import nn

WIDTH = int(os.environ.get("BLOCKS_WIDTH", "1024"))
DEPTH = int(os.environ.get("BLOCKS_DEPTH", "8"))
EXTRA = int(os.environ.get("BLOCKS_EXTRA", "0"))  # small elementwise operations per block: host work


class Blocks(nn.Module):
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
            self.after_block(h)
        return self.head(h)

    def after_block(self, h):
        """Nothing here; blocks_item.py reads a value back after each block."""


def build_model(num_classes, input_shape):
    return Blocks(num_classes, input_shape)
