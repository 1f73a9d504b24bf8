"""Python's cyclic garbage collector runs only in the GUI thread.

The window runs Python in other threads too (importing torch, waiting on run processes, checking folders). When the
automatic collector happens to run in one of them and frees a Qt object (a closed dialog left in a reference
cycle), the object is destroyed in the wrong thread: PySide then waits for a lock that thread cannot get, and the
app hangs (seen here: a QWidget destructor waiting in Shiboken::GilState::acquire under gc_collect_main in a
worker thread). So automatic collection is turned off and a timer in the GUI thread collects the way Python would,
generation by generation, when the allocation counts pass Python's own thresholds.
"""

from __future__ import annotations

import gc

from PySide6.QtCore import QObject, QTimer

INTERVAL_MS = 250

_installed: "MainThreadCollector | None" = None


class MainThreadCollector(QObject):
    def __init__(self, parent: QObject):
        super().__init__(parent)
        self.thresholds = gc.get_threshold()
        gc.disable()
        self.timer = QTimer(self)
        self.timer.setInterval(INTERVAL_MS)
        self.timer.timeout.connect(self.check)
        self.timer.start()

    def check(self) -> None:
        """Collect the oldest generation whose allocation count passed its threshold, as Python would."""
        counts = gc.get_count()
        generation = next((g for g in (2, 1, 0) if counts[g] > self.thresholds[g]), None)
        if generation is not None:
            gc.collect(generation)


def install(app: QObject) -> MainThreadCollector:
    """Collect garbage only in `app`'s (the GUI) thread from now on; once per process."""
    global _installed
    if _installed is None:
        _installed = MainThreadCollector(app)
    return _installed
