"""Datasets as uint8 samples: generated (synthetic, shapes), downloaded (MNIST, Fashion-MNIST, CIFAR-10) and
image folders.

Every dataset that fits in memory comes back as TensorSamples, so the trainer can batch by indexing (or keep
the data resident on the device); image folders are decoded lazily. Normalisation happens on the device.
"""

from __future__ import annotations

import pickle
from collections.abc import Callable, Sized
from typing import cast
from dataclasses import dataclass, field
from pathlib import Path

import torch

from . import downloads
from ..basics import paths
from ..basics.config import DEFAULT_DATASET
from ..basics.errors import UserError
from ..basics.formatting import fmt_bytes, plural
from .cifar_files import read_cifar_batch, read_cifar_pickle
from .folder import FOLDER_VAL_FRACTION, FolderReport, ImageFiles, estimate_mean_std, inspect_folder, split_indices
from .shapes import SHAPE_CLASSES, SHAPES_SEED, SHAPES_SIDE, SHAPES_TRAIN, SHAPES_VAL, generate_shapes
from ..basics.spec import DataSpec


def _tvd():
    """torchvision.datasets, imported when a torchvision dataset is used (it costs ~2 s, a run's process
    for generated data or a folder does not need it)."""
    import torchvision.datasets

    return torchvision.datasets

__all__ = [
    "DEFAULT_DATASET", "DatasetInfo", "FolderReport", "LoadedDataset", "TensorSamples", "default_cache_dir",
    "inspect_folder", "list_datasets", "load_dataset",
]

Progress = Callable[[str, float], None]


@dataclass(frozen=True)
class DatasetInfo:
    """A dataset that can be chosen by name, with what it holds as plain fields (front ends show these)."""

    name: str
    what: str  # a few words: "handwritten digits"
    source: str  # "generated", "download" or "folder"
    spec: DataSpec | None = None  # None: shaped like the model's input (synthetic)
    train_size: int | None = None  # samples; None when it depends on the run
    val_size: int | None = None
    download_bytes: int | None = None  # the download on first use; None when nothing is downloaded
    note: str = ""

    @property
    def description(self) -> str:
        """One line, e.g. "handwritten digits, 1x28x28, 10 classes, 60,000 + 10,000 images (11.1 MiB download)"."""
        parts = [self.what]
        if self.spec is not None:
            parts.append(f"{self.spec.channels}x{self.spec.height}x{self.spec.width}, {self.spec.num_classes} classes")
        if self.train_size is not None:
            parts.append(f"{self.train_size:,} + {self.val_size or 0:,} images")
        text = ", ".join(parts)
        if self.download_bytes:
            text += f" ({fmt_bytes(self.download_bytes)} download)"
        return text + (f"; {self.note}" if self.note else "")


def _image_spec(channels: int, side: int, classes: int = 10) -> DataSpec:
    return DataSpec("image", classes, channels=channels, height=side, width=side)


_SPECS = {"shapes": _image_spec(1, SHAPES_SIDE, len(SHAPE_CLASSES)), "mnist": _image_spec(1, 28),
          "fashion_mnist": _image_spec(1, 28), "cifar10": _image_spec(3, 32)}
_DATASETS = (
    DatasetInfo("synthetic", "random images or tokens shaped for the model", "generated",
                note="pure compute, no learning"),
    DatasetInfo("shapes", "10 kinds of drawn shapes", "generated", _SPECS["shapes"], SHAPES_TRAIN, SHAPES_VAL,
                note="offline, learns in seconds (the default)"),
    # download sizes: the published sizes of the .gz / .tar.gz archives torchvision fetches, added up
    DatasetInfo("mnist", "handwritten digits", "download", _SPECS["mnist"], 60_000, 10_000, 11_594_722),
    DatasetInfo("fashion_mnist", "clothing photos", "download", _SPECS["fashion_mnist"], 60_000, 10_000, 30_878_645),
    DatasetInfo("cifar10", "small colour photos", "download", _SPECS["cifar10"], 50_000, 10_000, 170_498_071),
)
_ALIASES = {"fashionmnist": "fashion_mnist", "fmnist": "fashion_mnist", "cifar_10": "cifar10"}


def list_datasets() -> list[DatasetInfo]:
    """The named datasets (a folder path is the other choice)."""
    return list(_DATASETS)


