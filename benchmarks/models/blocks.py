"""A stack of linear blocks (benchmarks/cuda_diagnose.sh): the same model as blocks_item.py without its per-block
`.item()`, so the two differ only by the host syncs."""
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
        return self.head(h)


def build_model(num_classes, input_shape):
    return Blocks(num_classes, input_shape)
