"""The CPU busy share of a run: the run process's CPU time over the window, as a share of every logical core
(data-loader workers apart)."""

from __future__ import annotations

import os
import time

import psutil

from .base import Busy, percent as _percent


class CpuBusy(Busy):
    """The run process's CPU time over the window as a share of all logical cores (data-loader workers apart)."""

    measure = "cpu_busy"

    def __init__(self):
        self.process = psutil.Process()
        self.cores = psutil.cpu_count() or os.cpu_count() or 1
        self._start: tuple[float, float] | None = None

    def _sample(self) -> tuple[float, float] | None:
        try:
            t = self.process.cpu_times()
        except Exception:
            return None
        return time.perf_counter(), t.user + t.system

    def begin(self) -> None:
        self._start = self._sample()

    def end(self) -> float | None:
        end = self._sample()
        if self._start is None or end is None or end[0] <= self._start[0]:
            return None
        return _percent(100.0 * (end[1] - self._start[1]) / ((end[0] - self._start[0]) * self.cores))
