"""What an exported comparison picture shows: the comparison's rows of the results table and its chart."""

from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QTableView, QVBoxLayout, QWidget

from ...engine.analysis.compare import Comparison
from .run_table import COL, ComparisonProxy, RunTableModel, fit_columns
from .speedup_chart import SpeedupChart

SHEET_HIDDEN = ("State", "Comparison", "Time", "Model", "Dataset", "Batch", "Precision", "Status")


class ComparisonSheet(QWidget):
    """What the exported picture shows: the comparison's rows of the table and its chart."""

    def __init__(self, model: RunTableModel, comparison: Comparison, parent=None):
        super().__init__(parent)
        self.proxy = ComparisonProxy(self, only=[r.id for r in comparison.runs])
        self.proxy.setSourceModel(model)
        self.proxy.sort(0)
        self.table = QTableView()
        self.table.setModel(self.proxy)
        self.table.setAlternatingRowColors(True)
        self.table.setShowGrid(False)
        self.table.verticalHeader().hide()
        self.table.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        self.table.setVerticalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        self.table.setFocusPolicy(Qt.FocusPolicy.NoFocus)
        for name in SHEET_HIDDEN:
            self.table.setColumnHidden(COL[name], True)
        fit_columns(self.table, padding=16)
        self.chart = SpeedupChart(show_title=False)
        self.chart.show_comparison(comparison)
        self.chart.setFixedHeight(300)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.setSpacing(16)
        layout.addWidget(self.table)
        layout.addWidget(self.chart)
        header = self.table.horizontalHeader()
        frame = 2 * self.table.frameWidth()
        table_width = header.length() + frame
        table_height = header.sizeHint().height() + self.table.verticalHeader().length() + frame
        self.table.setFixedHeight(table_height)
        self.resize(max(720, table_width), table_height + 16 + 300)
