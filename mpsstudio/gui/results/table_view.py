"""The results panel's table view, columns and actions."""

from __future__ import annotations

from PySide6.QtCore import QEvent, Qt
from PySide6.QtGui import QAction, QKeySequence
from PySide6.QtWidgets import QAbstractItemView, QHeaderView, QMenu, QPushButton, QTableView

from ..settings import settings
from .run_table import COL, COLUMNS, DEFAULT_HIDDEN, GroupBadgeDelegate, fit_columns


class TableViewMixin:
    """The runs table's view: its columns (the chooser, kept in the settings), its actions and buttons, its context menu and keys."""

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
                                 "a PNG picture, and its curves beside it (NAME-plots.png).", self.export_comparison_dialog)
        self.markdown_action = action("Copy as Markdown", "Copy the comparison on screen (or the selected run) as "
                                      "Markdown: tables with units and intervals, the verdict, the environment "
                                      "folded; no paths or names.", self.copy_markdown)
        self.report_action = action("Export Report\u2026", "Save the comparison on screen (or the selected run) as "
                                    "one HTML file with its chart, to open in any browser, offline.",
                                    self.export_report_dialog)
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

    def _fit_columns(self) -> None:
        fit_columns(self.table, caps={"Machine": 200, "Dataset": 160, "Model": 160})

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
