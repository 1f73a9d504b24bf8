"""The window's side of the run history."""

from __future__ import annotations

from ...engine.basics.errors import UserError
from ...engine.history.store import DamagedHistory, RunStore


class HistoryMixin:
    """The run history as the window meets it: a damaged, locked or read-only file said in the banner (runs kept in memory meanwhile), and recovery."""

    def _show_store_problem(self, problem: UserError) -> None:
        if isinstance(problem, DamagedHistory):
            self.banner.show_message(
                f"The run history at {problem.path} is damaged; it was left as it is. Recover… copies every "
                "readable run to a fresh history and keeps the damaged file; until then new runs are kept in "
                "memory only.", warning=True, action=("Recover…", lambda: self.recover_history(problem.path)))
        else:
            self.banner.show_message(f"{problem} New runs are kept in memory only.", warning=True)

    def _keep_interrupted(self) -> list[str]:
        """Runs that a killed window or command left in progress, kept as interrupted (process/journal.py); what
        to say. Not into a history in memory: they wait for the next start with the real one."""
        from ...engine.history.store import keep_run
        from ...engine.process.journal import keep_interrupted
        from ...engine.process.output import remove_old_temp_files

        remove_old_temp_files()  # what earlier versions left in the temp folder
        if self.store.read_only or str(self.store.path) == ":memory:":
            return []
        return keep_interrupted(lambda r: keep_run(r, self.store), lambda run_id: self.store.get(run_id) is not None)

    def _show_store_notices(self) -> None:
        """What the history said when it opened, in one banner (one sentence each)."""
        notices = [*self.interrupted_notes, *getattr(self.store, "pending_notices", []), *self.store.notices,
                   *getattr(self.store, "tool_notices", [])]
        if notices:
            self.banner.show_message(" ".join(notices), warning=True)

    def recover_history(self, path=None) -> None:
        """Copy every readable run and tool result of the damaged history to a fresh one (the damaged file is kept),
        off the GUI thread; the banner says how far it is, then what it found."""
        from ..worker import RecoverWorker

        if getattr(self, "recovering", None) is not None:
            return
        self.banner.show_message("Recovering the run history…")
        self.recovering = RecoverWorker(path, self)
        self.recovering.progress.connect(lambda f: self.banner.show_message(f"Recovering the run history… {f:.0%}"))
        self.recovering.done.connect(self._recovered)
        self.recovering.rejected.connect(self._not_recovered)
        self.recovering.finished.connect(self._recovery_ended)
        self.recovering.start()

    def _recovery_ended(self) -> None:
        self.recovering = None

    def _not_recovered(self, sentence: str) -> None:
        self.banner.show_message(sentence, warning=True)

    def _recovered(self, found) -> None:
        try:
            store = RunStore()
        except UserError as exc:
            self.banner.show_message(str(exc), warning=True)
            return
        for result in self.results.results():  # runs of this session, kept in memory so far
            if not result.is_summary:  # (a summary came from a history, which is where its steps are)
                store.save(result)
        self.store = store
        self.results.set_store(store)
        tools = getattr(self, "tools", None)
        if tools is not None:
            tools.store = store
            tools.reload()
        self.banner.show_message(found.sentence())
