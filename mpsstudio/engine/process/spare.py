"""The spare: one run process started ahead of time with torch imported, so Run does not wait for `import torch`;
every run still gets a fresh process."""

from __future__ import annotations

import threading

from . import handles
from .handles import RunProcess


class Spare:
    """One run process started ahead of time with torch imported and its device prepared (child.warm_up); `take`
    hands it over, `fill` starts the next.

    It is made for a setting: the MPS fallback switch (read by torch when it loads) and the device the next run
    will use (its context created). A spare made for another setting is never used: `take` refuses it, and
    `configure` replaces it (a new process importing torch in the background). Thread-safe; a front end calls
    `fill()` and `configure()` when it is idle (never during a run: importing torch would take CPU time from the
    run being measured) and `close()` when it quits.
    """

    def __init__(self, mps_fallback: bool = True, device: str | None = None):
        self.mps_fallback, self.device = mps_fallback, device
        self._proc: RunProcess | None = None
        self._lock = threading.Lock()
        self._closed = False

    def configure(self, mps_fallback: bool, device: str | None) -> None:
        """The setting the next run needs; a spare made for another one is ended and a matching one started."""
        with self._lock:
            if (mps_fallback, device) == (self.mps_fallback, self.device):
                return
            self.mps_fallback, self.device = mps_fallback, device
            stale, self._proc = self._proc, None
        if stale is not None:
            _discard(stale)
        self.fill()

    def fill(self) -> None:
        """Start the spare; nothing once closed (a fill queued before the window closed comes too late)."""
        with self._lock:
            if self._closed:
                return
            if self._proc is None or not self._proc.alive():
                if self._proc is not None:
                    _discard(self._proc)
                self._proc = handles.new_process(mps_fallback=self.mps_fallback, device=self.device)

    def wait_ready(self, timeout: float) -> bool:
        """Wait until the spare has imported torch (benchmarks and tests; a front end never waits for it)."""
        with self._lock:
            proc = self._proc
        return proc is not None and proc.wait_ready(timeout)

    def take(self, mps_fallback: bool, device: str | None = None) -> RunProcess | None:
        """The spare, if it was made for this MPS-fallback setting and (when given) this device or none; else None
        and the spare is ended (a fresh process serves this job: a CPU run never runs beside a GPU context the
        spare made for another run)."""
        with self._lock:
            proc, self._proc = self._proc, None
        fits = proc is not None and proc.alive() and proc.mps_fallback == mps_fallback and (
            device is None or proc.device in (None, device))
        if fits:
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
