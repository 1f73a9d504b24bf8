"""The team's server from the window (the results panel's Push to Team Server): the selected runs (all when none is selected) sent to the team's MLflow tracking server set
in Preferences, off the GUI thread, through the engine (team/push.py); its sentence said, the waiting line redrawn."""

from __future__ import annotations

from collections.abc import Callable

from PySide6.QtCore import QObject, Signal
from PySide6.QtWidgets import QWidget

from ..engine.history.library import RunLibrary
from .jobs import Job, push_job
from .preferences import Preferences


class TeamPush(QObject):
    """`message(sentence)`; `pushed()` when a push ended (the queue changed); `pushing(bool)` while one runs."""

    message = Signal(str)
    pushed = Signal()
    pushing = Signal(bool)

    def __init__(self, library: RunLibrary, run_ids: Callable[[], list[str]], parent: QWidget) -> None:
        """`run_ids()`: the runs to push (the panel's selection, or all of them)."""
        super().__init__(parent)
        self.library, self._run_ids = library, run_ids
        self._job: Job | None = None

    def push(self) -> None:
        url = Preferences.load().team_server
        if not url:
            self.message.emit("No team server is set; give your team's MLflow tracking server in Preferences "
                              "(Team server), then push again.")
            return
        if self._job is not None:
            return
        ids = self._run_ids()
        self._job = push_job(self.library.store, url, ids, self)
        self._job.progress.connect(lambda values: self.message.emit(f"{values[0]}\u2026"))
        self._job.done.connect(lambda done: self.message.emit(done.sentence()))
        self._job.rejected.connect(self.message)
        self._job.ended.connect(self._ended)
        self.pushing.emit(True)
        self._job.start()

    def _ended(self) -> None:
        self._job = None
        self.pushing.emit(False)
        self.pushed.emit()
