"""The team's server from the window: Push to Team Server (the selected runs; with none selected, every run and tool
result) and Pull from Team Server… (an experiment chosen from those the server holds), both off the GUI thread
through the engine (team/push.py, team/pull.py), to the MLflow tracking server set in Preferences
(team_settings.ServerRow)."""

from __future__ import annotations

from collections.abc import Callable

from PySide6.QtCore import QObject, Signal
from PySide6.QtWidgets import QInputDialog, QWidget

from ..engine.basics.errors import UserError
from ..engine.history.library import RunLibrary
from .jobs import Job, experiments_job, pull_job, push_job
from .preferences import Preferences

NO_SERVER = ("No team server is set; give your team's MLflow tracking server in Preferences (Team server), then "
             "{verb} again.")


class TeamServer(QObject):
    """`message(sentence)`; `pushed()` when a push ended (the queue changed); `pulled()` when a pull added runs or
    tool results; `busy(bool)` while either runs (one at a time)."""

    message = Signal(str)
    pushed = Signal()
    pulled = Signal()
    busy = Signal(bool)

    def __init__(self, library: RunLibrary, ids: Callable[[], list[str]], parent: QWidget) -> None:
        """`ids()`: what Push sends (the selected runs; [] for every run and tool result)."""
        super().__init__(parent)
        self.library, self._ids, self.parent_widget = library, ids, parent
        self._job: Job | None = None
        self.choose: Callable[[str, list[str]], str | None] = self._ask_experiment  # a test answers it

    def push(self) -> None:
        """What `ids()` names, or every run and tool result where it names none."""
        ids = self._ids()
        if not ids:
            from ..engine.team.push import everything

            try:
                ids = everything(self.library.store)
            except UserError as exc:
                self.message.emit(str(exc))
                return
        self.push_these(ids)

    def push_these(self, ids: list[str]) -> None:
        """These runs or tool results (the Tools tab's one)."""
        url = self._server("push")
        if url and self._job is None:
            self._start(push_job(self.library.store, url, ids, self), self.pushed)

    def pull(self) -> None:
        """The server's experiments listed (off the GUI thread), one chosen, its runs and tool results pulled."""
        url = self._server("pull")
        if not url or self._job is not None:
            return
        job = experiments_job(url, self)
        job.done.connect(lambda names: self._pull_from(url, names))
        self._start(job, None)

    def _pull_from(self, url: str, names: list[str]) -> None:
        if not names:
            self.message.emit(f"The tracking server at {url} holds no experiment yet.")
            return
        name = self.choose(url, names)
        if name:
            self._job = None  # the listing's job has ended its work; its `ended` comes after this slot
            self._start(pull_job(self.library.store, url, name, self), self.pulled)

    def _ask_experiment(self, url: str, names: list[str]) -> str | None:
        name, ok = QInputDialog.getItem(self.parent_widget, "Pull from Team Server",
                                        f"Bring in the runs and tool results of an experiment on {url}:", names, 0,
                                        False)
        return name if ok and name else None

    def _server(self, verb: str) -> str:
        url = Preferences.load().team_server
        if not url:
            self.message.emit(NO_SERVER.format(verb=verb))
        return url

    def _start(self, job: Job, after) -> None:
        self._job = job
        job.progress.connect(lambda values: self.message.emit(f"{values[0]}\u2026"))
        job.done.connect(lambda done: self.message.emit(done.sentence()) if hasattr(done, "sentence") else None)
        job.rejected.connect(self.message)
        job.ended.connect(lambda: self._ended(job, after))
        self.busy.emit(True)
        job.start()

    def _ended(self, job: Job, after) -> None:
        if self._job is job:
            self._job = None
            self.busy.emit(False)
        if after is not None:
            after.emit()
