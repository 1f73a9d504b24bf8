"""A tune's result in the Tools tab: samples/s against peak memory, one point per measured candidate (whiskers: its
interval; unusable ones crossed out; the recommendation ringed), above the engine's table (toolview.tune_table),
sortable by any column, and Apply, which puts the selected candidate's settings into the setup."""

from __future__ import annotations

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import Qt, Signal
from PySide6.QtGui import QColor, QPalette
from PySide6.QtWidgets import (QAbstractItemView, QHBoxLayout, QPushButton, QSplitter, QTableWidget, QTableWidgetItem,
                               QVBoxLayout, QWidget)

from ...engine.basics.formatting import is_finite
from ...engine.tools import toolview
from ...engine.tools.records.tune import TuneResult, TuneRow
from ..style import device_color, warning_color
from .plots import SweepPlot

MIB = 1024 * 1024
TUNE_HEADER_TIPS = {
    "samples/s (measured)": "The median of the rounds' medians (each a short run with every run's rules).",
    "interval": "samples/s over the rounds: their range up to 8 rounds, from 9 the 95 % interval of the median "
                "(order statistics); after one round the 95 % bootstrap over measurement windows.",
    "vs current": "samples/s over your current settings' on the same device, paired round by round: the median and "
                  "its interval as for samples/s (one round: the 95 % bootstrap interval).",
    "peak memory": "The device's peak memory as the run records it (measured).",
    "warm-up": "The warm-up steps' time, torch.compile's compilation included (measured apart from samples/s).",
    "loss vs fp32": "The loss after the same steps from the same seed, against fp32 at the same batch on the same "
                    "device.",
    "parity": "One step against the CPU in float64 (inspect). On the CPU itself: the precision's own rounding.",
}


class TunePlot(pg.PlotWidget):
    """Throughput (y) against peak memory (x), the candidates of each device in its colour."""

    def __init__(self, parent=None):
        super().__init__(parent)
        self.setMenuEnabled(False)
        self.hideButtons()
        self.setMouseEnabled(x=False, y=False)
        self.setLabel("bottom", "peak memory (MiB, measured; ✕ unusable, ring: recommended)")
        self.setLabel("left", "samples/s (median, measured)")
        self.showGrid(x=True, y=True, alpha=0.15)
        self.getPlotItem().setContentsMargins(8, 8, 20, 8)  # the right-most point off the window's edge
        self.legend = self.addLegend(offset=(-10, 10))  # top right; shown only for two devices or more
        self.points: dict[str, tuple[float, float]] = {}  # key -> (MiB, samples/s) drawn
        SweepPlot._restyle(self)

    def show_tune(self, result: TuneResult | dict) -> None:
        tuned = TuneResult.of(result)
        self.clear()
        self.legend.clear()
        self.points = {}
        palette = self.palette()
        chosen = set(tuned.recommendation.values())
        by_device: dict[str, list[TuneRow]] = {}
        for r in tuned.candidates:
            if is_finite(r.samples_per_s) and is_finite(r.peak_memory) and \
                    r.status in ("measured", "dropped", "unusable"):
                by_device.setdefault(r.device, []).append(r)
        for device, rows in by_device.items():
            color = device_color(device, palette)
            xs = np.array([(r.peak_memory or 0.0) / MIB for r in rows])
            ys = np.array([r.samples_per_s for r in rows], dtype=float)
            base = palette.color(QPalette.ColorRole.Base)  # dropped as clearly slower: hollow
            named = False
            for crossed in (False, True):  # one symbol per item: a legend cannot draw a list of symbols
                mine = [i for i, r in enumerate(rows) if (r.status == "unusable") == crossed]
                if not mine:
                    continue
                brushes = [pg.mkBrush(base if rows[i].status == "dropped" else color) for i in mine]
                self.plot(xs[mine], ys[mine], pen=None, symbol="x" if crossed else "o", symbolSize=10,
                          symbolBrush=brushes, symbolPen=pg.mkPen(color, width=1.5),
                          name=None if named else device)
                named = True
            low = np.array([r.samples_per_s_low if is_finite(r.samples_per_s_low) else y for r, y in zip(rows, ys)])
            high = np.array([r.samples_per_s_high if is_finite(r.samples_per_s_high) else y for r, y in zip(rows, ys)])
            self.addItem(pg.ErrorBarItem(x=xs, y=ys, top=high - ys, bottom=ys - low, beam=0, pen=pg.mkPen(color)))
            for r, x, y in zip(rows, xs, ys):
                self.points[r.key] = (float(x), float(y))
                if r.key in chosen:
                    warn = warning_color(palette)
                    self.plot([x], [y], pen=None, symbol="o", symbolSize=22, symbolBrush=None,
                              symbolPen=pg.mkPen(warn, width=2))
                    label = pg.TextItem(r.label, color=QColor(palette.color(QPalette.ColorRole.Text)),
                                        anchor=(0, 1))
                    label.setPos(x, y)
                    self.addItem(label)
        self.legend.setVisible(len(by_device) > 1)  # one device: the title names it, and no box hides a point
        self.enableAutoRange()
        self.getPlotItem().getViewBox().setDefaultPadding(0.12)


