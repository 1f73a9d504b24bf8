"""The results panel: every run kept in the history, its comparisons and speedups, a chart, and exports.

The table lives in run_table.py, the chart in speedup_chart.py, the exported picture in comparison_sheet.py.
About 470 lines, on purpose: the panel's actions (delete, exports, the threaded import) share its table,
selection and history, and each is short; the widgets it shows are already in their own modules.
"""

from __future__ import annotations

from pathlib import Path

from PySide6.QtCore import QEvent, QItemSelection, QItemSelectionModel, Qt, QTimer, Signal
from PySide6.QtGui import QAction, QKeySequence
from PySide6.QtWidgets import (QAbstractItemView, QFileDialog, QFrame, QHBoxLayout, QHeaderView, QLabel, QLineEdit,
                               QMenu, QMessageBox, QPushButton, QSplitter, QStackedLayout, QTableView,
                               QVBoxLayout, QWidget)

from ..engine.history import runfiles
from ..engine.analysis.compare import Comparison
from ..engine.basics.errors import UserError
from ..engine.basics.formatting import local_time, plural, printable
from ..engine.basics.results import RunResult
from ..engine.history.store import RunStore
from .comparison_sheet import ComparisonSheet
from .export import render_png
from .run_table import COL, COLUMNS, DEFAULT_HIDDEN, RUN_ID_ROLE, GroupBadgeDelegate, RunSortProxy, RunTableModel, fit_columns
from .run_details import RunDetails
from .settings import settings
from .speedup_chart import NO_COMPARISON_HINT, SpeedupChart
from .style import placeholder_label

__all__ = ["COL", "ResultsPanel"]

SELECT_IMPORTED_UP_TO = 1000  # a larger import is not selected: selecting thousands of rows helps nobody
UNDO_S = 10  # seconds the Undo of a delete is offered
UNDO_UP_TO = 1000  # a delete of more runs asks first instead (Undo would hold them all in memory)


class UndoBar(QFrame):
    """"Deleted 3 runs. [Undo]" under the table for UNDO_S seconds after a delete."""

    undo = Signal()

    def __init__(self, parent=None):
        super().__init__(parent)
        self._runs: list[RunResult] = []
        self.label = QLabel()
        self.button = QPushButton("Undo")
        self.button.setToolTip("Put the deleted runs back (⌘Z)")
        self.button.clicked.connect(self.undo.emit)
        row = QHBoxLayout(self)
        row.setContentsMargins(8, 2, 2, 2)
        row.addWidget(self.label, 1)
        row.addWidget(self.button)
        self.timer = QTimer(self)
        self.timer.setSingleShot(True)
        self.timer.timeout.connect(self.take)
        self.hide()

    def offer(self, text: str, runs: list[RunResult]) -> None:
        self._runs = list(runs)
        self.label.setText(text)
        self.show()
        self.timer.start(UNDO_S * 1000)

    def can_undo(self) -> bool:
        return bool(self._runs)

    def take(self) -> list[RunResult]:
        """The runs to put back (once); hides the bar."""
        runs, self._runs = self._runs, []
        self.timer.stop()
        self.hide()
        return runs


