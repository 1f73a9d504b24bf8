"""Data as tests make it."""

from __future__ import annotations

import torch

from mpsstudio.engine.basics.spec import DataSpec
from mpsstudio.engine.data.datasets import LoadedDataset, TensorSamples


def tiny_data(n: int = 256, classes: int = 4, val: int = 64) -> LoadedDataset:
    """Separable 1x8x8 images: class k lights up row k, so a real model learns it in a few steps."""
    g = torch.Generator().manual_seed(0)

    def make(count):
        y = torch.randint(0, classes, (count,), generator=g)
        x = torch.randint(0, 40, (count, 1, 8, 8), generator=g, dtype=torch.uint8)
        x[torch.arange(count), 0, y] = 255
        return TensorSamples(x, y)

    spec = DataSpec(kind="image", num_classes=classes, channels=1, height=8, width=8)
    return LoadedDataset(name="tiny", spec=spec, train=make(n), val=make(val), classes=[str(i) for i in range(classes)],
                         mean=(0.2,), std=(0.3,), notes=[])



def small_images(monkeypatch) -> None:
    """ResNet50 on 32x32 synthetic images instead of 224x224 (the run's data takes the model's input shape): the
    same model, batch sizes and path through the CLI and the window, ~50x less arithmetic on a 2-core test machine.
    Runs and tools run in-process in tests, so the registry patched here is the one they read."""
    from dataclasses import replace

    from mpsstudio.engine.models import registry

    entry = registry._REGISTRY["resnet50"]
    small = replace(entry.info.default_spec, height=32, width=32)
    monkeypatch.setitem(registry._REGISTRY, "resnet50",
                        replace(entry, info=replace(entry.info, default_spec=small, preferred_image_size=32)))

