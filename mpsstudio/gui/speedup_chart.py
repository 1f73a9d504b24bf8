"""The bar chart of one comparison: each device's speedup over the CPU (its samples/s when there is no CPU run)."""

from __future__ import annotations

import pyqtgraph as pg
from PySide6.QtCore import QEvent, Qt
from PySide6.QtGui import QColor, QPalette
from PySide6.QtWidgets import QFrame, QStackedLayout, QWidget

from ..engine.compare import Comparison
from ..engine.formatting import DASH, fmt_rate
from .style import TIMES, device_color, placeholder_label

NO_COMPARISON_HINT = "Run the same setup on two devices to compare them"


def bar_label(v: float) -> str:
    """"0.44×", "4.7×", "123×": enough digits to read the bar, no more."""
    if v < 1:
        return f"{v:.2f}{TIMES}"
    return f"{v:.1f}{TIMES}" if v < 100 else f"{v:,.0f}{TIMES}"


def device_labels(c: Comparison) -> list[str]:
    """One label per run: the device, plus its machine when the runs come from more than one machine."""
    home = (c.baseline or c.runs[0]).machine
    return [r.config.device if r.machine == home else f"{r.config.device} {DASH} {short_machine(r.machine)}"
            for r in c.runs]


def short_machine(label: str) -> str:
    """"NVIDIA H100 80GB HBM3 on gpu-07" -> "H100 80GB HBM3 on gpu-07"; "Apple M2 Pro, macOS 14.5" -> "Apple M2 Pro"."""
    label = label.removeprefix("NVIDIA ")
    if ", macOS" in label:
        label = label.split(", macOS")[0]
    return label


class SpeedupChart(QWidget):
    """Bars of one comparison's speedups over the CPU (or its samples/s when it has no CPU run)."""

    def __init__(self, parent=None, show_title: bool = True):
        super().__init__(parent)
        self.show_title = show_title
        self.comparison: Comparison | None = None
        self.bars: pg.BarGraphItem | None = None
        self._labels: list[pg.TextItem] = []
        self._hint_text = NO_COMPARISON_HINT
        self.plot = pg.PlotWidget()
        self.plot.setMinimumHeight(200)
        self.plot.setMenuEnabled(False)
        self.plot.hideButtons()
        self.plot.setMouseEnabled(x=False, y=False)
        self.plot.setFrameShape(QFrame.Shape.StyledPanel)
        self.plot.getPlotItem().setContentsMargins(8, 8, 12, 8)
        self.hint = placeholder_label(NO_COMPARISON_HINT)
        self._stack = QStackedLayout(self)
        self._stack.addWidget(self.hint)
        self._stack.addWidget(self.plot)
        self._restyle()

    def show_comparison(self, comparison: Comparison | None, hint: str = NO_COMPARISON_HINT) -> None:
        self.comparison = comparison
        self._hint_text = hint
        self._draw()

    def heights(self) -> list[float]:
        return [] if self.bars is None else [float(h) for h in self.bars.opts["height"]]

    def is_showing_hint(self) -> bool:
        return self._stack.currentWidget() is self.hint

    def changeEvent(self, event: QEvent) -> None:
        if event.type() == QEvent.Type.PaletteChange:
            self._restyle()
            self._draw()
        super().changeEvent(event)

    def _restyle(self) -> None:
        palette = self.palette()
        text = palette.color(QPalette.ColorRole.Text)
        self.plot.setBackground(palette.color(QPalette.ColorRole.Base))
        for name in ("left", "bottom"):
            axis = self.plot.getAxis(name)
            axis_pen = QColor(text)
            axis_pen.setAlphaF(0.35)
            axis.setPen(pg.mkPen(axis_pen, width=1))
            axis.setTextPen(pg.mkPen(text))
            axis.setStyle(tickLength=0, maxTickLevel=0)

    def _draw(self) -> None:
        c = self.comparison
        item = self.plot.getPlotItem()
        item.clear()
        self.bars, self._labels = None, []
        if c is None:
            self.hint.setText(self._hint_text)
            self._stack.setCurrentWidget(self.hint)
            return
        palette = self.palette()
        text = palette.color(QPalette.ColorRole.Text)
        by_speedup = c.baseline is not None
        if by_speedup:
            values = [c.speedups.get(r.id) or 0.0 for r in c.runs]
            labels = [bar_label(v) for v in values]
        else:
            values = [float(r.summary.get("samples_per_s") or 0.0) for r in c.runs]
            labels = [f"{fmt_rate(v)}/s" for v in values]
        xs = list(range(len(values)))
        brushes = [pg.mkBrush(device_color(r.config.device, palette)) for r in c.runs]
        self.bars = pg.BarGraphItem(x=xs, height=values, width=0.5, brushes=brushes, pen=None)
        item.addItem(self.bars)
        top = max(values + [1.0]) * 1.2
        for x, v, label in zip(xs, values, labels):
            t = pg.TextItem(label, color=text, anchor=(0.5, 1.0))
            font = t.textItem.font()
            font.setBold(True)
            t.setFont(font)
            t.setPos(x, v + top * 0.015)
            item.addItem(t)
            self._labels.append(t)
        if by_speedup:
            dash = QColor(text)
            dash.setAlphaF(0.55)
            item.addItem(pg.InfiniteLine(pos=1.0, angle=0, pen=pg.mkPen(dash, width=1, style=Qt.PenStyle.DashLine)))
        bottom = item.getAxis("bottom")
        bottom.setTicks([[(x, name) for x, name in zip(xs, device_labels(c))]])
        item.setLabel("left", f"speedup vs CPU ({TIMES})" if by_speedup else "samples/s (no CPU run)",
                      color=text.name())
        item.setTitle(c.title() if self.show_title else None, color=text.name(), size="12pt")
        slots = max(len(values), 4.5)  # a few devices still get slim bars
        item.setXRange((len(values) - 1) / 2 - slots / 2, (len(values) - 1) / 2 + slots / 2, padding=0)
        item.setYRange(0, top, padding=0)
        item.showGrid(x=False, y=True, alpha=0.15)
        self._stack.setCurrentWidget(self.plot)
