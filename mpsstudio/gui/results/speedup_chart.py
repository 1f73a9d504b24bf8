"""The chart of one comparison: its verdict in words, and each device's speedup over its own machine's CPU with
the interval as whiskers (samples/s when there is no CPU run); a log scale when bars differ by more than 20x."""

from __future__ import annotations

import html
import math

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import QEvent, QObject, Qt
from PySide6.QtGui import QBrush, QColor, QPalette
from PySide6.QtWidgets import (QCheckBox, QFrame, QHBoxLayout, QLabel, QStackedLayout, QToolButton, QVBoxLayout,
                               QWidget)

from ...engine.analysis.compare import Comparison, short_machine
from ...engine.basics.formatting import DASH, fmt_rate
from ...engine.analysis.verdict import brief, headline, verdicts
from ..style import TIMES, device_color, placeholder_label

NO_COMPARISON_HINT = "Run the same setup on two devices to compare them"


def bar_label(v: float) -> str:
    """"0.44×", "4.7×", "123×": enough digits to read the bar, no more."""
    if v < 1:
        return f"{v:.2f}{TIMES}"
    return f"{v:.1f}{TIMES}" if v < 100 else f"{v:,.0f}{TIMES}"


def device_labels(c: Comparison) -> list[str]:
    """One label per entry: the device, plus its machine when the entries come from more than one machine."""
    many = len(c.machines()) > 1
    return [f"{e.device} {DASH} {short_machine(e.machine)}" if many else e.device for e in c.entries]


def still_plot(min_height: int) -> pg.PlotWidget:
    """A chart that is read, not explored: no menu, no buttons, no panning or zooming, framed."""
    plot = pg.PlotWidget()
    plot.setMinimumHeight(min_height)
    plot.setMenuEnabled(False)
    plot.hideButtons()
    plot.setMouseEnabled(x=False, y=False)
    plot.setFrameShape(QFrame.Shape.StyledPanel)
    return plot


LOG_SCALE_RATIO = 20.0  # bars differing by more than this offer a log scale


class VerdictFold(QObject):
    """A verdict's headline above its further sentences, folded under "N more sentences" until asked for (the
    device chart and the contrast charts alike): `details` (the folded sentences) and `more` (the fold's button)
    go under the chart's `headline`."""

    def __init__(self, headline: QLabel, parent: QWidget) -> None:
        super().__init__(parent)
        self.headline = headline
        self.details = QLabel()
        self.details.setWordWrap(True)
        self.details.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.details.setContentsMargins(2, 0, 2, 2)
        self.details.hide()
        self.more = QToolButton()
        self.more.setCheckable(True)
        self.more.setAutoRaise(True)
        self.more.setToolButtonStyle(Qt.ToolButtonStyle.ToolButtonTextBesideIcon)
        self.more.toggled.connect(self._fold)

    def text(self) -> str:
        """The verdict as shown and folded: the headline, its sentence, then the folded ones."""
        return "\n".join(t for t in (self.headline.text(), self.details.text()) if t)

    def show_folded(self, sentences: list[str]) -> None:
        """The sentences after the headline, folded as the user left the fold."""
        self.details.setText("\n\n".join(sentences))
        self.more.setVisible(bool(self.details.text()))
        self._fold(self.more.isChecked())

    def clear(self) -> None:
        self.details.clear()
        self.more.hide()

    def _fold(self, unfolded: bool) -> None:
        count = self.details.text().count("\n\n") + 1 if self.details.text() else 0
        self.more.setArrowType(Qt.ArrowType.DownArrow if unfolded else Qt.ArrowType.RightArrow)
        self.more.setText("Less" if unfolded else f"{count} more " + ("sentence" if count == 1 else "sentences"))
        self.details.setVisible(unfolded and bool(self.details.text()))


