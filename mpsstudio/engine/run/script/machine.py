"""The machine as a script sees it in its run: the run's device and no other accelerator, and its own processes
started as plain Python starts them.

A script that picks "the best available" device (`torch.accelerator.current_accelerator()`, `torch.cuda.is_available()`,
`torch.backends.mps.is_available()`) must train on the run's device: in a run for the CPU the process reports no
accelerator, as PyTorch built without one does (`current_accelerator()` None, `is_available()` False, no devices), and
`CUDA_VISIBLE_DEVICES` is empty for what the script starts; in a run for cuda or mps the script sees that device and
no other kind. A script that names a device itself still can: its run then says so (tracker.wrong_device).

Its DataLoader workers start as under `python train.py`: with the platform's default start method (fork on Linux
up to Python 3.13, spawn on macOS), not the spawn the run process itself was started with."""

from __future__ import annotations

import ast
import functools
import multiprocessing
import os
from contextlib import contextmanager

import torch

START_METHOD_VAR = "MPSSTUDIO_MP_START_METHOD"  # the start method under test (the frozen app's smoke test sets it too)
ACCELERATORS = ("cuda", "mps")


def _stand_in(original, value):
    """A function answering `value`, shaped like `original`: its name, doc and `__wrapped__` (torch._dynamo reads
    `torch.backends.mps.is_available.__wrapped__` when it loads), and `cache_clear` where it is lru_cached."""
    def stand_in(*args, **kwargs):
        return value
    functools.update_wrapper(stand_in, original)
    if hasattr(original, "cache_clear"):
        stand_in.cache_clear = lambda: None  # type: ignore[attr-defined]
    return stand_in


def _hiding(kind: str) -> list[tuple[object, str, object]]:
    """(owner, attribute, answer) for what reports the accelerator `kind` to a script."""
    if kind == "cuda":
        return [(torch.cuda, "is_available", False), (torch.cuda, "device_count", 0)]
    return [(torch.backends.mps, "is_available", False), (torch.mps, "is_available", False),
            (torch.mps, "device_count", 0)]


class Visibility:
    """While the script runs: the accelerators other than the run's device hidden from it (and from what it
    starts), and `cuda:N` made its current CUDA device. `lifted()` shows them again for MPS Studio's own calls."""

    def __init__(self, device: str):
        self.device = torch.device(device)
        self.hidden = [k for k in ACCELERATORS if k != self.device.type]
        self._saved: list[tuple[object, str, object]] = []
        self._visible_var: str | None = None
        self._patches = [p for kind in self.hidden for p in _hiding(kind)]
        if self.device.type == "cpu" and hasattr(torch, "accelerator"):
            self._patches += [(torch.accelerator, "current_accelerator", None),
                              (torch.accelerator, "is_available", False),
                              (torch.accelerator, "device_count", 0)]

    def __enter__(self) -> "Visibility":
        if "cuda" in self.hidden:
            self._visible_var = os.environ.get("CUDA_VISIBLE_DEVICES")
            os.environ["CUDA_VISIBLE_DEVICES"] = ""  # what the script starts (a CUDA not yet set up here, too)
        elif self.device.type == "cuda" and self.device.index:
            torch.cuda.set_device(self.device.index)  # "cuda" in the script is the run's GPU
        self._patch()
        return self

    def _patch(self) -> None:
        self._saved = []
        for owner, name, answer in self._patches:
            if hasattr(owner, name):
                original = getattr(owner, name)
                self._saved.append((owner, name, original))
                setattr(owner, name, _stand_in(original, answer))

    def _restore(self) -> None:
        for owner, name, original in reversed(self._saved):
            setattr(owner, name, original)
        self._saved = []

    def __exit__(self, *exc) -> None:
        self._restore()
        if "cuda" in self.hidden:
            if self._visible_var is None:
                os.environ.pop("CUDA_VISIBLE_DEVICES", None)
            else:
                os.environ["CUDA_VISIBLE_DEVICES"] = self._visible_var

    @contextmanager
    def lifted(self):
        """The machine as it is, for MPS Studio's own calls while the script runs (its environment record)."""
        self._restore()
        try:
            yield
        finally:
            self._patch()


def start_method() -> str:
    """The start method plain Python uses here: the platform's default (the first of get_all_start_methods), unless
    MPSSTUDIO_MP_START_METHOD names another."""
    methods = multiprocessing.get_all_start_methods()
    chosen = os.environ.get(START_METHOD_VAR, "").strip()
    return chosen if chosen in methods else methods[0]


@contextmanager
def plain_start_method():
    """multiprocessing's default start method as under `python SCRIPT` while the script runs (the run process was
    spawned, and a spawned process inherits spawn as its default)."""
    before = multiprocessing.get_start_method(allow_none=True)
    multiprocessing.set_start_method(start_method(), force=True)
    try:
        yield
    finally:
        multiprocessing.set_start_method(before, force=True)


def has_main_guard(path: str) -> bool | None:
    """Whether the script's top level has an `if __name__ == "__main__":` block (None: it could not be read)."""
    try:
        with open(path, "rb") as f:
            tree = ast.parse(f.read(), filename=path)
    except (OSError, SyntaxError, ValueError):
        return None
    for node in tree.body:
        if not isinstance(node, ast.If):
            continue
        for test in ast.walk(node.test):  # `__name__ == "__main__"`, also inside `and`/`or`
            if isinstance(test, ast.Compare):
                parts = [test.left, *test.comparators]
                if any(isinstance(n, ast.Name) and n.id == "__name__" for n in parts) and \
                        any(isinstance(n, ast.Constant) and n.value == "__main__" for n in parts):
                    return True
    return False


def workers_sentence(exc: BaseException, path: str) -> str | None:
    """The run's sentence when the script's DataLoader workers could not start because of how they start (spawn or
    forkserver import the script again in each worker): the cause and the fix. None for any other error."""
    text = str(exc)
    if "DataLoader worker" not in text or "exited unexpectedly" not in text:
        return None
    method = multiprocessing.get_start_method(allow_none=True) or start_method()
    if method == "fork" or has_main_guard(path) is not False:
        return None
    return (f"The script's DataLoader workers could not start: Python starts them with {method} here, which runs the "
            "script again in each worker, and the script has no `if __name__ == \"__main__\":` guard (python fails "
            "the same way). Put its training under that guard, or use num_workers=0.")
