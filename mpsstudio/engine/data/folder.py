"""Image folders (one subfolder of images per class): validation with precise messages, and a lazy dataset.

inspect_folder reads every file's header once, so bad input is reported before a run starts; the dataset
decodes with PIL on demand (DataLoader workers can share the work) and always yields one size and mode.
"""

from __future__ import annotations

import os
import stat
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import torch

from ..basics.errors import UserError

if TYPE_CHECKING:
    from PIL import Image
from ..basics.formatting import plural
from ..basics.spec import DataSpec

# The image types torchvision's ImageFolder reads (its IMG_EXTENSIONS), kept here so that checking a folder
# does not import torchvision (~2 s).
IMG_EXTENSIONS = (".jpg", ".jpeg", ".png", ".ppm", ".bmp", ".pgm", ".tif", ".tiff", ".webp")

MAX_DEFAULT_SIDE = 224
GRAY_MODES = frozenset({"1", "L", "LA", "La", "I", "F", "I;16", "I;16L", "I;16B", "I;16N"})
_ARCHIVE_SUFFIXES = (".zip", ".tar", ".gz", ".tgz", ".bz2", ".xz", ".7z", ".rar")
_IGNORED_DIRS = frozenset({"__MACOSX"})
MAX_CHECK_DECODE_PIXELS = 40_000_000  # above this a BMP, TIFF or WebP is only verified by the check, not decoded
JPEG_TAIL_BYTES = 64  # where a JPEG's end-of-image marker must be (some writers pad a few bytes after it)
_SHOWN_NAMES = 3


@dataclass
class FolderReport:
    """What a class-per-subfolder image set holds, and how it will be decoded."""

    root: Path
    classes: list[str]
    counts: dict[str, int]                # readable images per class
    total: int                            # readable images in all
    skipped: list[Path]                   # unreadable files, left out
    modes: list[str]                      # PIL modes seen ("L", "RGB", "RGBA", "P", ...)
    sizes: list[tuple[int, int]]          # the most common (width, height) sizes, at most five
    channels: int                         # 1 when every image is grayscale, else 3 (all converted to RGB)
    target_size: tuple[int, int]          # (width, height) every image is decoded to
    mixed_sizes: bool = False
    loose_images: int = 0                 # images directly in root, ignored because they have no class
    files: list[tuple[Path, int]] = field(default_factory=list, repr=False)  # (readable image, class index)

    def summary(self, model_size: tuple[int, int] | None = None, model: str = "") -> str:
        """One line, e.g. "3 classes, 120 images (2 unreadable files skipped), mixed sizes will be resized to 64x64";
        with the size a model gets (models.input_size_for_folder), that size, said for it: the one number the
        window's banner and the folder's summary both show."""
        images = f"{self.total:,} images"
        if self.skipped:
            images += f" ({plural(len(self.skipped), 'unreadable file')} skipped)"
        w, h = model_size or self.target_size
        for_model = f" for {model}" if model_size and model else ""
        if self.mixed_sizes:
            size = f"mixed sizes will be resized to {w}x{h}{for_model}"
        elif self.sizes and self.sizes[0] != (w, h):
            size = f"{self.sizes[0][0]}x{self.sizes[0][1]} will be resized to {w}x{h}{for_model}"
        else:
            size = f"all {w}x{h}"
        colour = "grayscale" if self.channels == 1 else "RGB"
        others = [m for m in self.modes if m != ("L" if self.channels == 1 else "RGB")]
        if others:
            colour += f" (converted from {', '.join(others)})"
        return f"{len(self.classes)} classes, {images}, {size}, {colour}"

    def spec(self, image_size: int | None = None) -> DataSpec:
        """The samples this folder gives when decoded at image_size x image_size (None: its own target size)."""
        w, h = (image_size, image_size) if image_size else self.target_size
        return DataSpec("image", len(self.classes), channels=self.channels, height=h, width=w)

    @property
    def skipped_note(self) -> str | None:
        """E.g. "skipped 2 unreadable files (a.jpg, b.png)"; None when nothing was skipped."""
        if not self.skipped:
            return None
        names = [p.name for p in self.skipped[:_SHOWN_NAMES]]
        more = ", ..." if len(self.skipped) > _SHOWN_NAMES else ""
        return f"skipped {plural(len(self.skipped), 'unreadable file')} ({', '.join(names)}{more})"


def _is_image_name(name: str) -> bool:
    return not name.startswith(".") and name.lower().endswith(IMG_EXTENSIONS)