class ResultsPanel(QWidget):
    """Every kept run in a sortable table, the speedup chart of the selected comparison, and exports."""

    message = Signal(str)
    selection_changed = Signal(list)
    save_model_requested = Signal()
    import_finished = Signal()

    def __init__(self, store: RunStore, parent=None):
        super().__init__(parent)
        self.store = store
        self._importer = None
        self._last_dir = str(Path.home())
        self.model = RunTableModel(self)
        self.proxy = RunSortProxy(self)
        self.proxy.setSourceModel(self.model)
        self.table = self._make_table()
        self.chart = SpeedupChart()
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
                               "contain every word typed (⌘F).")
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
        splitter.addWidget(left)
        splitter.addWidget(self.chart)
        splitter.setStretchFactor(0, 3)
        splitter.setStretchFactor(1, 2)
        splitter.setSizes([3000, 2000])  # scaled to the real width: the table gets three fifths
        self.splitter = splitter

        buttons = QHBoxLayout()
        buttons.setSpacing(8)
        buttons.addWidget(self._button(self.delete_action))
        buttons.addStretch(1)
        for action in (self.import_action, self.csv_action, self.json_action, self.png_action):
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

    # construction
    def _make_table(self) -> QTableView:
        table = QTableView()
        table.setModel(self.proxy)
        table.setSortingEnabled(True)
        table.sortByColumn(COL["Time"], Qt.SortOrder.DescendingOrder)
        table.setAlternatingRowColors(True)
        table.setShowGrid(False)
        table.setWordWrap(False)
        table.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
        table.setSelectionMode(QAbstractItemView.SelectionMode.ExtendedSelection)
        table.setTextElideMode(Qt.TextElideMode.ElideMiddle)
        table.setHorizontalScrollMode(QAbstractItemView.ScrollMode.ScrollPerPixel)
        table.setItemDelegateForColumn(COL["Comparison"], GroupBadgeDelegate(table))
        table.verticalHeader().hide()
        table.verticalHeader().setDefaultSectionSize(table.fontMetrics().height() + 8)
        header = table.horizontalHeader()
        header.setHighlightSections(False)
        header.setResizeContentsPrecision(60)  # fit columns to the first 60 rows, not to 10,000
        header.setSectionResizeMode(QHeaderView.ResizeMode.Interactive)
        header.setStretchLastSection(True)
        table.setContextMenuPolicy(Qt.ContextMenuPolicy.CustomContextMenu)
        table.customContextMenuRequested.connect(self._context_menu)
        header.setContextMenuPolicy(Qt.ContextMenuPolicy.CustomContextMenu)
        header.customContextMenuRequested.connect(lambda pos: self.column_menu().exec(header.mapToGlobal(pos)))
        hidden = settings().value("table/hidden_columns", list(DEFAULT_HIDDEN))
        hidden = [hidden] if isinstance(hidden, str) else list(hidden or [])
        for name, col in COL.items():
            table.setColumnHidden(col, name in hidden)
        return table

    def column_menu(self) -> QMenu:
        """The column chooser (right-click a column header): every column but the state and comparison badges,
        checked when shown; the choice is kept between launches."""
        menu = QMenu(self)
        for col, column in enumerate(COLUMNS):
            if not column.header:
                continue
            action = menu.addAction(column.header)
            action.setCheckable(True)
            action.setChecked(not self.table.isColumnHidden(col))
            action.setToolTip(column.tooltip)
            action.toggled.connect(lambda on, c=col: self.set_column_shown(c, on))
        menu.setToolTipsVisible(True)
        menu.addSeparator()
        menu.addAction("Show the Usual Columns", self.reset_columns)
        return menu

    def set_column_shown(self, col: int, shown: bool) -> None:
        self.table.setColumnHidden(col, not shown)
        if shown:
            self._fit_columns()
        settings().setValue("table/hidden_columns", self.hidden_columns())

    def hidden_columns(self) -> list[str]:
        return [name for name, col in COL.items() if self.table.isColumnHidden(col)]

    def reset_columns(self) -> None:
        for name, col in COL.items():
            self.table.setColumnHidden(col, name in DEFAULT_HIDDEN)
        self._fit_columns()
        settings().setValue("table/hidden_columns", self.hidden_columns())

    def _make_actions(self) -> None:
        def action(text: str, tip: str, slot) -> QAction:
            a = QAction(text, self)
            a.setToolTip(tip)
            a.setStatusTip(tip)
            a.triggered.connect(slot)
            return a

        self.delete_action = action("Delete", "Remove the selected runs from the history.", self.delete_dialog)
        self.delete_action.setShortcuts([QKeySequence(QKeySequence.StandardKey.Delete),
                                         QKeySequence(Qt.Key.Key_Backspace)])
        self.delete_action.setShortcutContext(Qt.ShortcutContext.WidgetShortcut)
        self.table.addAction(self.delete_action)
        self.csv_action = action("Export CSV\u2026", "Save the selected runs (all when none is selected) "
                                 "as a spreadsheet file.", self.export_csv_dialog)
        self.json_action = action("Export JSON\u2026", "Save the selected runs (all when none is selected) with "
                                  "every step, to import on another machine.", self.export_json_dialog)
        self.import_action = action("Import\u2026", "Add runs from a JSON file exported by MPS Studio, for "
                                    "example from a CUDA server.", self.import_dialog)
        self.png_action = action("Export comparison\u2026", "Save the selected comparison's table and chart as "
                                 "a PNG picture.", self.export_comparison_dialog)
        self.select_group_action = action("Select Comparison", "Select every run of this comparison.",
                                          self._select_current_group)

    def _button(self, action: QAction) -> QPushButton:
        b = QPushButton(action.text())
        b.setToolTip(action.toolTip())
        b.setAutoDefault(False)
        b.clicked.connect(action.trigger)
        action.changed.connect(lambda: b.setEnabled(action.isEnabled()))
        b.setEnabled(action.isEnabled())
        return b

    def eventFilter(self, watched, event) -> bool:
        """Delete and Backspace on the table delete the selected rows (after asking), also where the
        key reaches the table rather than the action's shortcut."""
        if (watched is self.table and event.type() == QEvent.Type.KeyPress
                and event.key() in (Qt.Key.Key_Delete, Qt.Key.Key_Backspace)
                and event.modifiers() in (Qt.KeyboardModifier.NoModifier, Qt.KeyboardModifier.KeypadModifier)):
            self.delete_dialog()
            return True
        return super().eventFilter(watched, event)

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
            self.chart.inspections = [t.result for t in self.store.tools() if t.kind == "inspect"]
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

    def _fit_columns(self) -> None:
        fit_columns(self.table, caps={"Machine": 200, "Dataset": 160, "Model": 160})

    # selection
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
            hint = f"This run {run.status}; only finished runs are compared"
        self.chart.show_comparison(self.current_comparison(), hint)
        if run is None:
            self.details.show_run(None)
        elif self.details.run is None or self.details.run.id != run.id:
            whole = self.whole_runs([run.id])
            self.details.show_run(whole[0] if whole else None)

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

    def export_steps(self, run_id: str, path: str) -> int:
        """Write one run's loss curve (every step) to CSV; returns the rows written (0 after saying why not)."""
        runs = self.whole_runs([run_id])
        if not runs:
            return 0
        try:
            rows = runfiles.export_steps_csv(runs[0], path)
        except UserError as exc:
            self.message.emit(str(exc))
            return 0
        self.message.emit(f"Exported {plural(rows, 'step')} of the loss curve to {Path(path).name}.")
        return rows

    def export_steps_dialog(self, run_id: str = "") -> None:
        run = self._current_run() if not run_id else self.model.run_at(self.model.row_of(run_id))
        if run is None:
            self.message.emit("Select a run first; its loss curve is exported as CSV.")
            return
        name = f"{run.config.model}-{run.config.device.replace(':', '')}-loss.csv"
        path = self._save_path("Export Loss Curve as CSV", name, "CSV files (*.csv)", ".csv")
        if path:
            self.export_steps(run.id, path)

    def set_filter(self, text: str) -> None:
        """Show only the runs matching every word of `text` (case-insensitive)."""
        if self.filter.text() != text:
            self.filter.setText(text)
            return
        self.proxy.set_words(text)
        self._update_actions()

    def visible_ids(self) -> list[str]:
        return [self.proxy.index(r, 0).data(RUN_ID_ROLE) for r in range(self.proxy.rowCount())]

    def undo_delete(self) -> None:
        """Put back the runs of the last delete (within UNDO_S of it), whole, with their notes."""
        runs = self.undo_bar.take()
        if not runs:
            return
        try:
            self.store.restore(runs)
        except UserError as exc:
            self.message.emit(str(exc))
            return
        self._set_runs(self.model.runs() + [r for r in runs if self.model.row_of(r.id) is None], [r.id for r in runs])
        self.message.emit(f"Put back {plural(len(runs), 'run')}.")

    def _update_actions(self) -> None:
        has_runs = self.model.rowCount() > 0
        self.delete_action.setEnabled(bool(self.selected_ids()))
        self.csv_action.setEnabled(has_runs)
        self.json_action.setEnabled(has_runs)
        self.png_action.setEnabled(self.current_comparison() is not None)

    def _select_current_group(self) -> None:
        c = self.current_comparison()
        if c is not None:
            self.select_ids([r.id for r in c.runs])

    # actions without questions (tests call these)
    def delete_selected(self) -> None:
        """Remove the selected runs from the history and the table; asks nothing (the button asks)."""
        ids = self.selected_ids()
        if not ids:
            return
        kept = self.whole_runs(ids) if len(ids) <= UNDO_UP_TO else []  # what Undo puts back
        try:
            self.store.delete(ids)
        except UserError as exc:
            self.message.emit(str(exc))
            return
        gone = set(ids)
        self._set_runs([r for r in self.model.runs() if r.id not in gone], [])
        self.message.emit(f"Deleted {plural(len(ids), 'run')}.")
        if kept:
            self.undo_bar.offer(f"Deleted {plural(len(ids), 'run')}.", kept)

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

    def export_csv(self, path: str, ids: list[str] | None = None) -> int:
        """Write runs (ids; None = the selection, or all) to CSV with the table's speedups; returns runs written."""
        runs = self._runs_for(ids)
        try:
            runfiles.export_csv(runs, path, speedups=self.model.speedups)
        except UserError as exc:
            self.message.emit(str(exc))
            return 0
        self.message.emit(f"Exported {plural(len(runs), 'run')} to {Path(path).name}.")
        return len(runs)

    def export_json(self, path: str, ids: list[str] | None = None) -> int:
        """Write runs with every step and their comparisons to JSON, for import elsewhere; returns runs written."""
        runs = self.whole_runs(ids)
        try:
            runfiles.export_json(runs, path)
        except UserError as exc:
            self.message.emit(str(exc))
            return 0
        self.message.emit(f"Exported {plural(len(runs), 'run')} to {Path(path).name}.")
        return len(runs)

    def import_json(self, path: str) -> int:
        """Add the runs of an MPS Studio JSON file, here and now (checked whole: all of them or none); runs
        already in the history stay as they are. Returns how many were added. The menu uses start_import."""
        try:
            runs = runfiles.import_json(path)
            added, known = self.store.add_imported(runs)
        except UserError as exc:
            self.message.emit(str(exc))
            return 0
        self._imported(path, [r.id for r in runs], added, known)
        return added

    def start_import(self, path: str) -> None:
        """Import off the GUI thread with progress (a file of thousands of runs takes seconds to check)."""
        from .worker import ImportWorker

        if self._importer is not None:
            self.message.emit("An import is still running; wait for it to finish.")
            return
        self._importer = ImportWorker(path, self.store, self)
        # bound methods, not lambdas: Qt drops the connections if the panel goes first
        self._importer.progress.connect(self._on_import_progress)
        self._importer.done.connect(self._on_import_done)
        self._importer.rejected.connect(self.message.emit)
        self._importer.finished.connect(self._import_finished)
        self.import_action.setEnabled(False)
        self._importer.start()

    def _on_import_progress(self, fraction: float) -> None:
        if self._importer is not None:
            self.message.emit(f"Checking {printable(Path(self._importer.path).name)}… {fraction:.0%}")

    def _on_import_done(self, ids: list, added: int, known: int, runs: object) -> None:
        if self._importer is not None:
            self._imported(self._importer.path, ids, added, known, runs)

    def _import_finished(self) -> None:
        importer, self._importer = self._importer, None
        if importer is not None:
            importer.wait()  # `finished` comes just before the thread ends: deleting it sooner aborts the app
            importer.deleteLater()
        self.import_action.setEnabled(True)
        self.import_finished.emit()

    def closeEvent(self, event) -> None:  # noqa: N802 (Qt override)
        """An import still running finishes first (it is one transaction: all of the file or none)."""
        if self._importer is not None:
            self._importer.wait()
        super().closeEvent(event)

    def _imported(self, path: str, ids: list[str], added: int, known: int, runs: list | None = None) -> None:
        if runs is None:
            self.reload()
        else:  # already read by the import's thread
            for notice in self.store.notices:
                self.message.emit(notice)
            self._set_runs(runs, [])
        self.select_ids(ids if len(ids) <= SELECT_IMPORTED_UP_TO else [])
        note = f" ({plural(known, 'run')} already in the history)" if known else ""
        self.message.emit(f"Imported {plural(added, 'run')} from {printable(Path(path).name)}{note}.")

    def export_comparison_png(self, path: str, scale: float | None = None) -> str:
        """Save the current comparison's rows and chart as a PNG with a title; returns the path.

        Raises UserError (one sentence) when no comparison is selected or the file cannot be written.
        """
        c = self._require_comparison()
        title, subtitle = self.comparison_title()
        sheet = ComparisonSheet(self.model, c)
        sheet.setAttribute(Qt.WidgetAttribute.WA_DontShowOnScreen)
        sheet.show()
        try:
            out = render_png(sheet, path, title, subtitle, scale)
        finally:
            sheet.close()
            sheet.deleteLater()
        self.message.emit(f"Saved comparison {self.model.letter_of(c)} to {Path(path).name}.")
        return out

    def comparison_title(self) -> tuple[str, str]:
        """Title and subtitle of the current comparison for pictures, e.g.
        ("resnet18 on cifar10 \u00b7 batch 128 \u00b7 fp32", "21 Nov 2026 \u00b7 Apple M2 Pro, macOS 14.5")."""
        c = self._require_comparison()
        newest = max(r.created_at for r in c.runs)
        dt = local_time(newest)
        date = f"{dt.day} {dt:%b %Y}" if dt else newest[:10]
        machines = list(dict.fromkeys(r.machine for r in c.runs))
        return c.title(" \u00b7 "), f"{date} \u00b7 {' + '.join(machines)}"

    def _require_comparison(self) -> Comparison:
        c = self.current_comparison()
        if c is None:
            raise UserError("Select a run that belongs to a comparison first; run the same setup on two devices "
                            "to make one.")
        return c

    # actions with questions (buttons, menu, keys)
    def delete_dialog(self) -> None:
        """Delete (button, menu, Delete/Backspace key): at once, with Undo for UNDO_S seconds (⌘Z); more than
        UNDO_UP_TO runs cannot be undone, so that asks first."""
        ids = self.selected_ids()
        if ids and (len(ids) <= UNDO_UP_TO or self.confirm_delete(len(ids))):
            self.delete_selected()

    def confirm_delete(self, count: int) -> bool:
        box = QMessageBox(self)
        box.setIcon(QMessageBox.Icon.Warning)
        box.setText(f"Delete {plural(count, 'run')}?" if count > 1 else "Delete this run?")
        box.setInformativeText(f"More than {UNDO_UP_TO:,} runs cannot be put back with Undo; export them first "
                               "to keep a copy.")
        delete = box.addButton("Delete", QMessageBox.ButtonRole.DestructiveRole)
        box.addButton(QMessageBox.StandardButton.Cancel)
        box.setDefaultButton(QMessageBox.StandardButton.Cancel)
        box.exec()
        return box.clickedButton() is delete

    def _save_path(self, caption: str, name: str, filters: str, suffix: str) -> str:
        path, _ = QFileDialog.getSaveFileName(self, caption, str(Path(self._last_dir) / name), filters)
        if not path:
            return ""
        if not path.lower().endswith(suffix):
            path += suffix
        self._last_dir = str(Path(path).parent)
        return path

    def export_csv_dialog(self) -> None:
        path = self._save_path("Export Runs as CSV", "mpsstudio-runs.csv", "CSV files (*.csv)", ".csv")
        if path:
            self.export_csv(path)

    def export_json_dialog(self) -> None:
        path = self._save_path("Export Runs as JSON", "mpsstudio-runs.json", "JSON files (*.json)", ".json")
        if path:
            self.export_json(path)

    def import_dialog(self) -> None:
        path, _ = QFileDialog.getOpenFileName(self, "Import Runs", self._last_dir,
                                              "MPS Studio runs (*.json);;All files (*)")
        if path:
            self._last_dir = str(Path(path).parent)
            self.start_import(path)

    def export_comparison_dialog(self) -> None:
        c = self.current_comparison()
        name = "comparison.png"
        if c is not None:
            cfg = c.config
            name = f"{cfg.model}-{cfg.dataset}-batch{cfg.batch_size}-{cfg.precision}.png"
        path = self._save_path("Export Comparison as PNG", name, "PNG images (*.png)", ".png")
        if path:
            try:
                self.export_comparison_png(path)
            except UserError as exc:
                self.message.emit(str(exc))

    def _context_menu(self, pos) -> None:
        menu = QMenu(self)
        has_group = self.current_comparison() is not None and bool(self.selected_ids())
        self.select_group_action.setEnabled(has_group)
        menu.addAction(self.select_group_action)
        menu.addSeparator()
        for a in (self.csv_action, self.json_action, self.png_action, self.import_action):
            menu.addAction(a)
        menu.addSeparator()
        menu.addAction(self.delete_action)
        menu.exec(self.table.viewport().mapToGlobal(pos))
