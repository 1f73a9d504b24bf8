"""The results table's model: runs as rows, the columns of table_columns.py (cells.py formats them).

Cells are formatted once per change, so sorting and painting stay cheap; numbers come from the engine's
summaries and speedups and are only formatted here, never computed.
"""

from __future__ import annotations

from PySide6.QtCore import QAbstractTableModel, QModelIndex, QPersistentModelIndex, Qt
from PySide6.QtGui import QColor, QPalette
from PySide6.QtWidgets import QApplication

from ...engine.analysis.compare import Comparison, compare, speedup_map
from ...engine.basics.formatting import instant, local_time
from ...engine.basics.results import RunResult
from ...engine.history.columns import BY_KEY
from ..style import warning_color
from .cells import run_cells
from .proxies import ComparisonProxy, GroupBadgeDelegate, RunSortProxy, fit_columns
from .table_columns import (COL, COLUMNS, DEFAULT_HIDDEN, RUN_ID_ROLE, SORT_ROLE, STATE_GLYPHS, STATE_WORDS, Cell,
                            fmt_time, group_letter, sort_number)

__all__ = ["COL", "COLUMNS", "DEFAULT_HIDDEN", "RUN_ID_ROLE", "SORT_ROLE", "STATE_GLYPHS", "STATE_WORDS", "Cell",
           "ComparisonProxy", "GroupBadgeDelegate", "RunSortProxy", "RunTableModel", "fit_columns", "fmt_time",
           "group_letter", "sort_number"]