class TensorSamples(torch.utils.data.Dataset):
    """In-memory samples: x uint8 (N,C,H,W) for images or int64 (N,L) for tokens; y int64 (N,)."""

    def __init__(self, x: torch.Tensor, y: torch.Tensor):
        if x.shape[0] != y.shape[0]:
            raise ValueError(f"{x.shape[0]} samples but {y.shape[0]} labels")
        if x.dtype not in (torch.uint8, torch.int64) or y.dtype != torch.int64:
            raise ValueError(f"expected uint8/int64 samples and int64 labels, got {x.dtype} and {y.dtype}")
        self.x = x
        self.y = y

    def __len__(self) -> int:
        return int(self.x.shape[0])

    def __getitem__(self, index: int) -> tuple[torch.Tensor, int]:
        return self.x[index], int(self.y[index])


@dataclass
class LoadedDataset:
    """A dataset ready for the trainer: splits, class names and normalisation."""

    name: str
    spec: DataSpec
    train: torch.utils.data.Dataset
    val: torch.utils.data.Dataset | None
    classes: list[str]
    mean: tuple[float, ...]  # per channel, 0..1 units (images); () for tokens
    std: tuple[float, ...]
    notes: list[str] = field(default_factory=list)
    described: str = ""  # its summary line where its own (a text dataset's: token_rows.load_text)
    text: dict | None = None  # a text dataset's layout and token counts (token_rows.load_text)

    @property
    def train_count(self) -> int:
        """Training samples (every split here is a sized dataset)."""
        return len(cast(Sized, self.train))

    def summary(self) -> str:
        """One line: "shapes: 6,000 training + 1,000 validation 1x28x28 images, 10 classes"."""
        if self.described:
            return self.described
        counts = f"{self.train_count:,} training"
        if self.val is not None:
            counts += f" + {len(cast(Sized, self.val)):,} validation"
        s = self.spec
        if s.kind == "image":
            what = f"{s.channels}x{s.height}x{s.width} images"
        else:
            what = f"sequences of {s.seq_len} tokens (vocabulary {s.vocab_size:,})"
        return f"{self.name}: {counts} {what}, {s.num_classes:,} classes"


def default_cache_dir() -> Path:
    """Where downloaded datasets live: the user cache folder of MPS Studio."""
    return paths.cache_dir() / "datasets"


# ---------------------------------------------------------------------------------------------- synthetic

SYNTHETIC_UNIQUE = 256  # distinct images, repeated: 1,024 of 3x224x224 took ~0.45 s of Run -> first step


def _load_synthetic(model_spec: DataSpec | None, size: int, seed: int) -> LoadedDataset:
    """Random samples shaped like the model's input, random labels: measures compute only."""
    if model_spec is None:
        raise UserError("The synthetic dataset takes its shape from the model; choose a model first.")
    if size < 1:
        raise UserError(f"The synthetic dataset needs at least one sample, not {size}.")
    g = torch.Generator().manual_seed(seed)
    y = torch.randint(0, max(1, model_spec.num_classes), (size,), generator=g)
    if model_spec.kind == "image":
        shape = (min(size, SYNTHETIC_UNIQUE), *model_spec.sample_shape)
        x = torch.randint(0, 256, shape, generator=g, dtype=torch.uint8)[torch.arange(size) % shape[0]]
        mean, std = (0.5,) * model_spec.channels, (0.2887,) * model_spec.channels  # uniform 0..1
    else:
        x = torch.randint(0, max(1, model_spec.vocab_size), (size, model_spec.seq_len), generator=g)
        mean, std = (), ()
    classes = [str(i) for i in range(model_spec.num_classes)]
    return LoadedDataset("synthetic", model_spec, TensorSamples(x, y), None, classes, mean, std,
                         ["random data: throughput only, accuracy means nothing"])


# ---------------------------------------------------------------------------------------------- shapes

def _load_shapes() -> LoadedDataset:
    train = TensorSamples(*generate_shapes(SHAPES_TRAIN, SHAPES_SEED))
    val = TensorSamples(*generate_shapes(SHAPES_VAL, SHAPES_SEED + 1))
    pixels = train.x.float().div_(255)
    mean, std = round(pixels.mean().item(), 4), round(pixels.std().item(), 4)
    return LoadedDataset("shapes", _SPECS["shapes"], train, val, list(SHAPE_CLASSES), (mean,), (std,), [])


# ---------------------------------------------------------------------------------------------- MNIST family

@dataclass(frozen=True)
class _Mnist:
    name: str          # our name
    title: str         # for messages
    tv_class: str      # torchvision class (also its folder name under the cache dir)
    mean: float
    std: float


_MNISTS = {
    "mnist": _Mnist("mnist", "MNIST", "MNIST", 0.1307, 0.3081),
    "fashion_mnist": _Mnist("fashion_mnist", "Fashion-MNIST", "FashionMNIST", 0.2860, 0.3530),
}


