"""The results panel: every run kept in the history, its comparisons and speedups, a chart, and exports.

The table's model lives in run_table.py, the chart in speedup_chart.py, the exported picture in
comparison_sheet.py; the panel's parts share its table, selection and history: the table view and its actions
(table_view.py), delete and Undo (deleting.py), exports and imports (files.py).
"""

from __future__ import annotations

from pathlib import Path

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import QComboBox, QHBoxLayout, QLabel, QLineEdit, QSplitter, QStackedLayout, QVBoxLayout, QWidget

from ...engine.analysis.compare import Comparison
from ...engine.basics.errors import UserError
from ...engine.basics.formatting import plural
from ...engine.basics.results import RunResult
from ...engine.history.store import RunStore
from ..style import keys, placeholder_label
from .contrast_chart import ContrastChart, ScalingChart
from .deleting import DeletingMixin, UndoBar
from .files import FilesMixin
from .reports import ReportsMixin
from .run_details import RunDetails
from .run_table import COL, RunSortProxy, RunTableModel
from .speedup_chart import SpeedupChart
from .selection import SelectionMixin
from .table_view import TableViewMixin

__all__ = ["COL", "ResultsPanel"]



class ResultsPanel(TableViewMixin, SelectionMixin, DeletingMixin, FilesMixin, ReportsMixin, QWidget):
    """Every kept run in a sortable table, the speedup chart of the selected comparison, and exports."""

    message = Signal(str)
    selection_changed = Signal(list)
    save_model_requested = Signal()
    import_finished = Signal()

    def __init__(self, store: RunStore, parent=None, export_comparison=None):
        super().__init__(parent)
        self.store = store
        self._importer = None
        self._importing = ""  # the file being imported
        self._last_dir = str(Path.home())
        # what Export comparison… writes to the path asked: the window gives its own (this panel's PNG and the
        # comparison's curves beside it); a panel alone writes its PNG
        self.export_comparison_to = export_comparison or self.export_comparison_png
        self.model = RunTableModel(self)
        self.proxy = RunSortProxy(self)
        self.proxy.setSourceModel(self.model)
        self.table = self._make_table()
        self.chart = SpeedupChart()
        self.contrast_chart = ContrastChart()
        self.contrast_chart.baseline_chosen.connect(self._choose_baseline)
        self.scaling_chart = ScalingChart()
        self._baseline_id: str | None = None  # the baseline the user chose for the comparisons by what differs
        self._make_actions()

        self.empty = placeholder_label("<b>No runs yet</b><br>Finished runs appear here and are kept between "
                                       "launches.<br>Import\u2026 adds runs exported from another machine.")
        table_area = QWidget()
        self._table_stack = QStackedLayout(table_area)
        self._table_stack.addWidget(self.empty)
        self._table_stack.addWidget(self.table)

        self.details = RunDetails()
        self.details.note_changed.connect(self.set_note)
        self.details.export_steps.connect(self.export_steps_dialog)
        self.details.save_model.connect(lambda _run_id: self.save_model_requested.emit())

        self.filter = QLineEdit()
        self.filter.setPlaceholderText("Filter runs: model, dataset, device, machine, status, note…")
        self.filter.setClearButtonEnabled(True)
        self.filter.setToolTip("Shows the runs whose model, dataset, device, machine, precision, status or note "
                               f"contain every word typed ({keys('Ctrl+F')}).")
        self.filter.textChanged.connect(self.set_filter)
        self.undo_bar = UndoBar(self)
        self.undo_bar.undo.connect(self.undo_delete)
        left = QWidget()
        left_layout = QVBoxLayout(left)
        left_layout.setContentsMargins(0, 0, 0, 0)
        left_layout.setSpacing(4)
        left_layout.addWidget(self.filter)
        left_layout.addWidget(table_area, 1)
        left_layout.addWidget(self.undo_bar)

        # Table and chart side by side: the table gets the panel's whole height (a dozen rows at 1280x740)
        splitter = QSplitter(Qt.Orientation.Horizontal)
        splitter.setChildrenCollapsible(False)
        # the right side: what the current run is compared with: its devices, or runs that differ in one setting or
        # in their environment, or the selected runs (engine analysis/compare.py and contrast.py)
        self.compare_combo = QComboBox()
        self.compare_combo.setToolTip("Compare the current run with the same setup on other devices, with runs that "
                                      "differ in one setting or in their environment, or the selected runs.")
        self.compare_combo.activated.connect(self._chosen_comparison)
        compare_row = QHBoxLayout()
        compare_row.setContentsMargins(0, 0, 0, 0)
        compare_row.addWidget(QLabel("Compare:"))
        compare_row.addWidget(self.compare_combo, 1)
        self.compare_bar = QWidget()
        self.compare_bar.setLayout(compare_row)
        charts = QWidget()
        self._chart_stack = QStackedLayout()
        self._chart_stack.addWidget(self.chart)
        self._chart_stack.addWidget(self.contrast_chart)
        self._chart_stack.addWidget(self.scaling_chart)
        right = QVBoxLayout(charts)
        right.setContentsMargins(0, 0, 0, 0)
        right.setSpacing(4)
        right.addWidget(self.compare_bar)
        right.addLayout(self._chart_stack, 1)
        splitter.addWidget(left)
        splitter.addWidget(charts)
        splitter.setStretchFactor(0, 3)
        splitter.setStretchFactor(1, 2)
        splitter.setSizes([3000, 2000])  # scaled to the real width: the table gets three fifths
        self.splitter = splitter

        buttons = QHBoxLayout()
        buttons.setSpacing(8)
        buttons.addWidget(self._button(self.delete_action))
        buttons.addStretch(1)
        for action in (self.import_action, self.csv_action, self.json_action, self.png_action, self.markdown_action,
                       self.report_action):
            buttons.addWidget(self._button(action))

        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.setSpacing(8)
        layout.addWidget(splitter, 1)
        layout.addLayout(buttons)

        self.table.installEventFilter(self)
        self.table.selectionModel().selectionChanged.connect(self._on_selection_changed)
        self.table.selectionModel().currentRowChanged.connect(self._update_chart)
        self.reload()

    # data
    def reload(self) -> None:
        """Read every run's summary from the store (steps and windows are read when a run is selected or
        exported), keeping the selection; unreadable rows are skipped and named."""
        keep = self.selected_ids()
        try:
            runs = self.store.summaries()
        except UserError as exc:  # a history that fails now (another program holds it): one sentence
            self.message.emit(str(exc))
            runs = []
        for notice in self.store.notices:
            self.message.emit(notice)
        self.reload_inspections()
        self._set_runs(runs, keep)

    def add_inspection(self, result: dict) -> None:
        """An inspection that just finished: the verdict names its findings from now on."""
        self.chart.inspections.append(result)
        self._update_chart()

    def reload_inspections(self) -> None:
        """The stored `inspect` results whose findings (CPU fallbacks, parity) the verdict names."""
        try:
            self.chart.inspections = [t.result for t in self.store.tools(kinds=("inspect",)) if not t.problem]
            self.contrast_chart.diagnoses = [t.result for t in self.store.tools(kinds=("diagnose",))
                                             if not t.problem]
        except UserError as exc:
            self.chart.inspections = []
            self.message.emit(str(exc))
        self._update_chart()

    def set_store(self, store: RunStore) -> None:
        """Show another history (a recovered one, say)."""
        self.store = store
        self.reload()

    def add_result(self, result: RunResult) -> None:
        """A run that just ended (already saved): add or replace its row, refresh comparisons, select it."""
        runs = [r for r in self.model.runs() if r.id != result.id] + [result]
        self._set_runs(runs, [result.id])

    def results(self) -> list[RunResult]:
        return self.model.runs()

    def comparisons(self) -> list[Comparison]:
        return list(self.model.comparisons)

    def _set_runs(self, runs: list[RunResult], select: list[str]) -> None:
        self.model.set_runs(runs)
        self._table_stack.setCurrentWidget(self.table if runs else self.empty)
        self._fit_columns()
        self.select_ids([i for i in select if self.model.row_of(i) is not None])
        self._update_actions()
        self._update_chart()
        if not self.selected_ids():  # a reset model clears its selection without a signal: the plots hear it here
            self.selection_changed.emit([])

    # selection

    # notes, the loss curve, filtering, undo
    def set_note(self, run_id: str, text: str) -> None:
        """Keep the user's note on a run in the history and in the table."""
        try:
            self.store.set_note(run_id, text)
        except UserError as exc:
            self.message.emit(str(exc))
            return
        row = self.model.row_of(run_id)
        if row is not None:
            self.model.set_note(row, text)
        self.message.emit("Note kept." if text else "Note removed.")

    # actions without questions (tests call these)

    def _runs_for(self, ids: list[str] | None) -> list[RunResult]:
        wanted = ids if ids is not None else self.selected_ids()
        if not wanted:
            return self.model.runs()
        rows = [self.model.row_of(i) for i in wanted]
        return [self.model.run_at(r) for r in rows if r is not None]

    def whole_runs(self, ids: list[str] | None = None) -> list[RunResult]:
        """These runs (None = the selection, or all) with their steps, windows and epochs, read from the history
        where the table holds only a summary; a run that cannot be read any more is left out and named."""
        out, missing = [], []
        for run in self._runs_for(ids):
            if not run.is_summary:
                out.append(run)
                continue
            try:
                whole = self.store.get(run.id)
            except UserError as exc:
                self.message.emit(str(exc))
                return out
            if whole is None:
                missing.append(run.id[:12])
            else:
                whole.note = run.note
                out.append(whole)
        if missing:
            self.message.emit(f"{plural(len(missing), 'run')} could not be read from the history any more "
                              f"(first: {missing[0]}); {'it is' if len(missing) == 1 else 'they are'} left out.")
        return out

    def closeEvent(self, event) -> None:  # Qt override
        """An import still running finishes first (it is one transaction: all of the file or none)."""
        if self._importer is not None:
            self._importer.wait()
        super().closeEvent(event)

    # actions with questions (buttons, menu, keys)