def _check_root(path: str | Path) -> Path:
    root = Path(path).expanduser()
    if not root.exists():
        raise UserError(f"The folder {root} does not exist; check the path and try again.")
    if not root.is_dir():
        if root.name.lower().endswith(_ARCHIVE_SUFFIXES):
            raise UserError(f"{root} is an archive, not a folder; unpack it and give the folder "
                            "that has one subfolder of images per class.")
        raise UserError(f"{root} is a file, not a folder; give a folder with one subfolder of images per class.")
    return root


def _class_dirs(root: Path) -> list[Path]:
    """Visible subfolders, sorted by name (as torchvision's find_classes does)."""
    try:
        entries = sorted(os.scandir(root), key=lambda e: e.name)
    except OSError as err:
        raise UserError(f"Could not read the folder {root} ({err.strerror or err}); check its permissions.") from err
    return [Path(e.path) for e in entries
            if e.is_dir() and not e.name.startswith(".") and e.name not in _IGNORED_DIRS]


def _loose_images(root: Path) -> int:
    return sum(1 for e in os.scandir(root) if e.is_file() and _is_image_name(e.name))


def _inode(path: str | Path) -> tuple[int, int] | None:
    """The (device, inode) a path leads to (links followed); None when it leads nowhere."""
    try:
        st = os.stat(path)
    except (OSError, ValueError):
        return None
    return st.st_dev, st.st_ino


def _image_files(folder: Path, seen_dirs: set, seen_files: set) -> list[Path]:
    """Image files under folder (recursively, like ImageFolder), in a stable order.

    Links are followed (a class folder may link to images kept elsewhere), but each folder and each file is
    taken once for the whole dataset: a link back up the tree (a loop) or into another class folder would
    count the same images again, under the wrong class, and put copies in both splits. Only regular files
    are listed (a pipe named img.png would block the check forever); a dangling link stays listed, so it is
    skipped and counted as unreadable."""
    found = []
    for dirpath, dirnames, filenames in os.walk(folder, followlinks=True):
        keep = []
        for d in sorted(dirnames):
            if d.startswith(".") or d in _IGNORED_DIRS:
                continue
            node = _inode(os.path.join(dirpath, d))
            if node is None or node in seen_dirs:
                continue
            seen_dirs.add(node)
            keep.append(d)
        dirnames[:] = keep
        for f in sorted(filenames):
            if not _is_image_name(f):
                continue
            path = os.path.join(dirpath, f)
            try:
                st = os.stat(path)
            except (OSError, ValueError):
                found.append(Path(path))  # a dangling link or an unreadable entry: skipped and counted
                continue
            if not stat.S_ISREG(st.st_mode) or (st.st_dev, st.st_ino) in seen_files:
                continue
            seen_files.add((st.st_dev, st.st_ino))
            found.append(Path(path))
    return found


def _quoted(names: Sequence[str]) -> str:
    return ", ".join(f"'{n}'" for n in names)


def _find_classes(root: Path) -> tuple[list[str], list[list[Path]], int]:
    """Class names, the image files of each, and the number of loose images in root; errors for bad layouts."""
    dirs = _class_dirs(root)
    loose = _loose_images(root)
    if not dirs:
        if loose:
            raise UserError(f"{root} has {plural(loose, 'image')} directly in it but no class subfolders; "
                            f"put each class's images in a subfolder named after it (e.g. {root / 'cats'}).")
        raise UserError(f"{root} has no class subfolders; give a folder with one subfolder of images per class.")
    if len(dirs) == 1:
        raise UserError(f"{root} has only one class folder ('{dirs[0].name}'); a classifier needs at least two, "
                        "so add another subfolder of images.")
    seen_dirs = {node for node in map(_inode, [root, *dirs]) if node is not None}
    seen_files: set = set()
    files = [_image_files(d, seen_dirs, seen_files) for d in dirs]
    empty = [d.name for d, f in zip(dirs, files) if not f]
    if len(empty) == len(dirs):
        raise UserError(f"None of the class folders in {root} has images; add images "
                        f"({', '.join(IMG_EXTENSIONS)}) to each class folder.")
    if empty:
        what = "class folder" if len(empty) == 1 else "class folders"
        verb = "has" if len(empty) == 1 else "have"
        raise UserError(f"The {what} {_quoted(empty)} in {root} {verb} no images; add some "
                        f"({', '.join(IMG_EXTENSIONS)}) or remove {'it' if len(empty) == 1 else 'them'}.")
    return [d.name for d in dirs], files, loose


