"""The results panel: every run kept in the history, its comparisons and speedups, a chart, and exports.

The panel is composed of parts, each given what it uses: the table's model (run_table.py) and view (table_view.py:
RunsTable, and the panel's RunActions), the selection and the Compare menu (selection.py), the charts
(speedup_chart.py, contrast_chart.py), delete and Undo (deleting.py), files (files.py) and reports (reports.py). The
history is read and changed through the engine's RunLibrary (engine/history/library.py), never a store of its own.
"""

from __future__ import annotations

import html
from collections.abc import Callable

from PySide6.QtCore import QPoint, Qt, Signal
from PySide6.QtWidgets import QHBoxLayout, QLabel, QLineEdit, QMenu, QSplitter, QStackedLayout, QVBoxLayout, QWidget

from ...engine.analysis.compare import Comparison
from ...engine.basics.errors import UserError
from ...engine.basics.results import RunResult
from ...engine.history.library import RunLibrary
from ...engine.history.store import RunStore
from ..style import keys, placeholder_label
from .contrast_chart import ContrastChart, ScalingChart
from .deleting import Deleter
from .files import RunFiles
from .reports import Reports
from .run_details import RunDetails
from .run_table import COL, RunSortProxy, RunTableModel
from .selection import ComparePicker, RunSelection
from .speedup_chart import NO_COMPARISON_HINT, SpeedupChart
from ..team import TeamServer
from .table_view import RunActions, RunsTable, button

__all__ = ["COL", "ResultsPanel"]


