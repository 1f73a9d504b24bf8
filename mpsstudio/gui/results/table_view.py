"""The results panel's table view and its columns (RunsTable), and the panel's actions (RunActions)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from PySide6.QtCore import QEvent, QObject, QPoint, QSortFilterProxyModel, Qt, Signal
from PySide6.QtGui import QAction, QKeySequence
from PySide6.QtWidgets import QAbstractItemView, QHeaderView, QMenu, QPushButton, QTableView, QWidget

from ..settings import settings
from .run_table import COL, COLUMNS, DEFAULT_HIDDEN, GroupBadgeDelegate, fit_columns


class RunsTable(QObject):
    """The runs table's view: its columns (the chooser, kept in the settings) and keys. `delete_pressed` for Delete
    or Backspace on it; `menu_requested(pos)` for its context menu (the panel's actions)."""

    delete_pressed = Signal()
    menu_requested = Signal(QPoint)

    def __init__(self, proxy: QSortFilterProxyModel, parent: QWidget) -> None:
        super().__init__(parent)
        self._parent = parent
        self.table = self._make_table(proxy)
        self.table.installEventFilter(self)

    def _make_table(self, proxy: QSortFilterProxyModel) -> QTableView:
        table = QTableView()
        table.setModel(proxy)
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
        table.customContextMenuRequested.connect(self.menu_requested)
        header.setContextMenuPolicy(Qt.ContextMenuPolicy.CustomContextMenu)
        header.customContextMenuRequested.connect(lambda pos: self.column_menu().exec(header.mapToGlobal(pos)))
        stored = settings().value("table/hidden_columns", list(DEFAULT_HIDDEN))
        hidden = [stored] if isinstance(stored, str) else list(stored) if isinstance(stored, (list, tuple)) else []
        for name, col in COL.items():
            table.setColumnHidden(col, name in hidden)
        return table

    def column_menu(self) -> QMenu:
        """The column chooser (right-click a column header): every column but the state and comparison badges,
        checked when shown; the choice is kept between launches."""
        menu = QMenu(self._parent)
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
            self.fit_columns()
        settings().setValue("table/hidden_columns", self.hidden_columns())

    def hidden_columns(self) -> list[str]:
        return [name for name, col in COL.items() if self.table.isColumnHidden(col)]

    def reset_columns(self) -> None:
        for name, col in COL.items():
            self.table.setColumnHidden(col, name in DEFAULT_HIDDEN)
        self.fit_columns()
        settings().setValue("table/hidden_columns", self.hidden_columns())

    def eventFilter(self, watched, event) -> bool:
        """Delete and Backspace on the table delete the selected rows (after asking), also where the
        key reaches the table rather than the action's shortcut."""
        if (watched is self.table and event.type() == QEvent.Type.KeyPress
                and event.key() in (Qt.Key.Key_Delete, Qt.Key.Key_Backspace)
                and event.modifiers() in (Qt.KeyboardModifier.NoModifier, Qt.KeyboardModifier.KeypadModifier)):
            self.delete_pressed.emit()
            return True
        return super().eventFilter(watched, event)

    def fit_columns(self) -> None:
        fit_columns(self.table, caps={"Machine": 200, "Dataset": 160, "Model": 160})


@dataclass(frozen=True)
class RunActions:
    """The panel's actions (buttons, the table's context menu, the window's menus)."""

    delete: QAction
    csv: QAction
    json: QAction
    import_runs: QAction
    png: QAction
    markdown: QAction
    report: QAction
    select_group: QAction
    push: QAction

    @classmethod
    def made(cls, parent: QWidget, slots: dict[str, Callable]) -> RunActions:
        """Each action with its words and tip, triggering `slots[its field name]`."""
        def action(text: str, tip: str, name: str) -> QAction:
            a = QAction(text, parent)
            a.setToolTip(tip)
            a.setStatusTip(tip)
            a.triggered.connect(slots[name])
            return a

        delete = action("Delete", "Remove the selected runs from the history.", "delete")
        delete.setShortcuts([QKeySequence(QKeySequence.StandardKey.Delete), QKeySequence(Qt.Key.Key_Backspace)])
        delete.setShortcutContext(Qt.ShortcutContext.WidgetShortcut)
        return cls(
            delete=delete,
            csv=action("Export CSV\u2026", "Save the selected runs (all when none is selected) as a spreadsheet file.",
                       "csv"),
            json=action("Export JSON\u2026", "Save the selected runs (all when none is selected) with every step, to "
                        "import on another machine.", "json"),
            import_runs=action("Import\u2026", "Add runs from a JSON file exported by MPS Studio, for example from a "
                               "CUDA server.", "import_runs"),
            png=action("Export comparison\u2026", "Save the selected comparison's table and chart as a PNG picture, "
                       "and its curves beside it (NAME-plots.png).", "png"),
            markdown=action("Copy as Markdown", "Copy the comparison on screen (or the selected run) as Markdown: "
                            "tables with units and intervals, the verdict, the environment folded; no paths or names.",
                            "markdown"),
            report=action("Export Report\u2026", "Save the comparison on screen (or the selected run) as one HTML file "
                          "with its chart, to open in any browser, offline.", "report"),
            select_group=action("Select Comparison", "Select every run of this comparison.", "select_group"),
            push=action("Push to Team Server", "Send the selected runs (with none selected, every run and tool "
                        "result) to your team's MLflow tracking server (Preferences); what it does not take waits "
                        "and goes with the next push.", "push"),
        )


def button(action: QAction) -> QPushButton:
    """A push button that triggers `action` and follows its enabled state."""
    b = QPushButton(action.text())
    b.setToolTip(action.toolTip())
    b.setAutoDefault(False)
    b.clicked.connect(action.trigger)
    action.changed.connect(lambda: b.setEnabled(action.isEnabled()))
    b.setEnabled(action.isEnabled())
    return b
