"""The results table's helpers: the group badge painted in the comparison column, the sort and filter proxies, and
column widths fitted to their contents (within caps)."""

from __future__ import annotations

from typing import Any

from PySide6.QtCore import QModelIndex, QPersistentModelIndex, QRectF, QSortFilterProxyModel, Qt
from PySide6.QtGui import QColor, QFont, QFontMetrics, QPainter
from PySide6.QtWidgets import QApplication, QStyle, QStyledItemDelegate, QStyleOptionViewItem, QTableView

from ..style import group_color
from .table_columns import COLUMNS, RUN_ID_ROLE, SORT_ROLE


class GroupBadgeDelegate(QStyledItemDelegate):
    """Paints a comparison's letter as a small coloured badge, so runs of one comparison stand out together."""

    def paint(self, painter: QPainter, option: QStyleOptionViewItem, index: QModelIndex | QPersistentModelIndex) -> None:
        letter = index.data(Qt.ItemDataRole.DisplayRole) or ""
        opt = QStyleOptionViewItem(option)
        self.initStyleOption(opt, index)
        opt.text = ""
        style = opt.widget.style() if opt.widget else QApplication.style()
        style.drawControl(QStyle.ControlElement.CE_ItemViewItem, opt, painter, opt.widget)
        if not letter:
            return
        painter.save()
        painter.setRenderHint(QPainter.RenderHint.Antialiasing)
        font = QFont(opt.font)
        font.setBold(True)
        font.setPointSizeF(max(font.pointSizeF() * 0.85, 7.0))
        fm = QFontMetrics(font)
        h = min(opt.rect.height() - 6, fm.height() + 2)
        w = max(h, fm.horizontalAdvance(letter) + 10)
        badge = QRectF(opt.rect.center().x() - w / 2 + 0.5, opt.rect.center().y() - h / 2 + 0.5, w, h)
        painter.setPen(Qt.PenStyle.NoPen)
        painter.setBrush(group_color(letter))
        painter.drawRoundedRect(badge, h / 2, h / 2)
        painter.setPen(QColor("white"))
        painter.setFont(font)
        painter.drawText(badge, Qt.AlignmentFlag.AlignCenter, letter)
        painter.restore()



def fit_columns(table: QTableView, caps: dict[str, int] | None = None, padding: int = 10) -> None:
    """Columns as wide as their cells or header text plus some air (not the header's sort-arrow allowance,
    which would push the last columns off screen); long text columns are capped and elide."""
    header = table.horizontalHeader()
    fm = header.fontMetrics()
    for col in range(len(COLUMNS)):
        if table.isColumnHidden(col):
            continue
        title = COLUMNS[col].header
        if COLUMNS[col].key == "state":
            header.resizeSection(col, fm.horizontalAdvance("\u2713") + 18)
            continue
        width = max(table.sizeHintForColumn(col), fm.horizontalAdvance(title) + 12 if title else 20) + padding
        cap = (caps or {}).get(title)
        header.resizeSection(col, min(width, cap) if cap else width)


class RunSortProxy(QSortFilterProxyModel):
    """The table's view of the model: it filters (set_filter), and hands sorting to the model (RunTableModel.sort,
    by raw keys: a float per numeric column, lower-case text otherwise), which keeps the rows in that order."""

    def __init__(self, parent=None):
        super().__init__(parent)
        self.setSortRole(SORT_ROLE)

    def sort(self, column: int, order=Qt.SortOrder.AscendingOrder) -> None:
        self.sourceModel().sort(column, order)

    _words: tuple[str, ...] = ()

    def set_words(self, text: str) -> None:
        """Keep the runs whose search text (RunTableModel.search_text) holds every word of `text`."""
        words = tuple(text.lower().split())
        if words == self._words:
            return
        if hasattr(self, "endFilterChange"):  # Qt 6.9 and later (invalidateFilter is deprecated there)
            self.beginFilterChange()
            self._words = words
            self.endFilterChange(QSortFilterProxyModel.Direction.Rows)
        else:
            self._words = words
            self.invalidateFilter()

    def filterAcceptsRow(self, source_row: int, source_parent: QModelIndex | QPersistentModelIndex) -> bool:  # Qt API
        if not self._words:
            return True
        model: Any = self.sourceModel()  # the RunTableModel (run_table.py)
        text = model.search_text(source_row)
        return all(w in text for w in self._words)


class ComparisonProxy(QSortFilterProxyModel):
    """Only the given runs, in the given order (the rows of one comparison)."""

    def __init__(self, parent=None, only: tuple[str, ...] | list[str] = ()):
        super().__init__(parent)
        self._order = {run_id: i for i, run_id in enumerate(only)}

    def filterAcceptsRow(self, source_row: int, source_parent: QModelIndex | QPersistentModelIndex) -> bool:
        run_id = self.sourceModel().index(source_row, 0, source_parent).data(RUN_ID_ROLE)
        return run_id in self._order

    def lessThan(self, left: QModelIndex | QPersistentModelIndex, right: QModelIndex | QPersistentModelIndex) -> bool:
        return self._order[left.data(RUN_ID_ROLE)] < self._order[right.data(RUN_ID_ROLE)]
