"""The chart of a comparison by what differs (engine analysis/contrast.py): its headline and sentences, each run's
throughput over the baseline's as a bar with its interval written beside it, and the baseline chosen here (the
table's rows are the runs; `history --compare` and the reports print the engine's table). And the chart of a
scaling over GPUs (engine analysis/scaling.py)."""

from __future__ import annotations

import html

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import Qt, Signal
from PySide6.QtGui import QBrush, QColor, QPalette
from PySide6.QtWidgets import QComboBox, QHBoxLayout, QLabel, QSizePolicy, QVBoxLayout, QWidget

from ...engine.analysis import contrast as contrasts
from ...engine.analysis.compare import short_machine
from ...engine.analysis.scaling import Scaling
from ...engine.basics.formatting import instant, local_time
from ..style import TIMES
from .speedup_chart import VerdictFold, still_plot

LABEL_CHARS = 28  # a bar's label beyond this is cut with "…" (the whole in the table, the report and the sentence)


def bar_labels(c: contrasts.Contrast, limit: int = LABEL_CHARS) -> list[str]:
    """One label per bar: what the run differs in ("baseline" for the baseline; "no throughput" for a run that has
    none; "repeat" where nothing recorded differs)."""
    out = ["baseline"]
    for v in c.rows:
        text = (", ".join(d.words("other") for d in v.diffs if d.cause) or "repeat") if v.ratio is not None \
            else f"run {v.run.id[:8]}: {v.run.status}"
        out.append(text if len(text) <= limit else text[: limit - 1] + "\u2026")
    return out


def _headline() -> QLabel:
    """A chart's verdict: rich text, wrapped, selectable, as tall as its words."""
    label = QLabel()
    label.setWordWrap(True)
    label.setTextFormat(Qt.TextFormat.RichText)
    label.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
    label.setSizePolicy(QSizePolicy.Policy.Preferred, QSizePolicy.Policy.Minimum)
    return label


def _verdict_above_plot(chart, row=None) -> None:
    """The headline, its folded sentences, an optional row of controls, then the plot taking the rest."""
    layout = QVBoxLayout(chart)
    layout.setContentsMargins(0, 0, 0, 0)
    layout.setSpacing(4)
    layout.addWidget(chart.headline)
    layout.addWidget(chart.more, 0, Qt.AlignmentFlag.AlignLeft)
    layout.addWidget(chart.details)
    if row is not None:
        layout.addLayout(row)
    layout.addWidget(chart.plot, 1)


