"""CIFAR-10's batch files read without running anything in them: they are Python pickles, and a pickle can name any
function to call while it loads. The unpickler here allows plain containers and numpy arrays only, so a file that
asks for anything else is refused (pickle.UnpicklingError) instead of obeyed."""

from __future__ import annotations

import pickle
from pathlib import Path

import numpy as np
import torch

_NUMPY_RECONSTRUCT = np.zeros(0).__reduce__()[0]  # numpy.(_)core.multiarray._reconstruct, whichever numpy has


def _latin1_encode(text: str, encoding: str = "latin1") -> bytes:
    """What pickles written by Python 3 at protocol 2 call to rebuild bytes (_codecs.encode), latin-1 only."""
    if encoding not in ("latin1", "latin-1"):
        raise pickle.UnpicklingError(f"encoding {encoding!r} is not allowed")
    return text.encode("latin1")


class _CifarUnpickler(pickle.Unpickler):
    """Unpickles only plain containers and numpy arrays: nothing in the file can run code."""

    def find_class(self, module: str, name: str):
        if name == "_reconstruct" and module in ("numpy.core.multiarray", "numpy._core.multiarray"):
            return _NUMPY_RECONSTRUCT
        if (module, name) == ("numpy", "ndarray"):
            return np.ndarray
        if (module, name) == ("numpy", "dtype"):
            return np.dtype
        if (module, name) == ("_codecs", "encode"):
            return _latin1_encode
        raise pickle.UnpicklingError(f"{module}.{name} is not allowed in a CIFAR-10 batch file")


def read_cifar_pickle(path: Path) -> dict:
    """A CIFAR-10 pickle (a batch or batches.meta) as a dict with text keys; UnpicklingError for anything else."""
    with open(path, "rb") as f:
        data = _CifarUnpickler(f, encoding="latin1").load()
    if not isinstance(data, dict):
        raise pickle.UnpicklingError("not a dictionary")
    return {k.decode("latin1") if isinstance(k, bytes) else k: v for k, v in data.items()}


def read_cifar_batch(path: Path) -> tuple[torch.Tensor, torch.Tensor]:
    """A CIFAR-10 batch file as (uint8 images N x 3 x 32 x 32, int64 labels); ValueError for other shapes."""
    batch = read_cifar_pickle(path)
    data = np.asarray(batch["data"], dtype=np.uint8)
    labels = np.asarray(batch["labels"], dtype=np.int64)
    if data.ndim != 2 or data.shape[1] != 3 * 32 * 32 or data.shape[0] != labels.shape[0]:
        raise ValueError(f"unexpected shapes {data.shape} and {labels.shape}")
    return torch.from_numpy(data.reshape(-1, 3, 32, 32).copy()), torch.from_numpy(labels.copy())
