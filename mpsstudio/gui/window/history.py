"""The window's side of the run history."""

from __future__ import annotations

from typing import TYPE_CHECKING


from PySide6.QtCore import QObject

from ...engine.basics.errors import UserError
from ...engine.history.store import DamagedHistory, RunStore
from ..jobs import recover_job

if TYPE_CHECKING:
    from ..jobs import Job
    from .main_window import MainWindow


class HistoryView(QObject):
    """The run history as the window meets it: a damaged, locked or read-only file said in the banner (runs kept in
    memory meanwhile), and recovery."""

    def __init__(self, w: MainWindow):  # the window that holds it
        super().__init__(w)
        self.w = w
        self.recovering: Job | None = None  # the recovery's job, while it runs

    def show_problem(self, problem: UserError) -> None:
        if isinstance(problem, DamagedHistory):
            self.w.banner.show_message(
                f"The run history at {problem.path} is damaged; it was left as it is. Recover… copies every "
                "readable run to a fresh history and keeps the damaged file; until then new runs are kept in "
                "memory only.", warning=True, action=("Recover…", lambda: self.recover(problem.path)))
        else:
            self.w.banner.show_message(f"{problem} New runs are kept in memory only.", warning=True)

    def keep_interrupted(self) -> list[str]:
        """Runs that a killed window or command left in progress, kept as interrupted (process/journal.py); what
        to say. Not into a history in memory: they wait for the next start with the real one."""
        from ...engine.history.store import keep_run
        from ...engine.process.journal import keep_interrupted
        from ...engine.process.output import remove_old_temp_files

        store = self.w.store
        remove_old_temp_files()  # what earlier versions left in the temp folder
        if store.read_only or str(store.path) == ":memory:":
            return []
        return keep_interrupted(lambda r: keep_run(r, store), lambda run_id: store.get(run_id) is not None)

    def show_notices(self, interrupted: list[str]) -> None:
        """What the history said when it opened, in one banner (one sentence each)."""
        store = self.w.store
        notices = [*interrupted, *getattr(store, "pending_notices", []), *store.notices,
                   *getattr(store, "tool_notices", [])]
        if notices:
            self.w.banner.show_message(" ".join(notices), warning=True)

    def recover(self, path=None) -> None:
        """Copy every readable run and tool result of the damaged history to a fresh one (the damaged file is kept),
        off the GUI thread; the banner says how far it is, then what it found."""
        if self.recovering is not None:
            return
        self.w.banner.show_message("Recovering the run history…")
        self.recovering = recover_job(path, self.w)
        self.recovering.progress.connect(self.on_progress)
        self.recovering.done.connect(self.on_recovered)
        self.recovering.rejected.connect(self.on_not_recovered)
        self.recovering.finished.connect(self.on_ended)
        self.recovering.start()

    def on_progress(self, values: tuple) -> None:
        self.w.banner.show_message(f"Recovering the run history… {values[0]:.0%}")

    def on_ended(self) -> None:
        self.recovering = None

    def on_not_recovered(self, sentence: str) -> None:
        self.w.banner.show_message(sentence, warning=True)

    def on_recovered(self, found) -> None:
        w = self.w
        try:
            store = RunStore()
        except UserError as exc:
            w.banner.show_message(str(exc), warning=True)
            return
        for result in w.results.results():  # runs of this session, kept in memory so far
            if not result.is_summary:  # (a summary came from a history, which is where its steps are)
                store.save(result)
        w.store = store
        w.results.set_store(store)
        w.tools.store = store
        w.tools.reload()
        w.banner.show_message(found.sentence())

    def wait(self) -> None:
        if self.recovering is not None and self.recovering.isRunning():
            self.recovering.wait()
