"""The chart of a comparison by what differs (engine analysis/contrast.py): its headline and sentences, each run's
throughput over the baseline's as a bar with its interval written beside it, and the baseline chosen here (the
table's rows are the runs; `history --compare` and the reports print the engine's table)."""

from __future__ import annotations

import html

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import Qt, Signal
from PySide6.QtGui import QBrush, QColor, QPalette
from PySide6.QtWidgets import QComboBox, QHBoxLayout, QLabel, QSizePolicy, QVBoxLayout, QWidget

from ...engine.analysis import contrast as contrasts
from ...engine.basics.formatting import local_time
from ..style import TIMES
from .speedup_chart import FoldedVerdict, still_plot

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


class ContrastChart(FoldedVerdict, QWidget):
    """Runs against a baseline: the verdict in words, a bar per run (its samples/s over the baseline's, the 95 %
    interval as whiskers and in words, noisy runs hatched) and the baseline picker."""

    baseline_chosen = Signal(str)  # a run id

    def __init__(self, parent=None):
        super().__init__(parent)
        self.contrast: contrasts.Contrast | None = None
        self.diagnoses: list[dict] = []  # stored diagnose results: where both runs have one, the phase that moved
        self._values: list[float] = []
        self.headline = QLabel()
        self.headline.setWordWrap(True)
        self.headline.setTextFormat(Qt.TextFormat.RichText)
        self.headline.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.baseline = QComboBox()
        self.baseline.setToolTip("The run the others are divided by.")
        self.baseline.setSizeAdjustPolicy(QComboBox.SizeAdjustPolicy.AdjustToContents)
        self.baseline.activated.connect(lambda i: self.baseline_chosen.emit(self.baseline.itemData(i)))
        self.plot = still_plot(90)
        self.plot.setToolTip(contrasts.LEGEND[0].upper() + contrasts.LEGEND[1:] + ".")
        self.headline.setSizePolicy(QSizePolicy.Policy.Preferred, QSizePolicy.Policy.Minimum)
        self._make_fold()
        row = QHBoxLayout()
        row.addWidget(QLabel("Baseline:"))
        row.addWidget(self.baseline, 1)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.setSpacing(4)
        layout.addWidget(self.headline)
        layout.addWidget(self.more, 0, Qt.AlignmentFlag.AlignLeft)
        layout.addWidget(self.details)
        layout.addLayout(row)
        layout.addWidget(self.plot, 1)

    def heights(self) -> list[float]:
        return list(self._values)

    def show_contrast(self, c: contrasts.Contrast | None) -> None:
        self.contrast = c
        item = self.plot.getPlotItem()
        item.clear()
        self._values = []
        if c is None:
            self.headline.clear()
            self.details.clear()
            self.more.hide()
            return
        self.baseline.blockSignals(True)
        self.baseline.clear()
        for r in sorted(c.runs, key=lambda r: r.created_at):  # a run without a throughput cannot be divided by
            if contrasts.usable(r):
                when = local_time(r.created_at)
                torch = f" · torch {r.env['torch']}" if r.env.get("torch") else ""
                self.baseline.addItem(f"{when:%d %b %H:%M} · {r.config.device}{torch}" if when else r.id[:8], r.id)
                self.baseline.setItemData(self.baseline.count() - 1, f"run {r.id}", Qt.ItemDataRole.ToolTipRole)
        self.baseline.setCurrentIndex(max(0, self.baseline.findData(c.baseline.id)))
        self.baseline.blockSignals(False)
        sentences = c.sentences(self.diagnoses)
        text = f"<span style='font-size:15pt; font-weight:600'>{html.escape(contrasts.headline(c))}</span>"
        self.headline.setText("<br>".join([text, *(html.escape(s) for s in sentences[:1])]))
        self.details.setText("\n\n".join(sentences[1:]))  # the others folded: the chart keeps its room
        self.more.setVisible(len(sentences) > 1)
        self._fold(self.more.isChecked())
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
            noisy = (v.noisy if v is not None else c.baseline.summary.get("stability") == "noisy")
            color = QColor(accent if v is not None else text)
            if v is None:
                color.setAlphaF(0.35)
            brushes.append(QBrush(color, Qt.BrushStyle.BDiagPattern) if noisy else pg.mkBrush(color))
        item.addItem(pg.BarGraphItem(x0=[0] * n, y=ys, height=0.55, width=values, brushes=brushes))
        ix = [i for i, v in enumerate(rows) if v is not None and v.low is not None and v.high is not None and v.ratio]
        if ix:
            pen = QColor(text)
            pen.setAlphaF(0.8)
            item.addItem(pg.ErrorBarItem(x=np.array([values[i] for i in ix]), y=np.array([ys[i] for i in ix]),
                                         left=np.array([values[i] - rows[i].low for i in ix]),
                                         right=np.array([rows[i].high - values[i] for i in ix]), beam=0.18,
                                         pen=pg.mkPen(pen, width=1.5)))
        right = max([values[i] for i in range(n)] + [rows[i].high for i in ix] + [1.0])
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
