"""The run process's own memory and the machine's swap, read once per measurement window (never per step).

On macOS the process's memory is its physical footprint, the figure Activity Monitor's Memory column shows: on
Apple silicon the GPU's buffers are the process's memory too, and the footprint counts them where the resident
size may not. It comes from `proc_pid_rusage(pid, RUSAGE_INFO_V0, &info)` (libproc.h; `struct rusage_info_v0` in
<sys/resource.h>: a 16-byte uuid then ten uint64 fields, `ri_phys_footprint` the eighth, at byte 72). Elsewhere, and
on a Mac where that call fails, it is the resident set size (psutil). Swap is the machine's (psutil), not the run's. And
the peak PyTorch's MPS allocator keeps (`mps_peak`): a window-end reading of the tensors in use misses a step's
activations, freed by then.
"""

from __future__ import annotations

import ctypes
import os
import sys
import time

import psutil

RUSAGE_INFO_V0 = 0
_FOOTPRINT_AT = 72  # offsetof(struct rusage_info_v0, ri_phys_footprint)
_process: psutil.Process | None = None
_libproc = None


def _me() -> psutil.Process:
    global _process
    if _process is None or _process.pid != os.getpid():  # a forked child reads its own
        _process = psutil.Process()
    return _process


def _proc_pid_rusage():
    """libproc's proc_pid_rusage (in libSystem on macOS), or None."""
    global _libproc
    if _libproc is None:
        try:
            lib = ctypes.CDLL("/usr/lib/libSystem.B.dylib", use_errno=True)
            fn = lib.proc_pid_rusage
            fn.argtypes = (ctypes.c_int, ctypes.c_int, ctypes.c_void_p)
            fn.restype = ctypes.c_int
            _libproc = fn
        except (OSError, AttributeError):
            _libproc = False
    return _libproc or None


def phys_footprint(pid: int) -> int | None:
    """macOS: the process's physical footprint in bytes (None where it cannot be read)."""
    fn = _proc_pid_rusage()
    if fn is None:
        return None
    buffer = ctypes.create_string_buffer(256)  # larger than v0: a kernel that writes more cannot overrun it
    if fn(pid, RUSAGE_INFO_V0, buffer) != 0:
        return None
    return int.from_bytes(buffer.raw[_FOOTPRINT_AT:_FOOTPRINT_AT + 8], sys.byteorder)


def process_memory() -> tuple[int | None, str]:
    """(bytes, what they are): the footprint on macOS, else the resident set size."""
    me = _me()
    if sys.platform == "darwin":
        value = phys_footprint(me.pid)
        if value is not None:
            return value, "footprint"
    try:
        return int(me.memory_info().rss), "rss"
    except (psutil.Error, OSError):
        return None, "rss"


SWAP_EVERY_S = 1.0  # swap moves slowly: read at most this often (each read parses /proc files: ~0.2 ms a window)
_swap: list = [float("-inf"), None]  # (when read, bytes)


def swap_used() -> int | None:
    """Bytes of swap in use on the machine (None where it cannot be read), read at most every SWAP_EVERY_S."""
    now = time.monotonic()
    if now - _swap[0] < SWAP_EVERY_S:
        return _swap[1]
    try:
        value = int(psutil.swap_memory().used)
    except (psutil.Error, OSError, RuntimeError):
        value = None
    _swap[:] = [now, value]
    return value


PROCESS_WORDS = {"footprint": "physical footprint (Activity Monitor's Memory)", "rss": "resident memory (RSS)"}


def mps_peak() -> int | None:
    """The most bytes PyTorch's MPS allocator has held in tensors since its peak was last reset:
    `torch.accelerator.max_memory_allocated(0)` (its "allocated_bytes.all.peak", from MPSHeapAllocatorImpl's
    getDeviceStats in torch 2.14+; 0 before the allocator is initialized), or None where the loaded torch has no
    such call or it raises (a torch whose MPS allocator keeps no device stats)."""
    import torch

    accelerator = getattr(torch, "accelerator", None)
    read = getattr(accelerator, "max_memory_allocated", None)
    if read is None or not hasattr(accelerator, "reset_peak_memory_stats"):
        return None
    try:
        return int(read(0))
    except (RuntimeError, TypeError, ValueError, AttributeError):
        return None
