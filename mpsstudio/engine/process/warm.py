"""A warm worker: one run process that runs a tune's candidates one after another, so each pays for its model,
optimizer and steps, not for a process, `import torch` and a GPU context (most of a candidate's time on a GPU).

What may share it: runs of the engine's own loop on a GPU (CUDA or MPS), where a run's memory figures are the
allocator's own (CUDA's peak is reset by each run, MPS counts live tensors), given back between runs
(child._between_jobs). A process of its own still serves what a process cannot undo or would measure wrongly:
torch.compile (its caches and guards), the CPU (its memory figure is the process's resident memory, which keeps what
earlier runs freed; its thread pools), another Python, a script, several GPUs, a run that saves its model. A run
that did not finish (failed, stopped, timed out, died) ends the process; the next run starts a fresh one. One
process at a time: a run on another device, or one that needs its own process, ends the worker first, so nothing of
another run sits beside a measured one.

Use it as a context manager (`with Warm() as warm: run_point(config, warm=warm)`): it ends its process at the end.
"""

from __future__ import annotations

import threading

from ..basics.config import RunConfig
from . import handles
from .handles import RunProcess


def shares(config: RunConfig) -> bool:
    """Whether a run may share a warm worker (the module's rule)."""
    return (config.device.split(":")[0] in ("cuda", "mps") and not config.compile and not config.is_script
            and not config.distributed and not config.python)


class Warm:
    """The warm worker of a series of runs (a tune): `process_for(config)` the process for a run it takes,
    `keep(proc, config)` it back after a finished run, `close()` at the end. Thread-safe."""

    def __init__(self) -> None:
        self._proc: RunProcess | None = None
        self._key: tuple | None = None
        self._lock = threading.Lock()
        self.started = 0  # processes started (benchmarks and tests)
        self.served = 0  # runs served

    @staticmethod
    def _key_of(config: RunConfig) -> tuple:
        """What runs sharing a worker must agree on: the device, the MPS fallback (read when torch loads), the
        framework (PyTorch's and MLX's allocators each keep their caches: neither's leaks into the other's figures)
        and, for MLX, its TF32 switch (read once a process)."""
        return (config.device, bool(config.mps_fallback), config.framework,
                bool(config.tf32) if config.framework == "mlx" else None)

    def takes(self, config: RunConfig) -> bool:
        return shares(config)

    def holds(self) -> bool:
        """Whether a worker waits for the next run."""
        with self._lock:
            return self._proc is not None

    def process_for(self, config: RunConfig) -> RunProcess:
        """The worker for this run: the one kept from the last run where it serves the same device, MPS fallback,
        framework and MLX TF32 switch (`_key_of`) and is alive, else a fresh one (the other ended first)."""
        with self._lock:
            proc, key = self._proc, self._key
            self._proc = self._key = None
        if proc is not None and (key != self._key_of(config) or not proc.alive()):
            _discard(proc)
            proc = None
        if proc is None:
            proc = handles.new_process(mps_fallback=config.mps_fallback)
            self.started += 1
        self.served += 1
        return proc

    def keep(self, proc: RunProcess, config: RunConfig) -> None:
        with self._lock:
            old, self._proc, self._key = self._proc, proc, self._key_of(config)
        if old is not None and old is not proc:
            _discard(old)

    def close(self) -> None:
        with self._lock:
            proc, self._proc, self._key = self._proc, None, None
        if proc is not None:
            _discard(proc)

    def __enter__(self) -> "Warm":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def _discard(proc: RunProcess) -> None:
    proc.end(grace_s=1.0, wait_s=0.5)
    proc.discard_output()
