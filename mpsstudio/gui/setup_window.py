"""Help → PyTorch Setup: every part of the setup with ✓/✗, the fix for each ✗, Copy Report and Check Again.
The rows are the engine's (environment.setup_rows); this window only shows them."""

from __future__ import annotations

from PySide6.QtCore import Qt, Signal
from PySide6.QtGui import QColor, QGuiApplication
from PySide6.QtWidgets import QDialog, QHeaderView, QLabel, QPushButton, QTableWidgetItem, QVBoxLayout

from ..engine.machine.environment import SetupRow, setup_report
from .style import close_row, facts_table

HEADERS = ("", "Part", "Found", "What to do")
MARKS = {True: ("\u2713", "#248a3d"), False: ("\u2715", "#c4302b"), None: ("\u2022", "")}


class SetupWindow(QDialog):
    """A window (not modal) listing the setup; `check_again` asks the main window to look again."""

    check_again = Signal()

    def __init__(self, parent=None):
        super().__init__(parent)
        self.setWindowTitle("PyTorch Setup")
        self.setModal(False)
        self.rows: list[SetupRow] = []
        self.headline = QLabel()
        self.headline.setWordWrap(True)
        self.table = facts_table(HEADERS)
        self.table.setWordWrap(True)
        header = self.table.horizontalHeader()
        for col, mode in enumerate((QHeaderView.ResizeMode.ResizeToContents, QHeaderView.ResizeMode.ResizeToContents,
                                    QHeaderView.ResizeMode.Interactive, QHeaderView.ResizeMode.Stretch)):
            header.setSectionResizeMode(col, mode)
        header.resizeSection(2, 320)  # the findings read on one or two lines
        self.copy_button = QPushButton("Copy Report")
        self.copy_button.setToolTip("Copy every row as text, e.g. for a bug report.")
        self.copy_button.clicked.connect(self.copy_report)
        self.again_button = QPushButton("Check Again")
        self.again_button.setToolTip("Look for the devices again and test each in a fresh process.")
        self.again_button.clicked.connect(self._again)
        layout = QVBoxLayout(self)
        layout.addWidget(self.headline)
        layout.addWidget(self.table, 1)
        layout.addLayout(close_row(self, self.copy_button, self.again_button))
        self.resize(860, 480)
        self.show_rows(None)

    def show_rows(self, rows: list[SetupRow] | None) -> None:
        """The engine's rows; None while PyTorch is still loading."""
        self.again_button.setEnabled(rows is not None)
        self.copy_button.setEnabled(bool(rows))
        if rows is None:
            self.headline.setText("Loading PyTorch… the setup is checked as soon as it has loaded.")
            self.table.setRowCount(0)
            return
        self.rows = list(rows)
        failing = [r for r in rows if r.ok is False]
        self.headline.setText(
            "<b>Everything MPS Studio needs works.</b>" if not failing else
            f"<b>{len(failing)} part{'s' if len(failing) != 1 else ''} need{'s' if len(failing) == 1 else ''} "
            f"attention</b>: the last column says what to do.")
        self.table.setRowCount(len(rows))
        for i, r in enumerate(rows):
            glyph, colour = MARKS[r.ok]
            mark = QTableWidgetItem(glyph)
            mark.setTextAlignment(Qt.AlignmentFlag.AlignCenter)
            if colour:
                mark.setForeground(QColor(colour))
            mark.setToolTip({True: "works", False: "needs attention", None: "a fact"}[r.ok])
            self.table.setItem(i, 0, mark)
            for col, text in ((1, r.name), (2, r.value), (3, r.fix)):
                item = QTableWidgetItem(text)
                item.setToolTip(text)
                self.table.setItem(i, col, item)
        self.table.resizeRowsToContents()

    def report(self) -> str:
        return setup_report(self.rows)

    def copy_report(self) -> None:
        QGuiApplication.clipboard().setText(self.report())
        self.headline.setText(self.headline.text().split("<br>")[0] + "<br>The report is on the clipboard.")

    def _again(self) -> None:
        self.show_rows(None)
        self.check_again.emit()
