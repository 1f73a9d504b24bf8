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


def to_device(tree, device: torch.device):
    """A batch's inputs or targets on `device`: a tensor, or tuples, lists and dicts of them (other values as they
    are)."""
    if isinstance(tree, torch.Tensor):
        return _to_device(tree, device)
    if isinstance(tree, (tuple, list)):
        return type(tree)(to_device(t, device) for t in tree)
    if isinstance(tree, dict):
        return {k: to_device(v, device) for k, v in tree.items()}
    return tree


def shape_key(x) -> tuple:
    """The shapes of a batch's inputs, hashable (a tensor's shape; for several inputs, theirs in order)."""
    if isinstance(x, torch.Tensor):
        return tuple(x.shape)
    if isinstance(x, dict):
        return tuple((k, shape_key(v)) for k, v in x.items())
    if isinstance(x, (tuple, list)):
        return tuple(shape_key(v) for v in x)
    return ()


def _tensors_in(tree) -> bool:
    if isinstance(tree, torch.Tensor):
        return True
    if isinstance(tree, (tuple, list)):
        return any(_tensors_in(t) for t in tree)
    return isinstance(tree, dict) and any(_tensors_in(v) for v in tree.values())


def _kind(value) -> str:
    if isinstance(value, (tuple, list)):
        return f"a {type(value).__name__} of {len(value)} item{'' if len(value) == 1 else 's'}"
    return f"{type(value).__module__.split('.')[0]}.{type(value).__name__}" if type(value).__module__ not in (
        "builtins",) else type(value).__name__


def made_batch(make: Callable, batch_size: int, generator: torch.Generator, where: str) -> Batch:
    """One (inputs, targets) of a model file's make_batch(batch_size, generator), checked; UserError otherwise: two
    items, the inputs tensors (a tensor, a tuple or a dict of them), the targets a tensor, and `batch_size` samples in
    the targets (their first dimension: a run's samples/s counts them)."""
    from ..basics.errors import UserError
    from ..basics.formatting import error_line

    try:
        made = make(batch_size, generator)
    except (Exception, SystemExit) as exc:
        raise UserError(f"make_batch in {where} raised {error_line(exc, 200)}; fix it and try again.") from exc
    if not (isinstance(made, (tuple, list)) and len(made) == 2):
        raise UserError(f"make_batch in {where} returned {_kind(made)}; return two items, (inputs, targets).")
    inputs, targets = made
    if not _tensors_in(inputs):
        raise UserError(f"make_batch in {where} returned inputs that are {_kind(inputs)}, not tensors; return a "
                        "torch tensor, or a tuple or a dict of them (torch.from_numpy converts numpy arrays).")
    if not isinstance(targets, torch.Tensor):
        raise UserError(f"make_batch in {where} returned targets that are {_kind(targets)}, not a tensor; return "
                        "a torch tensor of targets.")
    if targets.dim() == 0 or int(targets.shape[0]) != batch_size:
        got = f"{int(targets.shape[0]):,} samples" if targets.dim() else "a single number"
        raise UserError(f"make_batch({batch_size:,}, generator) in {where} returned targets for {got} (their first "
                        f"dimension); return {batch_size:,}, the batch size asked, so that samples/s counts what the "
                        "model trained on.")
    return inputs, targets


class MadeBatches:
    """Batches a user's model file makes itself (make_batch(batch_size, generator): several inputs, dicts, tokens):
    a few made at the start, on the device, and reused, as synthetic data is (compute only, no data cost)."""

    def __init__(self, make: Callable, batch_size: int, device: torch.device, seed: int, where: str,
                 pool: int = 4, epoch_samples: int = 1024):
        generator = torch.Generator().manual_seed(seed)
        self.batches = [to_device(made_batch(make, batch_size, generator, where), device) for _ in range(pool)]
        self.steps_per_epoch = max(1, epoch_samples // batch_size)

    def epoch(self) -> Iterator[Batch]:
        for i in range(self.steps_per_epoch):
            yield self.batches[i % len(self.batches)]

    raw_epoch = epoch

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


def endless(train):
    """Endless stream of training batches, epoch after epoch (a batch source's `epoch()` again and again)."""
    while True:
        yield from train.epoch()
