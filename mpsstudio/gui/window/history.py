"""The window's side of the run history."""

from __future__ import annotations

from ...engine.basics.errors import UserError
from ...engine.basics.formatting import plural
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

    def _show_store_notices(self) -> None:
        for notice in [*self.store.notices, *getattr(self.store, "tool_notices", [])]:
            self.banner.show_message(notice, warning=True)

    def recover_history(self, path=None) -> None:
        """Copy every readable run of the damaged history to a fresh one (the damaged file is kept)."""
        from ...engine.history.recovery import recover

        try:
            kept, copied, lost = recover(path)
            store = RunStore()
        except UserError as exc:
            self.banner.show_message(str(exc), warning=True)
            return
        for result in self.results.results():  # runs of this session, kept in memory so far
            if not result.is_summary:  # (a summary came from a history, which is where its steps are)
                store.save(result)
        self.store = store
        self.results.set_store(store)
        lost_note = f", {lost} could not be read" if lost else ""
        self.banner.show_message(f"Recovered {plural(copied, 'run')}{lost_note}; the damaged file is kept as "
                                 f"{kept.name}.")
