"""When the live plots redraw: from a timer only, only when something changed, and never so often that drawing
takes more than a small share of the GUI thread (docs/architecture.md, "Live plots")."""

from __future__ import annotations

import time
from collections.abc import Callable

from PySide6.QtCore import QObject, QTimer

# Runs execute in their own process, so drawing no longer takes the GIL from a run. It still takes CPU time, which a
# CPU run that uses every core loses (its threads wait for each other at every parallel region). Measured on the
# 2-core build machine (benchmarks/gui_penalty.py: wall-clock throughput with plots / without, median of pairs and
# its 95 % interval, docs/benchmarks.md): a run leaving a core free (the case of a GPU run, whose host thread
# launches work) at 10 Hz 1.008 [0.996, 1.023]; a run on every core at 10 Hz 0.864 [0.849, 0.884], at 2 Hz 0.950
# [0.931, 0.963], every 2 s 1.013 [0.995, 1.019], with plots that never redraw 0.989 [0.976, 1.003]. So: 10 Hz, and
# every 2 s while a CPU run uses every core (the cost within 2 %); Preferences can fix 10 Hz or 2 Hz instead.
REDRAW_INTERVAL_MS = 100
BUSY_REDRAW_INTERVAL_MS = 2000
FIXED_2HZ_MS = 500
# Drawing may take at most this share of the GUI thread (after a redraw that took t, the next waits t / share):
# it competes with a CPU run for cores. Measured (benchmarks/gui_penalty.py, 2-core machine, docs/benchmarks.md):
# when runs still shared the window's process, a CPU run read 10,237 samples/s with a share of 0.33 against 19,409
# without plots, 18,679 at 0.1; with runs in their own process, 0.03 kept a run with a free core within noise.
REDRAW_SHARE = 0.03


REFRESH_CHOICES = ("auto", "10", "2")  # Preferences: automatic, always 10 Hz, always 2 Hz


def interval_for(refresh: str, device: str, threads: int | None, cores: int) -> int:
    """The redraw interval (ms) for a run: "auto" redraws at 10 Hz unless the run is on the CPU with a thread on
    every core, then every 2 s (the measured cost, above); "10" and "2" are the user's fixed choice in Hz."""
    if refresh == "10":
        return REDRAW_INTERVAL_MS
    if refresh == "2":
        return FIXED_2HZ_MS
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