def _ensure_mnist_files(info: _Mnist, root: Path, download: bool, progress: Progress | None) -> list[str]:
    """Make sure the four idx-ubyte files are in root/<Class>/raw (extracting or downloading .gz as needed)."""
    tv = getattr(_tvd(), info.tv_class)
    raw = root / info.tv_class / "raw"
    resources = [(name, md5) for name, md5 in tv.resources]
    missing = [(name, md5) for name, md5 in resources if not (raw / name.removesuffix(".gz")).is_file()]
    if not missing:
        return []
    if not download and not all((raw / name).is_file() for name, _ in missing):
        files = ", ".join(name.removesuffix(".gz") for name, _ in missing)
        raise UserError(f"{info.title} is not downloaded: {files} (or the .gz files) are expected in {raw}; "
                        "allow downloads or put the files there.")
    notes = []
    for i, (name, md5) in enumerate(missing):
        archive = raw / name
        if not archive.is_file():
            urls = [mirror + name for mirror in tv.mirrors]
            span = (i / len(missing), (i + 1) / len(missing))
            downloads.download(urls, archive, md5=md5, label=info.title, where=raw, progress=progress, span=span)
            notes.append(f"downloaded {info.title} to {raw}")
        downloads.extract_gzip(archive, raw / name.removesuffix(".gz"), info.title)
        archive.unlink()
    return notes[:1]


def _load_mnist_like(info: _Mnist, root: Path, download: bool, progress: Progress | None) -> LoadedDataset:
    notes = _ensure_mnist_files(info, root, download, progress)
    tv = getattr(_tvd(), info.tv_class)
    try:
        train_set, test_set = tv(str(root), train=True, download=False), tv(str(root), train=False, download=False)
    except (AssertionError, RuntimeError, TypeError, ValueError, OSError) as err:
        raw = root / info.tv_class / "raw"
        raise UserError(f"The {info.title} files in {raw} are damaged ({str(err) or 'bad format'}); "
                        "delete them and try again.") from err
    splits = []
    for part in (train_set, test_set):
        x = part.data.to(torch.uint8).unsqueeze(1).contiguous()
        splits.append(TensorSamples(x, part.targets.to(torch.int64)))
    _, _, height, width = splits[0].x.shape
    spec = DataSpec("image", len(tv.classes), channels=1, height=height, width=width)
    return LoadedDataset(info.name, spec, splits[0], splits[1], list(tv.classes), (info.mean,), (info.std,), notes)


# ---------------------------------------------------------------------------------------------- CIFAR-10

_CIFAR_DIR = "cifar-10-batches-py"
_CIFAR_TRAIN = [f"data_batch_{i}" for i in range(1, 6)]
_CIFAR_FILES = [*_CIFAR_TRAIN, "test_batch", "batches.meta"]
_CIFAR_MEAN, _CIFAR_STD = (0.4914, 0.4822, 0.4465), (0.2470, 0.2435, 0.2616)
def _ensure_cifar_files(root: Path, download: bool, progress: Progress | None) -> list[str]:
    """Make sure root/cifar-10-batches-py holds the batches (extracting or downloading the archive as needed)."""
    folder = root / _CIFAR_DIR
    if all((folder / f).is_file() for f in _CIFAR_FILES):
        return []
    archive = next((p for p in (root / _tvd().CIFAR10.filename, folder / _tvd().CIFAR10.filename) if p.is_file()), None)
    notes = []
    if archive is None:
        if not download:
            raise UserError(f"CIFAR-10 is not downloaded: {', '.join(_CIFAR_FILES)} (or {_tvd().CIFAR10.filename}) "
                            f"are expected in {folder}; allow downloads or put the files there.")
        archive = downloads.download([_tvd().CIFAR10.url], root / _tvd().CIFAR10.filename, md5=_tvd().CIFAR10.tgz_md5,
                                     label="CIFAR-10", where=folder, progress=progress)
        notes.append(f"downloaded CIFAR-10 to {folder}")
    if progress is not None:
        progress("Extracting CIFAR-10", 1.0)
    extracted = downloads.extract_tar(archive, _CIFAR_DIR, root, "CIFAR-10")
    archive.unlink(missing_ok=True)  # the archive may have been inside the folder just replaced
    missing = [f for f in _CIFAR_FILES if not (extracted / f).is_file()]
    if missing:
        raise UserError(f"The CIFAR-10 archive lacks {', '.join(missing)}; delete {extracted} and try again.")
    return notes