class ContrastChart(QWidget):
    """Runs against a baseline: the verdict in words, a bar per run (its samples/s over the baseline's, the 95 %
    interval as whiskers and in words, noisy runs hatched) and the baseline picker."""

    baseline_chosen = Signal(str)  # a run id

    def __init__(self, parent=None):
        super().__init__(parent)
        self.contrast: contrasts.Contrast | None = None
        self.diagnoses: list[dict] = []  # stored diagnose results: where both runs have one, the phase that moved
        self._values: list[float] = []
        self.headline = _headline()
        self.baseline = QComboBox()
        self.baseline.setToolTip("The run the others are divided by.")
        self.baseline.setSizeAdjustPolicy(QComboBox.SizeAdjustPolicy.AdjustToContents)
        self.baseline.activated.connect(lambda i: self.baseline_chosen.emit(self.baseline.itemData(i)))
        self.plot = still_plot(90)
        self.plot.setToolTip(contrasts.LEGEND[0].upper() + contrasts.LEGEND[1:] + ".")
        self.fold = VerdictFold(self.headline, self)
        self.details, self.more = self.fold.details, self.fold.more
        row = QHBoxLayout()
        row.addWidget(QLabel("Baseline:"))
        row.addWidget(self.baseline, 1)
        _verdict_above_plot(self, row)

    def heights(self) -> list[float]:
        return list(self._values)

    def verdict_text(self) -> str:
        return self.fold.text()

    def show_contrast(self, c: contrasts.Contrast | None) -> None:
        self.contrast = c
        item = self.plot.getPlotItem()
        item.clear()
        self._values = []
        if c is None:
            self.headline.clear()
            self.fold.clear()
            return
        self.baseline.blockSignals(True)
        self.baseline.clear()
        for r in sorted(c.runs, key=lambda r: instant(r.created_at)):
            if contrasts.usable(r):  # a run without a throughput cannot be divided by
                when = local_time(r.created_at)
                torch = f" · torch {r.env['torch']}" if r.env.get("torch") else ""
                self.baseline.addItem(f"{when:%d %b %H:%M} · {r.config.device}{torch}" if when else r.id[:8], r.id)
                self.baseline.setItemData(self.baseline.count() - 1, f"run {r.id}", Qt.ItemDataRole.ToolTipRole)
        self.baseline.setCurrentIndex(max(0, self.baseline.findData(c.baseline.id)))
        self.baseline.blockSignals(False)
        sentences = c.sentences(self.diagnoses)
        text = f"<span style='font-size:15pt; font-weight:600'>{html.escape(contrasts.headline(c))}</span>"
        self.headline.setText("<br>".join([text, *(html.escape(s) for s in sentences[:1])]))
        self.fold.show_folded(sentences[1:])  # the others folded: the chart keeps its room
        self._draw(c)

    def _draw(self, c: contrasts.Contrast) -> None:
        item = self.plot.getPlotItem()
        palette = self.palette()
        text = palette.color(QPalette.ColorRole.Text)
        accent = palette.color(QPalette.ColorRole.Highlight)
        rows = [None, *c.rows]
        values = [1.0] + [v.ratio or 0.0 for v in c.rows]
        self._values = values
        n = len(values)
        ys = list(range(n - 1, -1, -1))  # the baseline on top
        brushes = []
        for v in rows:
            noisy = (v.noisy if v is not None else c.baseline.summary.stability == "noisy")
            color = QColor(accent if v is not None else text)
            if v is None:
                color.setAlphaF(0.35)
            brushes.append(QBrush(color, Qt.BrushStyle.BDiagPattern) if noisy else pg.mkBrush(color))
        item.addItem(pg.BarGraphItem(x0=[0] * n, y=ys, height=0.55, width=values, brushes=brushes))
        whiskers = [(i, v.low, v.high) for i, v in enumerate(rows)
                    if v is not None and v.low is not None and v.high is not None and v.ratio]
        if whiskers:
            pen = QColor(text)
            pen.setAlphaF(0.8)
            item.addItem(pg.ErrorBarItem(x=np.array([values[i] for i, _, _ in whiskers]),
                                         y=np.array([ys[i] for i, _, _ in whiskers]),
                                         left=np.array([values[i] - low for i, low, _ in whiskers]),
                                         right=np.array([high - values[i] for i, _, high in whiskers]), beam=0.18,
                                         pen=pg.mkPen(pen, width=1.5)))
        right = max([values[i] for i in range(n)] + [high for _, _, high in whiskers] + [1.0])
        for i, (y, value) in enumerate(zip(ys, values)):
            v = rows[i]
            words = f"{contrasts.times_text(value)}{TIMES}" if value else "not measured"
            if v is not None and v.low is not None and v.high is not None:
                words += f" [{contrasts.times_text(v.low)}\u2013{contrasts.times_text(v.high)}]"
            label = pg.TextItem(words, color=text, anchor=(0, 0.5))
            label.setPos((v.high if v is not None and v.high else value) + right * 0.02, y)
            item.addItem(label)
        dash = QColor(text)
        dash.setAlphaF(0.55)
        item.addItem(pg.InfiniteLine(pos=1.0, angle=90, pen=pg.mkPen(dash, width=1, style=Qt.PenStyle.DashLine)))
        item.getAxis("left").setTicks([[(y, label) for y, label in zip(ys, bar_labels(c))]])
        item.getAxis("bottom").setTicks(None)
        item.setLabel("bottom", f"samples/s over the baseline's ({TIMES})", color=text.name())
        item.setXRange(0, right * 2.2, padding=0)  # room for "1.01× [1.00–1.02]"
        item.setYRange(-0.6, n - 0.4, padding=0)
        item.showGrid(x=True, y=False, alpha=0.15)
        for name in ("left", "bottom"):
            axis = item.getAxis(name)
            axis.setTextPen(pg.mkPen(text))
        self.plot.setBackground(palette.color(QPalette.ColorRole.Base))