class SpeedupChart(QWidget):
    """The verdict in words above bars of one comparison's speedups over each machine's own CPU (or samples/s
    when no machine has a CPU run), with the interval as whiskers; noisy runs' bars are hatched."""

    def __init__(self, parent=None, show_title: bool = True):
        super().__init__(parent)
        self.show_title = show_title
        self.comparison: Comparison | None = None
        self.inspections: list[dict] = []  # stored `inspect` results: the verdict names their findings
        self.bars: pg.BarGraphItem | None = None
        self.whiskers: pg.ErrorBarItem | None = None
        self._labels: list[pg.TextItem] = []
        self._values: list[float] = []
        self._hint_text = NO_COMPARISON_HINT
        self.plot = still_plot(140)
        self.plot.getPlotItem().setContentsMargins(8, 8, 12, 8)
        self.headline = QLabel()
        self.headline.setWordWrap(True)
        self.headline.setTextFormat(Qt.TextFormat.RichText)
        self.headline.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.headline.setContentsMargins(2, 0, 2, 2)
        self.log_check = QCheckBox("Log scale")
        self.log_check.setToolTip(f"The bars differ by more than {LOG_SCALE_RATIO:g}\u00d7: a log scale shows "
                                  "the small ones too.")
        self.log_check.toggled.connect(self._draw)
        # the rest of the verdict (its further sentences: noise, energy, hints, findings), folded until asked for
        self.fold = VerdictFold(self.headline, self)
        self.details, self.more = self.fold.details, self.fold.more
        chart_page = QWidget()
        column = QVBoxLayout(chart_page)
        column.setContentsMargins(0, 0, 0, 0)
        column.setSpacing(2)
        top = QHBoxLayout()
        top.addWidget(self.headline, 1)
        top.addWidget(self.log_check, 0, Qt.AlignmentFlag.AlignTop)
        column.addLayout(top)
        column.addWidget(self.more, 0, Qt.AlignmentFlag.AlignLeft)
        column.addWidget(self.details)
        column.addWidget(self.plot, 1)
        self.hint = placeholder_label(NO_COMPARISON_HINT)
        self._stack = QStackedLayout(self)
        self._stack.addWidget(self.hint)
        self._stack.addWidget(chart_page)
        self._chart_page = chart_page
        self._restyle()

    def verdict_text(self) -> str:
        return self.fold.text()

    def show_comparison(self, comparison: Comparison | None, hint: str = NO_COMPARISON_HINT) -> None:
        self.comparison = comparison
        self._hint_text = hint
        self._draw()

    def heights(self) -> list[float]:
        """The bars' values (speedups or samples/s), whatever the scale."""
        return list(self._values)

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
        self.bars, self.whiskers, self._labels, self._values = None, None, [], []
        if c is None:
            self.hint.setText(self._hint_text)
            self._stack.setCurrentWidget(self.hint)
            return
        palette = self.palette()
        text = palette.color(QPalette.ColorRole.Text)
        entries = c.entries
        by_speedup = any(e.speedup is not None for e in entries)
        if by_speedup:
            values = [e.speedup or 0.0 for e in entries]
            labels = [bar_label(e.speedup) if e.speedup else f"no CPU run{chr(10)}on that machine" for e in entries]
        else:
            values = [float(e.samples_per_s or 0.0) for e in entries]
            labels = [f"{fmt_rate(v)}/s" for v in values]
        labels = [f"{label}{chr(10)}no clear difference" if e.unclear() else label for label, e in zip(labels, entries)]
        labels = [f"{label}{chr(10)}noisy" if e.noisy else label for label, e in zip(labels, entries)]
        self._values = values
        positive = [v for v in values if v > 0]
        spread = max(positive) / min(positive) if positive else 1.0
        self.log_check.setVisible(spread > LOG_SCALE_RATIO)
        log = self.log_check.isVisible() and self.log_check.isChecked()
        floor = 10 ** math.floor(math.log10(min(positive + [1.0]) / 2)) if log else 0.0

        def y(v: float) -> float:
            return math.log10(max(v, floor)) if log else v
        base = y(floor) if log else 0.0
        xs, x, machine = [], 0.0, None
        for e in entries:  # a gap between machines: each machine's runs stand together
            if machine is not None and e.machine_id != machine:
                x += 0.5
            xs.append(x)
            machine = e.machine_id
            x += 1.0
        tops = [y(v) if v > 0 else base for v in values]
        brushes = []
        for e in entries:
            color = device_color(e.device, palette)
            if e.noisy:  # never a plain bar for a number not to be trusted
                faded = QColor(color)
                faded.setAlphaF(0.45)
                brushes.append(QBrush(faded, Qt.BrushStyle.BDiagPattern))
            else:
                brushes.append(pg.mkBrush(color))
        pens = [pg.mkPen(device_color(e.device, palette), width=1.5) if e.noisy else None for e in entries]
        self.bars = pg.BarGraphItem(x=xs, y0=[base] * len(xs), y1=tops, width=0.5, brushes=brushes, pens=pens)
        item.addItem(self.bars)
        whisker_tops = list(tops)
        if by_speedup:
            whiskers = [(i, e.low, e.high) for i, e in enumerate(entries)
                         if e.low is not None and e.high is not None and e.speedup]
            ix = [i for i, _, _ in whiskers]
            if ix:
                lows = [y(low) for _, low, _ in whiskers]
                highs = [y(high) for _, _, high in whiskers]
                ws = [xs[i] for i in ix]
                mids = [tops[i] for i in ix]
                pen = QColor(text)
                pen.setAlphaF(0.8)
                self.whiskers = pg.ErrorBarItem(x=np.array(ws), y=np.array(mids),
                                                top=np.array(highs) - np.array(mids),
                                                bottom=np.array(mids) - np.array(lows), beam=0.16,
                                                pen=pg.mkPen(pen, width=1.5))
                item.addItem(self.whiskers)
                for i, h in zip(ix, highs):
                    whisker_tops[i] = max(whisker_tops[i], h)
        span_top = max(whisker_tops + [y(1.0) if by_speedup else base])
        top = span_top + (span_top - base) * 0.35  # room for two lines of label above the tallest whisker
        for xv, wt, label in zip(xs, whisker_tops, labels):
            t = pg.TextItem(label, color=text, anchor=(0.5, 1.0))
            font = t.textItem.font()
            font.setBold(True)
            t.setFont(font)
            t.setPos(xv, wt + (top - base) * 0.015)
            item.addItem(t)
            self._labels.append(t)
        if by_speedup:
            dash = QColor(text)
            dash.setAlphaF(0.55)
            item.addItem(pg.InfiniteLine(pos=y(1.0), angle=0, pen=pg.mkPen(dash, width=1,
                                                                           style=Qt.PenStyle.DashLine)))
        bottom = item.getAxis("bottom")
        bottom.setTicks([[(xv, name) for xv, name in zip(xs, device_labels(c))]])
        left = item.getAxis("left")
        if log:
            decades = range(int(math.floor(base)), int(math.ceil(top)) + 1)
            left.setTicks([[(d, f"{10 ** d:g}{TIMES if by_speedup else ''}") for d in decades]])
        else:
            left.setTicks(None)
        # short enough for a short chart: what the speedup is over (each machine's own CPU) is in the verdict
        unit = f"speedup ({TIMES}{', log' if log else ''})" if by_speedup else f"samples/s{' (log)' if log else ''}"
        item.setLabel("left", unit, color=text.name())
        item.setTitle(c.title() if self.show_title else None, color=text.name(), size="12pt")
        slots = max(x, 4.5)  # a few devices still get slim bars
        item.setXRange((x - 1) / 2 - slots / 2, (x - 1) / 2 + slots / 2, padding=0)
        item.setYRange(base, top, padding=0)
        item.showGrid(x=False, y=True, alpha=0.15)
        sentences = verdicts(c, self.inspections)
        first, rest = brief(sentences)
        line = headline(c)  # the answer at a glance, in large type; its sentence below, the others folded
        paragraphs = [f"<span style='font-size:15pt; font-weight:600'>{html.escape(line)}</span>"] if line else []
        self.headline.setText("<br>".join(paragraphs + [html.escape(first)] if first else paragraphs))
        self.headline.setVisible(bool(sentences))
        self.fold.show_folded(rest)
        self._stack.setCurrentWidget(self._chart_page)
