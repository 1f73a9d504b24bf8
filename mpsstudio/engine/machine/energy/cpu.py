"""The CPU busy share of a run: the CPU time of the run's process and of its children (data-loader workers) over
the span, as a share of every logical core."""

from __future__ import annotations

import os
import time

import psutil

from .base import Busy, percent as _percent


def _cpu_s(process: psutil.Process) -> float:
    t = process.cpu_times()
    return t.user + t.system


def descendants(pid: int) -> list[int] | None:
    """Linux: the process's descendants from the kernel's own lists (/proc/PID/task/TID/children), without reading
    every process on the machine as psutil's children() does (milliseconds with a few hundred processes, paid at
    a window's end while the GPU waits). None where those lists do not exist (macOS; kernels built without them)."""
    if not os.path.exists(f"/proc/{pid}/task/{pid}/children"):
        return None
    found: list[int] = []
    todo = [pid]
    while todo:
        parent = todo.pop()
        try:
            tasks = os.listdir(f"/proc/{parent}/task")
        except OSError:
            continue  # it ended meanwhile
        for task in tasks:
            try:
                with open(f"/proc/{parent}/task/{task}/children") as f:
                    kids = [int(k) for k in f.read().split()]
            except (OSError, ValueError):  # a thread or process that ended meanwhile
                continue
            found.extend(kids)
            todo.extend(kids)
    return found


class CpuBusy(Busy):
    """CPU time of the run process and its children over the span, as a share of all logical cores.

    Children are the DataLoader's worker processes: those alive at the span's end count with their time since
    the span began (or since they started); those that ended and were reaped during it count through the
    process's reaped-children times (os.times), less what they had used before the span began."""

    measure = "cpu_busy"

    def __init__(self):
        self.process = psutil.Process()
        self.cores = psutil.cpu_count() or os.cpu_count() or 1
        self._start: tuple[float, float, float, dict[int, float]] | None = None

    def _children(self) -> dict[int, float]:
        out: dict[int, float] = {}
        try:
            pids = descendants(self.process.pid)
            children = ([psutil.Process(pid) for pid in pids] if pids is not None
                        else self.process.children(recursive=True))
        except Exception:
            return out
        for child in children:
            try:
                out[child.pid] = _cpu_s(child)
            except Exception:  # ended between the listing and the reading: counted once reaped
                continue
        return out

    def _sample(self) -> tuple[float, float, float, dict[int, float]] | None:
        try:
            own = _cpu_s(self.process)
        except Exception:
            return None
        reaped = os.times()
        return time.perf_counter(), own, reaped.children_user + reaped.children_system, self._children()

    def begin(self) -> None:
        self._start = self._sample()

    def end(self) -> float | None:
        end = self._sample()
        if self._start is None or end is None or end[0] <= self._start[0]:
            return None
        (t0, own0, reaped0, kids0), (t1, own1, reaped1, kids1) = self._start, end
        used = own1 - own0 + (reaped1 - reaped0)
        used += sum(s - kids0.get(pid, 0.0) for pid, s in kids1.items())
        used -= sum(s for pid, s in kids0.items() if pid not in kids1)  # ended: reaped time counts from their start
        return _percent(100.0 * max(0.0, used) / ((t1 - t0) * self.cores))