def _read_header(path: Path) -> tuple[str, tuple[int, int]] | None:
    """(mode, (width, height)) of an image that decodes, or None when PIL cannot open or decode it.

    A PNG's chunks are verified (their checksums run to the end of the file); a JPEG must end with its
    end-of-image marker (a truncated copy or download does not; decoding every JPEG would make the check ~30x
    slower); other formats are decoded whole unless they are huge. A file that passes and still fails to
    decode stops the run with a sentence naming it (ImageFiles)."""
    from PIL import Image  # here, not at import: a run of synthetic data in another environment needs no Pillow

    try:
        with Image.open(path) as img:
            mode, size = img.mode, img.size
            if img.format == "JPEG" and img.fp is not None:
                img.fp.seek(-JPEG_TAIL_BYTES, os.SEEK_END)
                if b"\xff\xd9" not in img.fp.read():
                    return None
            elif img.format == "PNG" or size[0] * size[1] > MAX_CHECK_DECODE_PIXELS:
                img.verify()
            else:
                img.load()
        return mode, size
    except Exception:  # PIL raises many kinds (OSError, SyntaxError, ValueError, DecompressionBombError...)
        return None


def _target_size(sizes: Counter, image_size: int | None) -> tuple[int, int]:
    if image_size is not None:
        return image_size, image_size
    (w, h), _ = sizes.most_common(1)[0]
    scale = min(1.0, MAX_DEFAULT_SIDE / max(w, h))
    return max(1, round(w * scale)), max(1, round(h * scale))


def inspect_folder(path: str | Path, *, image_size: int | None = None,
                   progress: Callable[[str, float], None] | None = None) -> FolderReport:
    """Check a class-per-subfolder image set; raises UserError naming exactly what is wrong.

    image_size: decode every image to image_size x image_size; default the most common size, capped at 224.
    """
    if image_size is not None and image_size < 1:
        raise UserError(f"The image size must be a positive number of pixels, not {image_size}.")
    root = _check_root(path)
    classes, files, loose = _find_classes(root)
    n_files = sum(len(f) for f in files)
    counts = dict.fromkeys(classes, 0)
    unreadable: Counter[str] = Counter()
    readable: list[tuple[Path, int]] = []
    skipped: list[Path] = []
    modes: Counter = Counter()
    sizes: Counter = Counter()
    done = 0
    for label, (name, paths) in enumerate(zip(classes, files)):
        for p in paths:
            header = _read_header(p)
            done += 1
            if progress is not None and (done % 200 == 0 or done == n_files):
                progress(f"Checking images in {root.name} ({done:,} of {n_files:,})", done / n_files)
            if header is None:
                skipped.append(p)
                unreadable[name] += 1
                continue
            modes[header[0]] += 1
            sizes[header[1]] += 1
            counts[name] += 1
            readable.append((p, label))
    if not readable:
        raise UserError(f"None of the {n_files:,} image files in {root} could be read; "
                        "check that they are valid images.")
    dead = [n for n in classes if counts[n] == 0]
    if dead:
        raise UserError(f"None of the image files in class folder {_quoted(dead)} of {root} could be read "
                        f"({unreadable[dead[0]]:,} tried); replace them with valid images or remove the folder.")
    return FolderReport(
        root=root, classes=classes, counts=counts, total=len(readable), skipped=skipped,
        modes=sorted(modes), sizes=[s for s, _ in sizes.most_common(5)],
        channels=1 if set(modes) <= GRAY_MODES else 3, target_size=_target_size(sizes, image_size),
        mixed_sizes=len(sizes) > 1, loose_images=loose, files=readable,
    )


def _convert(img: Image.Image, channels: int) -> Image.Image:
    """Any PIL mode to "L" (channels 1) or "RGB" (channels 3)."""
    from PIL import Image

    if img.mode.startswith("I;16"):
        img = Image.fromarray((np.asarray(img, dtype=np.uint32) >> 8).astype(np.uint8))
    if channels == 1:
        return img.convert("L")
    if img.mode == "P" and "transparency" in img.info:
        img = img.convert("RGBA")
    return img.convert("RGB")


def decode_image(path: str | Path, size: tuple[int, int], channels: int) -> torch.Tensor:
    """One image file as a uint8 (channels, height, width) tensor of the given (width, height)."""
    from PIL import Image

    with Image.open(path) as opened:
        if opened.format == "JPEG":
            opened.draft("L" if channels == 1 else "RGB", size)  # decode large JPEGs at a reduced scale
        img = _convert(opened, channels)
        if img.size != size:
            img = img.resize(size, Image.Resampling.BILINEAR)
        array = np.array(img, dtype=np.uint8)
    if array.ndim == 2:
        array = array[:, :, None]
    return torch.from_numpy(array).permute(2, 0, 1).contiguous()