class TuneView(QWidget):
    """The chart over the table, and Apply for the selected row (`apply_requested(row)`: the candidate's TuneRow)."""

    apply_requested = Signal(object)

    def __init__(self, result: TuneResult | dict, parent=None):
        super().__init__(parent)
        self.result = tuned = TuneResult.of(result)
        self.rows = toolview.tune_rows(tuned)
        self.plot = TunePlot()
        self.plot.show_tune(tuned)
        table = toolview.tune_table(tuned)
        headers, cells, numeric = table.headers, table.rows, table.numeric
        self.table = QTableWidget(len(cells), len(headers))
        # two-line headers, so that the ten columns fit beside the list in a 1280-point window
        self.table.setHorizontalHeaderLabels([h.replace(" ", "\n", 1) if len(h) > 8 else h for h in headers])
        self.table.verticalHeader().setVisible(False)
        self.table.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
        self.table.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
        self.table.setSelectionMode(QAbstractItemView.SelectionMode.SingleSelection)
        for i, (row, values) in enumerate(zip(self.rows, cells)):
            for j, text in enumerate(values):
                item = _SortItem(text)
                item.setData(Qt.ItemDataRole.UserRole, i)  # the row in self.rows, whatever the sort
                item.setData(_SORT_ROLE, _sort_value(row, headers[j], text))
                if numeric[j]:
                    item.setTextAlignment(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
                if headers[j] == "parity":
                    item.setToolTip(f"{text}: {TUNE_HEADER_TIPS['parity']}")
                if headers[j] == "status":  # the word in the cell, the engine's whole sentence in its tooltip
                    item.setText(text.split(": ", 1)[0])
                    item.setToolTip(text)
                if headers[j].startswith("samples/s"):  # the hidden columns' figures, where the eye is
                    item.setToolTip(f"interval {values[headers.index('interval')]} "
                                    f"({row.interval or 'not known'}); warm-up "
                                    f"{values[headers.index('warm-up')]} (torch.compile's compilation included)")
                self.table.setItem(i, j, item)
        self.table.setSortingEnabled(True)
        self.table.verticalHeader().setDefaultSectionSize(self.table.fontMetrics().height() + 8)
        self.table.resizeColumnsToContents()
        for j, name in enumerate(headers):
            if (cell := self.table.horizontalHeaderItem(j)) is not None:
                cell.setToolTip(TUNE_HEADER_TIPS.get(name, ""))
        self.table.horizontalHeader().setStretchLastSection(True)
        self.table.setColumnHidden(0, len({r.device for r in self.rows}) < 2)  # one device: said in the title
        # the throughput's interval (the chart's whiskers) and the warm-up are in the samples/s cell's tooltip, so
        # that the columns fit beside the list in a 1280-point window
        for hidden in ("interval", "warm-up"):
            self.table.setColumnHidden(headers.index(hidden), True)
        bar = self.table.horizontalHeader()  # the status beside the settings; parity (its tooltip says) last
        bar.moveSection(bar.visualIndex(headers.index("status")), 2)
        bar.setStretchLastSection(False)
        bar.setSectionResizeMode(headers.index("parity"), bar.ResizeMode.Stretch)
        self.table.itemSelectionChanged.connect(self._selection_changed)
        self.apply_button = QPushButton("Apply to Setup")
        self.apply_button.setToolTip("Put the selected candidate's precision, channels_last, compile, batch size "
                                     "(and CPU threads) into the setup")
        self.apply_button.clicked.connect(self._apply)
        split = QSplitter(Qt.Orientation.Vertical)
        split.addWidget(self.plot)
        split.addWidget(self.table)
        split.setSizes([260, 220])
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addWidget(split, 1)
        buttons = QHBoxLayout()
        buttons.addStretch(1)
        buttons.addWidget(self.apply_button)
        layout.addLayout(buttons)
        chosen = set(tuned.recommendation.values())
        first = next((i for i, r in enumerate(self.rows) if r.key in chosen), None)
        if first is not None:
            self.select_key(self.rows[first].key)
        self._selection_changed()

    def select_key(self, key: str) -> None:
        for i in range(self.table.rowCount()):
            if self._row_at(i).key == key:
                self.table.selectRow(i)
                return

    def selected_row(self) -> TuneRow | None:
        picked = self.table.selectionModel().selectedRows()
        if not picked:
            return None
        return self._row_at(picked[0].row())

    def _row_at(self, table_row: int) -> TuneRow:
        """The candidate shown in the table's row (sorted as the user chose)."""
        item = self.table.item(table_row, 0)
        assert item is not None  # every cell is set when the table is made
        return self.rows[item.data(Qt.ItemDataRole.UserRole)]

    def _selection_changed(self) -> None:
        row = self.selected_row()
        usable = row is not None and row.status in ("measured", "dropped")
        self.apply_button.setEnabled(usable)
        if row is not None and not usable:
            self.apply_button.setToolTip(f"{row.label}: {row.status}" + (f" ({row.reason})" if row.reason else ""))

    def _apply(self) -> None:
        row = self.selected_row()
        if row is not None:
            self.apply_requested.emit(row)


_SORT_ROLE = Qt.ItemDataRole.UserRole + 1
_SORT_KEYS = {"samples/s (measured)": "samples_per_s", "vs current": "speedup", "peak memory": "peak_memory",
              "warm-up": "warmup_s", "loss vs fp32": "loss_vs_fp32"}


def _sort_value(row: TuneRow, header: str, text: str):
    """Numbers sort as numbers (missing ones last), words as words."""
    key = _SORT_KEYS.get(header)
    if key is not None:
        value = getattr(row, key)
        return (0, float(value)) if is_finite(value) else (1, 0.0)
    return (0, text.lower())


class _SortItem(QTableWidgetItem):
    def __lt__(self, other) -> bool:
        mine, theirs = self.data(_SORT_ROLE), other.data(_SORT_ROLE)
        try:
            return mine < theirs
        except TypeError:
            return str(mine) < str(theirs)