class ResultsPanel(QWidget):
    """Every kept run in a sortable table, the speedup chart of the selected comparison, and exports."""

    message = Signal(str)
    selection_changed = Signal(list)
    save_model_requested = Signal()
    import_finished = Signal()

    def __init__(self, store: RunStore, parent: QWidget | None = None,
                 export_comparison: Callable[[str], object] | None = None) -> None:
        super().__init__(parent)
        self.library = RunLibrary(store)
        self.model = RunTableModel(self)
        self.proxy = RunSortProxy(self)
        self.proxy.setSourceModel(self.model)
        self.view = RunsTable(self.proxy, self)
        self.table = self.view.table
        self.selection = RunSelection(self.model, self.proxy, self.table)
        self.picker = ComparePicker(self.selection, self)
        self.compare_combo, self.compare_bar = self.picker.combo, self.picker.bar
        self.chart = SpeedupChart()
        self.contrast_chart = ContrastChart()
        self.scaling_chart = ScalingChart()
        self.deleter = Deleter(self.library, self.selection, self)
        self.undo_bar = self.deleter.bar
        # what Export comparison… writes to the path asked: the window gives its own (this panel's PNG and the
        # comparison's curves beside it); a panel alone writes its PNG
        self.files = RunFiles(self.library, self.selection, self, export_comparison)
        self.reports = Reports(self.selection, self.picker, self._findings, self.files.save_path, self)
        self.team = TeamServer(self.library, self.selection.ids, self)  # none selected: every run and tool result
        self.run_actions = RunActions.made(self, {
            "delete": self.deleter.delete_dialog, "csv": self.files.export_csv_dialog,
            "json": self.files.export_json_dialog, "import_runs": self.files.import_dialog,
            "png": self.files.export_comparison_dialog, "markdown": self.reports.copy_markdown,
            "report": self.reports.export_report_dialog, "select_group": self._select_current_group,
            "push": self.team.push})
        self.table.addAction(self.run_actions.delete)
        self.details = RunDetails()
        self.filter = QLineEdit()
        self._build()
        self._connect()
        self.reload()

    def _build(self) -> None:
        self.empty = placeholder_label("<b>No runs yet</b><br>Finished runs appear here and are kept between "
                                       "launches.<br>Import\u2026 adds runs exported from another machine.")
        table_area = QWidget()
        self._table_stack = QStackedLayout(table_area)
        self._table_stack.addWidget(self.empty)
        self._table_stack.addWidget(self.table)

        self.filter.setPlaceholderText("Filter runs: model, dataset, device, machine, status, note…")
        self.filter.setClearButtonEnabled(True)
        self.filter.setToolTip("Shows the runs whose model, dataset, device, machine, precision, status or note "
                               f"contain every word typed ({keys('Ctrl+F')}).")
        left = QWidget()
        left_layout = QVBoxLayout(left)
        left_layout.setContentsMargins(0, 0, 0, 0)
        left_layout.setSpacing(4)
        left_layout.addWidget(self.filter)
        left_layout.addWidget(table_area, 1)
        self.team_line = QLabel()  # the runs waiting for the team's server (engine history/library.waiting_words)
        self.team_line.setWordWrap(True)
        self.team_line.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse |
                                               Qt.TextInteractionFlag.LinksAccessibleByMouse)
        self.team_line.setTextFormat(Qt.TextFormat.RichText)
        self.team_line.linkActivated.connect(lambda _: self.stop_waiting())
        self.team_line.hide()
        left_layout.addWidget(self.team_line)
        left_layout.addWidget(self.undo_bar)

        # Table and chart side by side: the table gets the panel's whole height (a dozen rows at 1280x740)
        splitter = QSplitter(Qt.Orientation.Horizontal)
        splitter.setChildrenCollapsible(False)
        # the right side: what the current run is compared with: its devices, or runs that differ in one setting or
        # in their environment, or the selected runs (engine analysis/compare.py and contrast.py)
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
        a = self.run_actions
        buttons.addWidget(button(a.delete))
        buttons.addStretch(1)
        for action in (a.import_runs, a.csv, a.json, a.png, a.markdown, a.report, a.push):
            buttons.addWidget(button(action))

        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.setSpacing(8)
        layout.addWidget(splitter, 1)
        layout.addLayout(buttons)

    def _connect(self) -> None:
        self.contrast_chart.baseline_chosen.connect(self._choose_baseline)
        self.picker.chosen.connect(self._update_chart)
        self.details.note_changed.connect(self.set_note)
        self.details.export_steps.connect(self.files.export_steps_dialog)
        self.details.save_model.connect(lambda _run_id: self.save_model_requested.emit())
        self.filter.textChanged.connect(self.set_filter)
        self.view.delete_pressed.connect(self.deleter.delete_dialog)
        self.view.menu_requested.connect(self._context_menu)
        for part in (self.deleter, self.files, self.reports, self.team):
            part.message.connect(self.message)
        self.team.busy.connect(lambda running: self.run_actions.push.setEnabled(not running))
        self.team.pushed.connect(self.show_waiting)
        self.team.pulled.connect(self.reload)
        self.team.pulled.connect(self.import_finished)
        self.deleter.removed.connect(lambda ids: self._set_runs([r for r in self.model.runs() if r.id not in
                                                                set(ids)], []))
        self.deleter.restored.connect(lambda runs: self._set_runs(
            self.model.runs() + [r for r in runs if self.model.row_of(r.id) is None], [r.id for r in runs]))
        self.files.runs_read.connect(self._set_runs)
        self.files.importing.connect(lambda running: self.run_actions.import_runs.setEnabled(not running))
        self.files.importing.connect(lambda running: None if running else self.import_finished.emit())
        self.table.selectionModel().selectionChanged.connect(self._on_selection_changed)
        self.table.selectionModel().currentRowChanged.connect(self._update_chart)

    # -- the history (engine history/library.py) -------------------------------------------------------------------
    def reload(self) -> None:
        """Read every run's summary from the history (steps and windows are read when a run is selected or
        exported), keeping the selection; unreadable rows are skipped and named."""
        keep = self.selected_ids()
        try:
            runs = self.library.summaries()
        except UserError as exc:  # a history that fails now (another program holds it): one sentence
            self.message.emit(str(exc))
            runs = []
        for notice in self.library.notices:
            self.message.emit(notice)
        self.show_waiting()
        self.reload_inspections()
        self._set_runs(runs, keep)

    def show_waiting(self) -> None:
        """The line under the table: what waits for the team's server (engine history/library.waiting_words)."""
        try:
            waiting = self.library.waiting_words(sends="Push to Team Server")
        except UserError as exc:
            waiting = str(exc)
        self.team_line.setText(f"{html.escape(waiting, quote=False)} <a href=\"drop\">Stop Waiting</a>" if waiting else "")
        self.team_line.setVisible(bool(waiting))

    def stop_waiting(self) -> None:
        """The team_line's Stop Waiting: nothing waits for a team's server any more (the runs stay)."""
        try:
            self.message.emit(self.library.stop_waiting())
        except UserError as exc:
            self.message.emit(str(exc))
        self.show_waiting()

    def reload_inspections(self) -> None:
        """The stored `inspect` and `diagnose` results whose findings (CPU fallbacks, parity) the verdicts name."""
        try:
            findings = self.library.findings()
            self.chart.inspections = list(findings.inspections)
            self.contrast_chart.diagnoses = list(findings.diagnoses)
        except UserError as exc:
            self.chart.inspections = []
            self.message.emit(str(exc))
        self._update_chart()

    def add_inspection(self, result: dict) -> None:
        """An inspection that just finished: the verdict names its findings from now on."""
        self.chart.inspections.append(result)
        self._update_chart()

    def _findings(self) -> tuple[list, list]:
        return self.chart.inspections, self.contrast_chart.diagnoses

    def set_store(self, store: RunStore) -> None:
        """Show another history (a recovered one, say)."""
        self.library.store = store  # the parts hold this library
        self.reload()

    def add_result(self, result: RunResult) -> None:
        """A run that just ended (already saved): add or replace its row, refresh comparisons, select it."""
        runs = [r for r in self.model.runs() if r.id != result.id] + [result]
        self._set_runs(runs, [result.id])

    def results(self) -> list[RunResult]:
        return self.model.runs()

    def comparisons(self) -> list[Comparison]:
        return list(self.model.comparisons)

    def whole_runs(self, ids: list[str] | None = None) -> list[RunResult]:
        """These runs (None = the selection, or all) whole, read from the history where the table holds a summary;
        a run that cannot be read any more is left out and named."""
        return self.files.whole_runs(ids)

    def set_note(self, run_id: str, text: str) -> None:
        """Keep the user's note on a run in the history and in the table."""
        try:
            self.library.set_note(run_id, text)
        except UserError as exc:
            self.message.emit(str(exc))
            return
        row = self.model.row_of(run_id)
        if row is not None:
            self.model.set_note(row, text)
        self.message.emit("Note kept." if text else "Note removed.")

    def _set_runs(self, runs: list[RunResult], select: list[str]) -> None:
        self.model.set_runs(runs)
        self._table_stack.setCurrentWidget(self.table if runs else self.empty)
        self.view.fit_columns()
        self.select_ids([i for i in select if self.model.row_of(i) is not None])
        self._update_actions()
        self._update_chart()
        if not self.selected_ids():  # a reset model clears its selection without a signal: the plots hear it here
            self.selection_changed.emit([])

    # -- the selection and what it shows (selection.py) -----------------------------------------------------------
    def selected_ids(self) -> list[str]:
        return self.selection.ids()

    def select_ids(self, ids: list[str]) -> None:
        self.selection.select(ids)

    def visible_ids(self) -> list[str]:
        return self.selection.visible_ids()

    def current_comparison(self) -> Comparison | None:
        """The comparison of the current row; with nothing selected, the newest comparison."""
        return self.selection.current_comparison()

    def comparison_title(self) -> tuple[str, str]:
        return self.files.comparison_title()

    def export_comparison_png(self, path: str, scale: float | None = None) -> str:
        return self.files.export_comparison_png(path, scale)

    def set_filter(self, text: str) -> None:
        """Show only the runs matching every word of `text` (case-insensitive)."""
        if self.filter.text() != text:
            self.filter.setText(text)
            return
        self.proxy.set_words(text)
        self._update_actions()

    def _on_selection_changed(self, *_) -> None:
        self._update_actions()
        self._update_chart()
        self.selection_changed.emit(self.selected_ids())

    def _update_chart(self, *_) -> None:
        run = self.selection.current_run()
        hint = NO_COMPARISON_HINT
        if run is not None and run.status != "finished":
            what = {"cancelled": "was stopped before the end", "interrupted": "was interrupted"}.get(run.status,
                                                                                                    run.status)
            hint = f"This run {what}; only finished runs are compared"
        self.picker.fill(run)
        scaling = self.picker.shown_scaling()
        shown = self.picker.shown_contrast() if scaling is None else None
        if scaling is not None:
            self._chart_stack.setCurrentWidget(self.scaling_chart)
            self.scaling_chart.show_scaling(scaling)
        elif shown is not None:
            self._chart_stack.setCurrentWidget(self.contrast_chart)
            self.contrast_chart.show_contrast(shown)
        else:
            self._chart_stack.setCurrentWidget(self.chart)
        self.chart.show_comparison(self.current_comparison(), hint)  # kept current, shown or not
        self._update_report_actions()  # what a report would be of changed with the chart
        if run is None:
            self.details.show_run(None)
        elif self.details.run is None or self.details.run.id != run.id:
            whole = self.whole_runs([run.id])
            self.details.show_run(whole[0] if whole else None)

    def _choose_baseline(self, run_id: str) -> None:
        self.picker.baseline_id = run_id
        self._update_chart()

    def _select_current_group(self) -> None:
        c = self.current_comparison()
        if c is not None:
            self.select_ids([r.id for r in c.runs])

    def _update_actions(self) -> None:
        has_runs = self.model.rowCount() > 0
        self.run_actions.delete.setEnabled(bool(self.selected_ids()))
        self.run_actions.csv.setEnabled(has_runs)
        self.run_actions.json.setEnabled(has_runs)
        self.run_actions.png.setEnabled(self.current_comparison() is not None)
        self._update_report_actions()

    def _update_report_actions(self) -> None:
        available = self.reports.available()
        self.run_actions.report.setEnabled(available)
        self.run_actions.markdown.setEnabled(available)

    def _context_menu(self, pos: QPoint) -> None:
        menu = QMenu(self)
        a = self.run_actions
        a.select_group.setEnabled(self.current_comparison() is not None and bool(self.selected_ids()))
        menu.addAction(a.select_group)
        menu.addSeparator()
        for action in (a.csv, a.json, a.png, a.import_runs):
            menu.addAction(action)
        menu.addSeparator()
        menu.addAction(a.delete)
        menu.exec(self.table.viewport().mapToGlobal(pos))

    def closeEvent(self, event) -> None:  # Qt override
        """An import still running finishes first (it is one transaction: all of the file or none)."""
        self.files.wait()
        super().closeEvent(event)
