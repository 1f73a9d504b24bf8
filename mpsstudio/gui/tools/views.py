"""The pieces of the Tools tab's views: a table of the engine's cells, a chart over a panel, a sentence above a table,
and a diagnosis's view (its bars, phases, memory and layers)."""

from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QAbstractItemView, QLabel, QSplitter, QTableWidget, QTableWidgetItem, QVBoxLayout, QWidget

from ...engine.basics.formatting import Table
from .plots import DiagnosePlot


def table_widget(table: Table) -> QTableWidget:
    headers, rows, numeric = table.headers, table.rows, table.numeric
    t = QTableWidget(len(rows), len(headers))
    t.setHorizontalHeaderLabels(headers)
    t.verticalHeader().setVisible(False)
    t.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
    t.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
    t.setAlternatingRowColors(True)
    for r, row in enumerate(rows):
        for c, text in enumerate(row):
            item = QTableWidgetItem(text)
            item.setToolTip(text)
            if numeric[c]:
                item.setTextAlignment(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
            t.setItem(r, c, item)
    t.resizeColumnsToContents()
    for c in range(len(headers)):  # a long reason (an out-of-memory message) is read in full in its tooltip
        t.setColumnWidth(c, min(t.columnWidth(c), 420))
    t.horizontalHeader().setStretchLastSection(True)
    return t


def chart_over(plot: QWidget) -> tuple[QSplitter, QVBoxLayout]:
    """A chart over a panel (its layout returned, for labels and tables), in a vertical splitter."""
    box = QSplitter(Qt.Orientation.Vertical)
    box.addWidget(plot)
    lower = QWidget()
    layout = QVBoxLayout(lower)
    layout.setContentsMargins(0, 0, 0, 0)
    box.addWidget(lower)
    return box, layout


def diagnose_view(result: dict) -> QWidget:
    """The stacked bars of each device's step, the table of phases, each device's memory and, where layers were
    compared, the layer table around the first one beyond tolerance."""
    from ...engine.tools.diagnose.view import anatomy_table, layers_table, memory_cells, read
    from ...engine.tools.records.diagnose import Diagnosed

    diagnosis = read(result)
    plot = DiagnosePlot()
    plot.show_diagnosis(diagnosis)
    box, ll = chart_over(plot)
    ll.addWidget(table_widget(anatomy_table(diagnosis)), 1)
    for d in diagnosis.devices:
        if not isinstance(d, Diagnosed):
            continue
        memory = QLabel(f"{d.device}: memory after the diagnostic steps: {memory_cells(d)}")
        memory.setWordWrap(True)
        ll.addWidget(memory)
        for found, when in ((d.layers, "layer by layer"), (d.after_layers, "layer by layer after training")):
            if found:
                label = QLabel(f"{d.device}, {when} against the float64 CPU reference ({found.precision}, "
                               f"tolerance {found.tolerance:.0e}; ▶ marks the first beyond it):")
                label.setWordWrap(True)
                ll.addWidget(label)
                ll.addWidget(table_widget(layers_table(found)), 1)
    box.setStretchFactor(0, 3)
    box.setStretchFactor(1, 2)
    box.setSizes([330, 220])
    box.setObjectName("diagnose")
    return box


def words_label(text: str) -> QLabel:
    """A sentence above a table: wrapped, so that no sentence sets the window's width."""
    label = QLabel(text)
    label.setWordWrap(True)
    return label


SHORT_TABLE = 8  # rows a table shows whole, at its own height, when a section has several


def section_view(tables: list[Table]) -> QWidget:
    """A result whose tool has no view of its own: its row's section (tools/registry.py), each table with its legend
    under it; one table without a legend is the table itself."""
    if len(tables) == 1 and not tables[0].legend:
        return table_widget(tables[0])
    box = QWidget()
    layout = QVBoxLayout(box)
    layout.setContentsMargins(0, 0, 0, 0)
    for table in tables:
        grid = table_widget(table)
        if len(tables) > 1 and len(table.rows) <= SHORT_TABLE:  # a short table beside a long one: its own height
            grid.setFixedHeight(grid.horizontalHeader().height() + grid.verticalHeader().length()
                                + 2 * grid.frameWidth() + grid.horizontalScrollBar().sizeHint().height())
            layout.addWidget(grid)
        else:
            layout.addWidget(grid, 1)
        if table.legend:
            layout.addWidget(words_label(table.legend))
    if not tables:
        layout.addWidget(words_label("This result has no table: the sentence above is its answer."))
        layout.addStretch(1)
    return box
