"""The spare: one run process started ahead of time with torch imported, so Run does not wait for `import torch`;
every run still gets a fresh process."""

from __future__ import annotations

import threading

from . import handles
from .handles import RunProcess


class Spare:
    """One run process started ahead of time with torch imported; `take` hands it over, `fill` starts the next.

    Thread-safe; a front end calls `fill()` when it is idle (never during a run: importing torch would take
    CPU time from the run being measured) and `close()` when it quits.
    """

    def __init__(self, mps_fallback: bool = True):
        self.mps_fallback = mps_fallback
        self._proc: RunProcess | None = None
        self._lock = threading.Lock()
        self._closed = False

    def fill(self) -> None:
        """Start the spare; nothing once closed (a fill queued before the window closed comes too late)."""
        with self._lock:
            if self._closed:
                return
            if self._proc is None or not self._proc.alive():
                if self._proc is not None:
                    _discard(self._proc)
                self._proc = handles.new_process(mps_fallback=self.mps_fallback)

    def wait_ready(self, timeout: float) -> bool:
        """Wait until the spare has imported torch (benchmarks and tests; a front end never waits for it)."""
        with self._lock:
            proc = self._proc
        return proc is not None and proc.wait_ready(timeout)

    def take(self, mps_fallback: bool) -> RunProcess | None:
        with self._lock:
            proc, self._proc = self._proc, None
        if proc is not None and proc.alive() and proc.mps_fallback == mps_fallback:
            return proc
        if proc is not None:
            _discard(proc)
        return None

    def close(self) -> None:
        with self._lock:
            proc, self._proc, self._closed = self._proc, None, True
        if proc is not None:
            _discard(proc)


def _discard(proc: RunProcess) -> None:
    proc.end(grace_s=0.2)
    proc.discard_output()
