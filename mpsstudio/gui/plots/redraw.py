"""When the live plots redraw: from a timer only, only when something changed, and never so often that drawing
takes more than a small share of the GUI thread (docs/architecture.md, "Live plots")."""

from __future__ import annotations

import time
from collections.abc import Callable

from PySide6.QtCore import QObject, QTimer

# Runs execute in their own process, so drawing no longer takes the GIL from a run: 10 Hz. It still takes CPU
# time, which a CPU run that uses every core loses (its threads wait for each other at every parallel region):
# measured on the 2-core build machine (benchmarks/gui_penalty.py, docs/benchmarks.md), 10 Hz cost such a run
# ~18 % of its throughput, so while one runs the plots redraw at 2 Hz; a run that leaves a core free (fewer
# torch threads than cores, or a GPU run) gets 10 Hz.
REDRAW_INTERVAL_MS = 100
BUSY_REDRAW_INTERVAL_MS = 500
# Drawing may take at most this share of the GUI thread (after a redraw that took t, the next waits t / share):
# it competes with a CPU run for cores. Measured (benchmarks/gui_penalty.py, 2-core machine, docs/benchmarks.md):
# when runs still shared the window's process, a CPU run read 10,237 samples/s with a share of 0.33 against 19,409
# without plots, 18,679 at 0.1; with runs in their own process, 0.03 kept a run with a free core within noise.
REDRAW_SHARE = 0.03


REFRESH_CHOICES = ("auto", "10", "2")  # Preferences: automatic, always 10 Hz, always 2 Hz


def interval_for(refresh: str, device: str, threads: int | None, cores: int) -> int:
    """The redraw interval (ms) for a run: "auto" redraws at 10 Hz unless the run is on the CPU with a thread on
    every core, then at 2 Hz (the measured cost, docs/benchmarks.md); "10" and "2" are the user's fixed choice."""
    if refresh == "10":
        return REDRAW_INTERVAL_MS
    if refresh == "2":
        return BUSY_REDRAW_INTERVAL_MS
    every_core = device == "cpu" and isinstance(threads, int) and threads >= cores
    return BUSY_REDRAW_INTERVAL_MS if every_core else REDRAW_INTERVAL_MS


class RedrawClock:
    """Calls `redraw` on each tick of a timer while `dirty()` says something changed, then waits until the
    redraw's cost (the update plus `last_paint_s()`, the last paint) is at most REDRAW_SHARE of the time since."""

    def __init__(self, parent: QObject, dirty: Callable[[], bool], redraw: Callable[[], None],
                 last_paint_s: Callable[[], float]) -> None:
        self._dirty, self._redraw, self._last_paint_s = dirty, redraw, last_paint_s
        self.next_at = 0.0  # perf_counter seconds before which a tick draws nothing
        self._timer = QTimer(parent)
        self._timer.setInterval(REDRAW_INTERVAL_MS)
        self._timer.timeout.connect(self.tick)

    def tick(self) -> None:
        start = time.perf_counter()
        if start < self.next_at or not self._dirty():
            return
        self._redraw()
        cost = time.perf_counter() - start + self._last_paint_s()
        self.next_at = start + cost / REDRAW_SHARE

    def set_interval_ms(self, ms: int) -> None:
        self._timer.setInterval(ms)

    def interval_ms(self) -> int:
        return self._timer.interval()

    def start(self) -> None:
        self._timer.start()

    def stop(self) -> None:
        self._timer.stop()

    def active(self) -> bool:
        return self._timer.isActive()
