"""Batch sources: turn a dataset into device-ready model inputs, one epoch at a time.

Images travel as uint8 and become normalised float on the device, so host memory and
transfers stay four times smaller and the device does the conversion.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from typing import Callable

import torch
import torch.nn.functional as F

from ..basics.spec import DataSpec

Batch = tuple[torch.Tensor, torch.Tensor]


class InputConverter:
    """uint8 images -> normalised float (resized to the model's input, channels_last if asked); tokens pass through."""

    def __init__(self, data_spec: DataSpec, model_spec: DataSpec, mean, std, device: torch.device,
                 channels_last: bool = False):
        self.kind = data_spec.kind
        self.channels_last = channels_last and data_spec.kind == "image"
        self.size = None
        if data_spec.kind == "image":
            c = data_spec.channels
            mean_t = torch.tensor(list(mean) or [0.0] * c, dtype=torch.float32).reshape(1, -1, 1, 1)
            std_t = torch.tensor(list(std) or [1.0] * c, dtype=torch.float32).reshape(1, -1, 1, 1)
            # (x/255 - mean)/std == x*scale + shift
            self.scale = (1.0 / (255.0 * std_t)).to(device)
            self.shift = (-mean_t / std_t).to(device)
            if (model_spec.height, model_spec.width) != (data_spec.height, data_spec.width):
                self.size = (model_spec.height, model_spec.width)

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        if self.kind != "image":
            return x
        x = x.float().mul_(self.scale).add_(self.shift)
        if self.size is not None:
            x = F.interpolate(x, size=self.size, mode="bilinear", align_corners=False)
        if self.channels_last:
            x = x.contiguous(memory_format=torch.channels_last)
        return x


def _to_device(t: torch.Tensor, device: torch.device) -> torch.Tensor:
    return t.to(device, non_blocking=device.type == "cuda")


class TensorBatches:
    """Batches by indexing in-memory tensors; `resident` keeps them on the device (uint8) for the whole run."""

    def __init__(self, x: torch.Tensor, y: torch.Tensor, batch_size: int, device: torch.device,
                 convert: Callable[[torch.Tensor], torch.Tensor], resident: bool, shuffle: bool = True,
                 drop_last: bool = True, seed: int = 0):
        self.n = int(x.shape[0])
        self.batch_size = batch_size
        self.device = device
        self.convert = convert
        self.shuffle = shuffle
        self.drop_last = drop_last
        self.generator = torch.Generator().manual_seed(seed)
        self.resident = resident
        if resident:
            x, y = x.to(device), y.to(device)
        self.x, self.y = x, y

    @property
    def steps_per_epoch(self) -> int:
        return self.n // self.batch_size if self.drop_last else math.ceil(self.n / self.batch_size)

    def epoch(self) -> Iterator[Batch]:
        for raw in self.raw_epoch():
            yield self.place(raw)

    def raw_epoch(self) -> Iterator[Batch]:
        """The epoch's batches as the loader gives them, before the copy to the device (the diagnosis times the two
        apart; `epoch` is `place` of each)."""
        order = torch.randperm(self.n, generator=self.generator) if self.shuffle else torch.arange(self.n)
        if self.resident:
            order = order.to(self.device)
        b = self.batch_size
        for i in range(self.steps_per_epoch):
            idx = order[i * b:(i + 1) * b]
            yield self.x.index_select(0, idx), self.y.index_select(0, idx)

    def place(self, raw: Batch) -> Batch:
        """A raw batch on the device, as the model takes it."""
        xb, yb = raw
        if not self.resident:
            xb, yb = _to_device(xb, self.device), _to_device(yb, self.device)
        return self.convert(xb), yb


class CycledBatches:
    """A few ready batches kept on the device and reused: pure compute, no data cost (synthetic data)."""

    def __init__(self, x: torch.Tensor, y: torch.Tensor, batch_size: int, device: torch.device,
                 convert: Callable[[torch.Tensor], torch.Tensor], pool: int = 4):
        n = int(x.shape[0])
        self.batches: list[Batch] = []
        for i in range(pool):
            idx = torch.arange(i * batch_size, (i + 1) * batch_size) % n
            self.batches.append((convert(x[idx].to(device)), y[idx].to(device)))
        self.steps_per_epoch = max(1, n // batch_size)

    def epoch(self) -> Iterator[Batch]:
        for i in range(self.steps_per_epoch):
            yield self.batches[i % len(self.batches)]

    raw_epoch = epoch  # already on the device: nothing to load or copy

    @staticmethod
    def place(raw: Batch) -> Batch:
        return raw


class LoaderBatches:
    """Batches from a torch DataLoader (lazy datasets such as image folders; worker processes allowed)."""

    def __init__(self, dataset, batch_size: int, device: torch.device,
                 convert: Callable[[torch.Tensor], torch.Tensor], workers: int, shuffle: bool = True,
                 drop_last: bool = True, seed: int = 0):
        self.device = device
        self.convert = convert
        self.loader = torch.utils.data.DataLoader(
            dataset, batch_size=batch_size, shuffle=shuffle, drop_last=drop_last, num_workers=workers,
            pin_memory=device.type == "cuda", persistent_workers=workers > 0,
            generator=torch.Generator().manual_seed(seed),
        )

    @property
    def steps_per_epoch(self) -> int:
        return len(self.loader)

    def epoch(self) -> Iterator[Batch]:
        for xb, yb in self.loader:
            yield self.convert(_to_device(xb, self.device)), _to_device(yb, self.device)

    def raw_epoch(self) -> Iterator[Batch]:
        yield from self.loader

    def place(self, raw: Batch) -> Batch:
        xb, yb = raw
        return self.convert(_to_device(xb, self.device)), _to_device(yb, self.device)


def make_batches(dataset, *, batch_size: int, device: torch.device, convert, resident: bool, workers: int,
                 synthetic: bool = False, train: bool = True, seed: int = 0):
    """Pick the fastest honest source for a dataset split."""
    tensors = hasattr(dataset, "x") and hasattr(dataset, "y")
    if synthetic and tensors:
        return CycledBatches(dataset.x, dataset.y, batch_size, device, convert)
    if tensors and workers == 0:
        return TensorBatches(dataset.x, dataset.y, batch_size, device, convert, resident,
                             shuffle=train, drop_last=train, seed=seed)
    if resident and not tensors:
        dataset = _materialise(dataset)
        return TensorBatches(dataset.x, dataset.y, batch_size, device, convert, True,
                             shuffle=train, drop_last=train, seed=seed)
    return LoaderBatches(dataset, batch_size, device, convert, workers, shuffle=train, drop_last=train, seed=seed)


class _Materialised:
    def __init__(self, x: torch.Tensor, y: torch.Tensor):
        self.x, self.y = x, y


def _materialise(dataset) -> _Materialised:
    """Decode a lazy dataset once into uint8 tensors (the 'resident' option for image folders)."""
    xs, ys = zip(*(dataset[i] for i in range(len(dataset))))
    return _Materialised(torch.stack(xs), torch.as_tensor(ys, dtype=torch.int64))