class ImageFiles(torch.utils.data.Dataset):
    """Lazy image-folder samples: (uint8 CHW tensor, label), decoded on demand (picklable for DataLoader workers)."""

    def __init__(self, files: Sequence[str | Path], labels: Sequence[int], size: tuple[int, int], channels: int):
        self.files = [str(f) for f in files]
        self.targets = [int(t) for t in labels]
        self.size: tuple[int, int] = (int(size[0]), int(size[1]))
        self.channels = channels

    def __len__(self) -> int:
        return len(self.files)

    def __getitem__(self, index: int) -> tuple[torch.Tensor, int]:
        path = self.files[index]
        try:
            image = decode_image(path, self.size, self.channels)
        except Exception as err:  # a file that passed inspection but fails to decode (e.g. truncated JPEG)
            raise UserError(f"Could not decode the image {path} ({err}); remove or replace it and try again.") from err
        return image, self.targets[index]


def split_indices(labels: Sequence[int], val_fraction: float, seed: int) -> tuple[list[int], list[int]]:
    """A seeded stratified split: about val_fraction of each class for validation, at least one image overall
    when val_fraction > 0 and some class has two or more, and never a class's last training image."""
    if val_fraction <= 0:
        return list(range(len(labels))), []
    g = torch.Generator().manual_seed(seed)
    by_class: dict[int, list[int]] = {}
    for i, label in enumerate(labels):
        by_class.setdefault(label, []).append(i)
    shuffled = {c: [idx[j] for j in torch.randperm(len(idx), generator=g).tolist()]
                for c, idx in sorted(by_class.items())}
    n_val = {c: min(len(idx) - 1, round(len(idx) * val_fraction)) for c, idx in shuffled.items()}
    if sum(n_val.values()) == 0:
        biggest = max(shuffled, key=lambda c: len(shuffled[c]))
        n_val[biggest] = min(1, len(shuffled[biggest]) - 1)
    val = sorted(i for c, idx in shuffled.items() for i in idx[:n_val[c]])
    train = sorted(i for c, idx in shuffled.items() for i in idx[n_val[c]:])
    return train, val


def estimate_mean_std(dataset: ImageFiles, indices: Sequence[int], limit: int = 64) -> tuple[tuple[float, ...],
                                                                                              tuple[float, ...]]:
    """Per-channel mean and std in 0..1 units from up to `limit` evenly spread images."""
    step = max(1, len(indices) // limit)
    picked = list(indices)[::step][:limit]
    pixels = torch.stack([dataset[i][0] for i in picked]).float().div_(255)
    mean = pixels.mean(dim=(0, 2, 3))
    std = pixels.std(dim=(0, 2, 3)).clamp_min(1e-2)  # a blank image set must not divide by zero
    return tuple(round(v, 4) for v in mean.tolist()), tuple(round(v, 4) for v in std.tolist())


FOLDER_VAL_FRACTION = 0.1  # of each class, for validation (datasets.load_dataset's default)


@dataclass
class FolderPlan:
    """How a folder's images will be used: per class (name, images, training, validation), a few sample files
    per class to show, and the split's totals."""

    classes: list[tuple[str, int, int, int]]
    samples: dict[str, list[Path]]
    train: int
    val: int
    val_fraction: float
    seed: int


def plan(report: FolderReport, seed: int = 0, val_fraction: float = FOLDER_VAL_FRACTION,
         per_class: int = 4) -> FolderPlan:
    """The split a run with this seed will use (the same split_indices the loader calls) and sample files."""
    labels = [label for _, label in report.files]
    train_idx, val_idx = split_indices(labels, val_fraction, seed)
    val_of = [0] * len(report.classes)
    for i in val_idx:
        val_of[labels[i]] += 1
    rows: list = []
    samples: dict = {}
    for c, name in enumerate(report.classes):
        total = report.counts.get(name, 0)
        rows.append((name, total, total - val_of[c], val_of[c]))
    for path, label in report.files:
        bucket = samples.setdefault(report.classes[label], [])
        if len(bucket) < per_class:
            bucket.append(path)
    return FolderPlan(rows, samples, len(train_idx), len(val_idx), val_fraction, seed)