def _load_cifar10(root: Path, download: bool, progress: Progress | None) -> LoadedDataset:
    notes = _ensure_cifar_files(root, download, progress)
    folder = root / _CIFAR_DIR
    current = folder
    try:
        parts = []
        for names in (_CIFAR_TRAIN, ["test_batch"]):
            xs, ys = [], []
            for name in names:
                current = folder / name
                x, y = read_cifar_batch(current)
                xs.append(x)
                ys.append(y)
            parts.append(TensorSamples(torch.cat(xs), torch.cat(ys)))
        current = folder / "batches.meta"
        classes = [str(c) for c in read_cifar_pickle(current)["label_names"]]
    except (pickle.UnpicklingError, EOFError, KeyError, ValueError, TypeError, AttributeError, OSError) as err:
        raise UserError(f"The CIFAR-10 file {current} is damaged or not a CIFAR-10 batch ({err}); "
                        f"delete {folder} and try again.") from err
    return LoadedDataset("cifar10", _SPECS["cifar10"], parts[0], parts[1], classes, _CIFAR_MEAN, _CIFAR_STD, notes)


# ---------------------------------------------------------------------------------------------- folders

def _load_folder(path: str, image_size: int | None, seed: int, val_fraction: float,
                 progress: Progress | None) -> LoadedDataset:
    report = inspect_folder(path, image_size=image_size, progress=progress)
    files, labels = zip(*report.files)
    train_idx, val_idx = split_indices(labels, val_fraction, seed)
    w, h = report.target_size

    def subset(indices: list[int]) -> ImageFiles:
        return ImageFiles([files[i] for i in indices], [labels[i] for i in indices], (w, h), report.channels)

    train = subset(train_idx)
    val = subset(val_idx) if val_idx else None
    mean, std = estimate_mean_std(train, range(len(train)))
    notes = [report.summary()]
    if report.skipped_note:
        notes.append(report.skipped_note)
    if report.loose_images:
        loose = plural(report.loose_images, "image")
        notes.append(f"ignored {loose} directly in {report.root} (not in a class folder)")
    if val is None:
        notes.append("no validation split (too few images or val_fraction 0)")
    spec = DataSpec("image", len(report.classes), channels=report.channels, height=h, width=w)
    name = report.root.resolve().name or str(report.root)
    return LoadedDataset(name, spec, train, val, list(report.classes), mean, std, notes)


# ---------------------------------------------------------------------------------------------- entry point

def _canonical(name: str) -> str:
    key = name.strip().lower().replace("-", "_")
    return _ALIASES.get(key, key)


def _looks_like_path(name: str) -> bool:
    return any(sep in name for sep in ("/", "\\")) or name.startswith(("~", "."))


def _unknown(name: str) -> UserError:
    names = ", ".join(d.name for d in _DATASETS)
    return UserError(f"Unknown dataset '{name}'; choose one of: {names} "
                     "or give the path to a folder with one subfolder of images per class.")


def check_name(name: str) -> None:
    """UserError (load_dataset's sentence) for a name that is neither a dataset here nor a path; a path is checked
    when it is loaded."""
    text = str(name)
    key = _canonical(text)
    if key in ("synthetic", "shapes", "cifar10") or key in _MNISTS:
        return
    if not text.strip() or not (Path(text).expanduser().exists() or _looks_like_path(text)):
        raise _unknown(text)


def load_dataset(name_or_path: str, *, model_spec: DataSpec | None = None, image_size: int | None = None,
                 cache_dir: Path | None = None, download: bool = True, progress: Progress | None = None,
                 seed: int = 0, val_fraction: float = FOLDER_VAL_FRACTION, synthetic_size: int = 1024) -> LoadedDataset:
    """Load a named dataset or a class-per-subfolder image folder; raises UserError for bad input.

    model_spec shapes 'synthetic'; image_size sets the decode size of folders; cache_dir holds downloads;
    progress(message, fraction) reports downloads and folder checks; seed and val_fraction split folders.
    """
    text = str(name_or_path)
    key = _canonical(text)
    root = Path(cache_dir) if cache_dir is not None else default_cache_dir()
    if key == "synthetic":
        return _load_synthetic(model_spec, synthetic_size, seed)
    if key == "shapes":
        return _load_shapes()
    if key in _MNISTS:
        return _load_mnist_like(_MNISTS[key], root, download, progress)
    if key == "cifar10":
        return _load_cifar10(root, download, progress)
    if not text.strip():
        raise _unknown(text)
    if Path(text).expanduser().exists() or _looks_like_path(text):
        return _load_folder(text, image_size, seed, val_fraction, progress)
    raise _unknown(text)
