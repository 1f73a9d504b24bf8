"""The results panel's selection, filter and chart."""

from __future__ import annotations

from PySide6.QtCore import QItemSelection, QItemSelectionModel

from ...engine.analysis.compare import Comparison
from ...engine.basics.results import RunResult
from .run_table import COLUMNS, RUN_ID_ROLE
from .speedup_chart import NO_COMPARISON_HINT


class SelectionMixin:
    """What is selected and shown: the selected runs (by id, whatever the sort and filter), the current comparison and its chart, the filter, and the Details tab's run."""

    def selected_ids(self) -> list[str]:
        rows = sorted(self.table.selectionModel().selectedRows(), key=lambda i: i.row())
        return [i.data(RUN_ID_ROLE) for i in rows]

    def select_ids(self, ids: list[str]) -> None:
        """Select these runs' rows (one range per run of adjacent rows: thousands of ids stay fast)."""
        first = None
        rows = []
        for run_id in ids:
            row = self.model.row_of(run_id)
            if row is None:
                continue
            index = self.proxy.mapFromSource(self.model.index(row, 0))
            first = first or index
            rows.append(index.row())
        selection = QItemSelection()
        last_column = len(COLUMNS) - 1
        rows.sort()
        start = 0
        for i in range(1, len(rows) + 1):
            if i == len(rows) or rows[i] != rows[i - 1] + 1:
                selection.select(self.proxy.index(rows[start], 0), self.proxy.index(rows[i - 1], last_column))
                start = i
        sm = self.table.selectionModel()
        sm.select(selection, QItemSelectionModel.SelectionFlag.ClearAndSelect
                  | QItemSelectionModel.SelectionFlag.Rows)
        if first is not None:
            sm.setCurrentIndex(first, QItemSelectionModel.SelectionFlag.NoUpdate)
            self.table.scrollTo(first)

    def current_comparison(self) -> Comparison | None:
        """The comparison of the current row; with nothing selected, the newest comparison."""
        run = self._current_run()
        if run is not None:
            return self.model.comparison_of.get(run.id)
        if not self.model.comparisons:
            return None
        return max(self.model.comparisons, key=lambda c: max(r.created_at for r in c.runs))

    def _current_run(self) -> RunResult | None:
        ids = self.selected_ids()
        if not ids:
            return None
        current = self.table.selectionModel().currentIndex()
        run_id = current.data(RUN_ID_ROLE) if current.isValid() else None
        if run_id not in ids:
            run_id = ids[0]
        return self.model.run_at(self.model.row_of(run_id))

    def _on_selection_changed(self, *_):
        self._update_actions()
        self._update_chart()
        self.selection_changed.emit(self.selected_ids())

    def _update_chart(self, *_) -> None:
        run = self._current_run()
        hint = NO_COMPARISON_HINT
        if run is not None and run.status != "finished":
            what = {"cancelled": "was stopped before the end", "interrupted": "was interrupted"}.get(run.status,
                                                                                                    run.status)
            hint = f"This run {what}; only finished runs are compared"
        self.chart.show_comparison(self.current_comparison(), hint)
        if run is None:
            self.details.show_run(None)
        elif self.details.run is None or self.details.run.id != run.id:
            whole = self.whole_runs([run.id])
            self.details.show_run(whole[0] if whole else None)

    def set_filter(self, text: str) -> None:
        """Show only the runs matching every word of `text` (case-insensitive)."""
        if self.filter.text() != text:
            self.filter.setText(text)
            return
        self.proxy.set_words(text)
        self._update_actions()

    def visible_ids(self) -> list[str]:
        return [self.proxy.index(r, 0).data(RUN_ID_ROLE) for r in range(self.proxy.rowCount())]

    def _select_current_group(self) -> None:
        c = self.current_comparison()
        if c is not None:
            self.select_ids([r.id for r in c.runs])

    def _update_actions(self) -> None:
        has_runs = self.model.rowCount() > 0
        self.delete_action.setEnabled(bool(self.selected_ids()))
        self.csv_action.setEnabled(has_runs)
        self.json_action.setEnabled(has_runs)
        self.png_action.setEnabled(self.current_comparison() is not None)