class RunTableModel(QAbstractTableModel):
    """Runs as rows. A row's cells are formatted when first shown and a column's sort keys when first sorted by,
    then kept until the runs change: a history of 10,000 runs opens without formatting rows nobody sees."""

    def __init__(self, parent=None):
        super().__init__(parent)
        self._runs: list[RunResult] = []
        self._cells: list[list[Cell] | None] = []
        self._sort_keys: dict[int, list] = {}
        self._search: list[str | None] = []
        self._sort_spec = (COL["Time"], Qt.SortOrder.DescendingOrder)  # newest first until a header is clicked
        self._row_of: dict[str, int] = {}
        self.comparisons: list[Comparison] = []
        self.letters: dict[int, str] = {}  # id(comparison) -> letter
        self.comparison_of: dict[str, Comparison] = {}
        self.speedups: dict[str, float | None] = {}

    # data in
    def set_runs(self, runs: list[RunResult]) -> None:
        self.beginResetModel()
        self._runs = list(runs)
        self._row_of = {r.id: i for i, r in enumerate(self._runs)}
        self.comparisons = sorted(compare(self._runs), key=lambda c: min(instant(r.created_at) for r in c.runs))
        self.letters = {id(c): group_letter(i) for i, c in enumerate(self.comparisons)}
        self.comparison_of = {r.id: c for c in self.comparisons for r in c.runs}
        self.speedups = speedup_map(self.comparisons)
        self._cells = [None] * len(self._runs)
        self._search = [None] * len(self._runs)
        self._sort_keys = {}
        self._apply_sort()
        self.endResetModel()

    def sort(self, column: int, order=Qt.SortOrder.AscendingOrder) -> None:
        """Sort the rows here, in Python, by the column's raw keys: ~10 ms for 10,000 runs, where Qt's proxy
        sort asks data() ~150,000 times. The view's selection follows its rows."""
        if not 0 <= column < len(COLUMNS):
            return
        self._sort_spec = (column, order)
        self.layoutAboutToBeChanged.emit()
        before = self.persistentIndexList()
        moved = self._apply_sort()
        self.changePersistentIndexList(before, [self.index(moved[i.row()], i.column()) for i in before])
        self.layoutChanged.emit()

    def _apply_sort(self) -> list[int]:
        """Reorder the rows by the current sort; returns each old row's new row."""
        column, order = self._sort_spec
        keys = [self._sort_key(i, column) for i in range(len(self._runs))]
        new_order = sorted(range(len(self._runs)), key=keys.__getitem__,
                           reverse=order == Qt.SortOrder.DescendingOrder)
        self._runs = [self._runs[i] for i in new_order]
        self._cells = [self._cells[i] for i in new_order]
        self._search = [self._search[i] for i in new_order]
        self._sort_keys = {c: [k[i] for i in new_order] for c, k in self._sort_keys.items()}
        self._row_of = {r.id: i for i, r in enumerate(self._runs)}
        moved = [0] * len(new_order)
        for new, old in enumerate(new_order):
            moved[old] = new
        return moved

    def _row_cells(self, row: int) -> list[Cell]:
        cells = self._cells[row]
        if cells is None:
            run = self._runs[row]
            comparison = self.comparison_of.get(run.id)
            cells = self._cells[row] = run_cells(run, comparison, self.letter_of(comparison), self.speedups)
        return cells

    def _sort_key(self, row: int, col: int):
        keys = self._sort_keys.get(col)
        if keys is None:
            keys = self._sort_keys[col] = [self._sort_value(r, COLUMNS[col].key) for r in self._runs]
        return keys[row]

    def _sort_value(self, r: RunResult, key: str):
        """What a column sorts by: the raw number (missing below every number), or lower-case text."""
        if key == "comparison":
            return self.letter_of(self.comparison_of.get(r.id)) or "~"
        if key == "state":
            return r.status
        if key == "note":
            return r.note.lower()
        if key == "time":
            dt = local_time(r.created_at)
            return dt.timestamp() if dt else 0.0
        if key == "machine":
            return (r.machine + (" (imported)" if r.origin == "imported" else "")).lower()
        column = BY_KEY[key]
        value = column.value(r, self.speedups)
        return sort_number(value) if column.numeric else str(value).lower()

    def runs(self) -> list[RunResult]:
        return list(self._runs)

    def set_note(self, row: int, text: str) -> None:
        self._runs[row].note = text
        self._cells[row] = None
        self._search[row] = None
        self._sort_keys.pop(COL["Note"], None)
        self.dataChanged.emit(self.index(row, 0), self.index(row, len(COLUMNS) - 1))

    def search_text(self, row: int) -> str:
        """What the filter box searches: model, dataset, device, machine, precision, status and note."""
        text = self._search[row]
        if text is None:
            r = self._runs[row]
            c = r.config
            text = self._search[row] = " ".join(
                (c.model, c.dataset, c.device, r.machine, c.precision or "", r.status, r.note,
                 "imported" if r.origin == "imported" else "", "noisy" if r.summary.stability == "noisy"
                 else "")).lower()
        return text

    def run_at(self, row: int) -> RunResult:
        return self._runs[row]

    def row_of(self, run_id: str) -> int | None:
        return self._row_of.get(run_id)

    def letter_of(self, c: Comparison | None) -> str:
        return self.letters.get(id(c), "") if c is not None else ""

    # Qt model interface
    def rowCount(self, parent=QModelIndex()) -> int:
        return 0 if parent.isValid() else len(self._runs)

    def columnCount(self, parent=QModelIndex()) -> int:
        return 0 if parent.isValid() else len(COLUMNS)

    def headerData(self, section, orientation, role=Qt.ItemDataRole.DisplayRole):
        if orientation != Qt.Orientation.Horizontal:
            return None
        col = COLUMNS[section]
        if role == Qt.ItemDataRole.DisplayRole:
            return col.header
        if role == Qt.ItemDataRole.ToolTipRole:
            return col.tooltip
        if role == Qt.ItemDataRole.TextAlignmentRole:
            return int((Qt.AlignmentFlag.AlignRight if col.numeric else Qt.AlignmentFlag.AlignLeft)
                       | Qt.AlignmentFlag.AlignVCenter)
        return None

    def data(self, index: QModelIndex | QPersistentModelIndex, role=Qt.ItemDataRole.DisplayRole):
        if not index.isValid():
            return None
        row, col = index.row(), index.column()
        run = self._runs[row]
        if role == SORT_ROLE:
            return self._sort_key(row, col)
        if role == RUN_ID_ROLE:
            return run.id
        cell = self._row_cells(row)[col]
        if role == Qt.ItemDataRole.DisplayRole:
            return cell.text
        if role == Qt.ItemDataRole.ToolTipRole:
            if run.status == "failed" and run.error and col != COL["State"]:
                return run.error
            return cell.tooltip or None
        if role == Qt.ItemDataRole.AccessibleTextRole and col == COL["State"]:
            return cell.tooltip
        if role == Qt.ItemDataRole.TextAlignmentRole:
            if col in (COL["Comparison"], COL["State"]):
                return int(Qt.AlignmentFlag.AlignCenter)
            return int((Qt.AlignmentFlag.AlignRight if COLUMNS[col].numeric else Qt.AlignmentFlag.AlignLeft)
                       | Qt.AlignmentFlag.AlignVCenter)
        if role == Qt.ItemDataRole.ForegroundRole and col == COL["State"]:
            palette = QApplication.palette()
            if run.status == "failed":
                return warning_color(palette)
            if run.status in ("cancelled", "interrupted"):
                return palette.color(QPalette.ColorRole.PlaceholderText)
            return QColor("#c77c02") if cell.text.startswith("\u26a0") else QColor("#248a3d")  # Apple's orange, green
        if role == Qt.ItemDataRole.ForegroundRole and col == COL["Status"] and run.status != "finished":
            palette = QApplication.palette()
            if run.status == "failed":
                return warning_color(palette)
            return palette.color(QPalette.ColorRole.PlaceholderText)
        return None

    # formatting one run into cells