class ScalingChart(QWidget):
    """One setup on 1, 2, ... N GPUs (engine analysis/scaling.py): the verdict in words, total throughput against
    GPUs with each point's IQR as whiskers and its speedup and efficiency written beside it, the ideal line (N times
    one GPU's) dashed, and runs of the same setup elsewhere (a Mac's MPS) as labelled dotted lines."""

    def __init__(self, parent=None):
        super().__init__(parent)
        self.scaling: Scaling | None = None
        self.headline = _headline()
        self.plot = still_plot(90)
        self.plot.setToolTip("Samples per second of all GPUs together (median over the measurement windows; whiskers: "
                             "the middle half of the windows). Dashed: N times one GPU's, perfect scaling.")
        self.fold = VerdictFold(self.headline, self)
        self.details, self.more = self.fold.details, self.fold.more
        _verdict_above_plot(self)

    def points(self) -> list[tuple[int, float]]:
        return [(p.gpus, p.samples_per_s) for p in self.scaling.points] if self.scaling else []

    def verdict_text(self) -> str:
        return self.fold.text()

    def show_scaling(self, s: Scaling | None) -> None:
        self.scaling = s
        self.plot.getPlotItem().clear()
        if s is None:
            self.headline.clear()
            self.fold.clear()
            return
        c = s.points[0].run.config
        short = f"{c.model} · {c.batch_words} per GPU · {c.precision_words}{' · channels_last' if c.channels_last else ''}"
        title = f"<span style='font-size:15pt; font-weight:600'>{html.escape(short)}</span>"
        self.headline.setText("<br>".join([title, html.escape(s.verdict())]))
        notes = [f"{p.gpus} GPUs: the all-reduce's share is the {p.communication['method']}." for p in s.points
                 if p.communication]
        self.fold.show_folded([f"Measured on {s.machine}: {s.title()}.", *s.beside_sentences(), *notes])
        self._draw(s)

    def _draw(self, s: Scaling) -> None:
        item = self.plot.getPlotItem()
        palette = self.palette()
        text = palette.color(QPalette.ColorRole.Text)
        accent = palette.color(QPalette.ColorRole.Highlight)
        xs = np.array([p.gpus for p in s.points], dtype=float)
        ys = np.array([p.samples_per_s for p in s.points], dtype=float)
        top = max([*ys, *(r.summary.rate for r in s.beside)])
        one = s.one
        if one is not None:
            faint = QColor(text)
            faint.setAlphaF(0.5)
            ideal = item.plot([1, xs.max()], [one.samples_per_s, one.samples_per_s * xs.max()],
                              pen=pg.mkPen(faint, width=1, style=Qt.PenStyle.DashLine))
            ideal.setZValue(-1)
            top = max(top, one.samples_per_s * xs.max())
        item.plot(xs, ys, pen=pg.mkPen(accent, width=2), symbol="o", symbolSize=8, symbolBrush=pg.mkBrush(accent),
                  symbolPen=pg.mkPen(accent))
        lows = [p.iqr[0] if p.iqr[0] is not None else p.samples_per_s for p in s.points]
        highs = [p.iqr[1] if p.iqr[1] is not None else p.samples_per_s for p in s.points]
        item.addItem(pg.ErrorBarItem(x=xs, y=ys, top=np.array(highs) - ys, bottom=ys - np.array(lows), beam=0.08,
                                     pen=pg.mkPen(text, width=1)))
        for p in s.points:
            words = f"{p.samples_per_s:,.0f}/s"
            if p.speedup is not None and p.gpus > 1:
                words += f"  {contrasts.times_text(p.speedup)}{TIMES}"
                if p.low is not None and p.high is not None:
                    words += f" [{contrasts.times_text(p.low)}\u2013{contrasts.times_text(p.high)}]"
                if p.efficiency is not None:
                    words += f" · {100 * p.efficiency:.0f} %"
            label = pg.TextItem(words, color=text, anchor=(0.5 if p.gpus == 1 else 1.0, 1.2))
            label.setPos(p.gpus, p.samples_per_s)
            item.addItem(label)
        dotted = QColor(text)
        dotted.setAlphaF(0.7)
        for r in s.beside:
            rate = r.summary.rate
            item.addItem(pg.InfiniteLine(pos=rate, angle=0, pen=pg.mkPen(dotted, width=1, style=Qt.PenStyle.DotLine)))
            label = pg.TextItem(f"{short_machine(r.machine)} {r.config.device}: {rate:,.0f}/s", color=text,
                                anchor=(0, 1))
            label.setPos(1, rate)
            item.addItem(label)
        item.getAxis("bottom").setTicks([[(float(p.gpus), str(p.gpus)) for p in s.points]])
        item.setLabel("bottom", "GPUs", color=text.name())
        item.setLabel("left", "samples/s", color=text.name())
        item.setXRange(0.6, xs.max() + 0.4, padding=0)
        item.setYRange(0, top * 1.32, padding=0)  # room for the top point's words
        item.showGrid(x=False, y=True, alpha=0.15)
        for name in ("left", "bottom"):
            item.getAxis(name).setTextPen(pg.mkPen(text))
        self.plot.setBackground(palette.color(QPalette.ColorRole.Base))
