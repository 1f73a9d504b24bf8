"""The Tools tab's plots: a sweep's samples/s against batch size, and a deploy benchmark's latency per place.

They draw what the engine computed (the tool results' numbers); nothing is re-derived here."""

from __future__ import annotations

import math

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import QEvent, Qt
from PySide6.QtGui import QColor, QPalette
from PySide6.QtWidgets import QFrame

from ...engine.tools.records import SweepPoint, SweepResult
from ...engine.tools.records.deploy import DeployResult
from ...engine.tools.records.diagnose import Diagnosed, Diagnosis
from ..style import device_color, warning_color


class _LogTwoAxis(pg.AxisItem):
    """Batch sizes on a log2 axis: ticks at 1, 2, 4, ... labelled as whole numbers."""

    def tickValues(self, minVal, maxVal, size):  # pyqtgraph override
        low, high = math.floor(minVal), math.ceil(maxVal)
        step = max(1, (high - low) // 10 + 1)
        return [(1.0, [float(v) for v in range(max(0, low), high + 1, step)])]

    def tickStrings(self, values, scale, spacing):
        return [f"{2 ** v:,.0f}" for v in values]


class SweepPlot(pg.PlotWidget):
    """samples/s against batch size on log-log axes (throughput spans orders of magnitude over a sweep), one line
    per device with whiskers of ±IQR/2, the crossover marked."""

    def __init__(self, parent=None):
        super().__init__(parent, axisItems={"bottom": _LogTwoAxis(orientation="bottom")})
        self.setMenuEnabled(False)
        self.hideButtons()
        self.setMouseEnabled(x=False, y=False)
        self.setFrameShape(QFrame.Shape.StyledPanel)
        self.getPlotItem().setLogMode(x=False, y=True)
        self.setLabel("bottom", "batch size (hollow points: noisy measurements)")
        self.setLabel("left", "samples/s (measured, log scale)")
        self.showGrid(x=True, y=True, alpha=0.15)
        self.legend = self.addLegend(offset=(10, 10))
        self.lines: dict[str, pg.PlotDataItem] = {}
        self.marker: pg.InfiniteLine | None = None
        self._restyle()

    def changeEvent(self, event) -> None:  # (Qt override): dark mode switched
        if event.type() == QEvent.Type.PaletteChange and getattr(self, "lines", None) is not None:
            self._restyle()
        super().changeEvent(event)

    def _restyle(self) -> None:
        palette = self.palette()
        text = palette.color(QPalette.ColorRole.Text)
        self.setBackground(palette.color(QPalette.ColorRole.Base))
        for name in ("left", "bottom"):
            axis = self.getAxis(name)
            pen = QColor(text)
            pen.setAlphaF(0.35)
            axis.setPen(pg.mkPen(pen, width=1))
            axis.setTextPen(pg.mkPen(text))
        self.legend.setLabelTextColor(text)
        back, edge = QColor(palette.color(QPalette.ColorRole.Base)), QColor(text)
        back.setAlphaF(0.85)
        edge.setAlphaF(0.2)
        self.legend.setBrush(pg.mkBrush(back))  # readable over a bar or a line it covers
        self.legend.setPen(pg.mkPen(edge))

    def show_sweep(self, result: SweepResult | dict) -> None:
        sweep = SweepResult.of(result)
        self.clear()
        self.legend.clear()
        self.lines = {}
        self.marker = None
        palette = self.palette()
        by_device: dict[str, list[SweepPoint]] = {}
        for p in sweep.points:
            if p.samples_per_s:
                by_device.setdefault(p.device, []).append(p)
        for device, points in by_device.items():
            points.sort(key=lambda p: p.batch_size)
            xs = np.array([math.log2(p.batch_size) for p in points])
            ys = np.array([p.samples_per_s for p in points], dtype=float)
            color = device_color(device, palette)
            if device == "cpu":
                color.setAlphaF(0.8)
            base = palette.color(QPalette.ColorRole.Base)  # noisy points are hollow: the table says why
            brushes = [pg.mkBrush(base if p.stability == "noisy" else color) for p in points]
            self.lines[device] = self.plot(xs, ys, pen=pg.mkPen(color, width=2), symbol="o", symbolSize=8,
                                           symbolBrush=brushes, symbolPen=pg.mkPen(color, width=1.5), name=device)
            half = np.array([(p.samples_per_s_iqr or 0) / 2 for p in points])
            low = np.log10(np.maximum(ys - half, ys * 1e-3))  # whiskers drawn in the axis's log10 coordinates
            high = np.log10(ys + half)
            mid = np.log10(ys)
            self.addItem(pg.ErrorBarItem(x=xs, y=mid, top=high - mid, bottom=mid - low, beam=0.08,
                                         pen=pg.mkPen(color)))
        crossover = sweep.crossover
        if crossover and crossover.batch_size:
            warn = warning_color(palette)
            self.marker = pg.InfiniteLine(pos=math.log2(crossover.batch_size), angle=90,
                                          pen=pg.mkPen(warn, width=1.5, style=Qt.PenStyle.DashLine),
                                          label=f"{crossover.device} faster from batch {crossover.batch_size:,}",
                                          labelOpts={"position": 0.08, "color": warn, "anchors": [(0, 1), (0, 1)]})
            self.addItem(self.marker)
        self.enableAutoRange()


class BarPlot(pg.PlotWidget):
    """A still bar chart in the system's colours (the sweep's), redrawn when dark mode switches."""

    def __init__(self, left: str, min_height: int, legend_offset: tuple[int, int], columns: int = 1, parent=None):
        super().__init__(parent)
        self.setMinimumHeight(min_height)
        self.setMenuEnabled(False)
        self.hideButtons()
        self.setMouseEnabled(x=False, y=False)
        self.setFrameShape(QFrame.Shape.StyledPanel)
        self.setLabel("left", left)
        self.showGrid(x=False, y=True, alpha=0.15)
        self.legend = self.addLegend(offset=legend_offset, colCount=columns)
        self.lines: dict = {}
        self._restyle()

    _restyle = SweepPlot._restyle  # the same colours as the sweep's plot (it calls no super())

    def changeEvent(self, event) -> None:  # (Qt override): dark mode switched
        if event.type() == QEvent.Type.PaletteChange and getattr(self, "lines", None) is not None:
            self._restyle()
        super().changeEvent(event)


class DeployPlot(BarPlot):
    """Latency of one batch (ms, measured: the median) at the largest batch size, one bar per place a model ran,
    grouped by model; places that were not measured (Core ML off macOS) have no bar, the table says why."""

    def __init__(self, parent=None):
        super().__init__("ms per batch (median)", 160, (-10, 10), parent=parent)

    def show_deploy(self, result: DeployResult | dict) -> None:
        self.clear()
        self.legend.clear()
        measured = [r for r in DeployResult.of(result).rows if r.latency_ms]
        if not measured:
            self.setTitle("Nothing was measured")
            return
        largest = max(r.batch_size for r in measured)
        labels = list(dict.fromkeys(r.label for r in measured if r.batch_size == largest))
        models = list(dict.fromkeys(r.model for r in measured if r.batch_size == largest))
        width = 0.8 / max(1, len(labels))
        for i, label in enumerate(labels):
            xs, heights = [], []
            for m, model in enumerate(models):
                row = next((r for r in measured if r.model == model and r.label == label
                            and r.batch_size == largest), None)
                if row is not None:
                    xs.append(m - 0.4 + width * (i + 0.5))
                    heights.append(row.latency_ms)
            if label.startswith("PyTorch"):
                where = label.split(", ")[-1]
                color = device_color(where, self.palette()) if where != "cpu" else QColor("#8e8e93")  # system grey
            else:  # Core ML's compute units: one hue, lighter to darker
                color = QColor.fromHsv(30, 200, max(90, 240 - 40 * i))
            bars = pg.BarGraphItem(x=xs, height=heights, width=width * 0.9, brush=color, pen=pg.mkPen(None))
            self.addItem(bars)
            self.legend.addItem(bars, label)  # pyqtgraph 0.14 draws a bar item's sample as a filled square
        self.getAxis("bottom").setTicks([[(m, name) for m, name in enumerate(models)]])
        tallest = max((r.latency_ms or 0.0 for r in measured if r.batch_size == largest), default=1.0)
        self.setYRange(0, tallest * (1.2 + 0.08 * len(labels)), padding=0)  # room for the legend above the bars
        self.setTitle(f"batch {largest}")


PHASE_COLOURS = {"data": "#999999", "copy": "#56B4E9", "forward": "#0072B2", "backward": "#E69F00",
                 "optimizer": "#009E73"}  # Okabe-Ito, the data wait in grey


CAUSE_COLOURS = {"data": "#999999", "fallback": "#F0E442", "sync": "#D55E00", "launch": "#CC79A7",
                 "compute": "#D9D9D9"}
CAUSE_WORDS = {"data": "(cause) data", "fallback": "(cause) CPU fallback", "sync": "(cause) waits",
               "launch": "(cause) launching", "compute": "(cause) computing"}


class DiagnosePlot(BarPlot):
    """A diagnosis's step anatomy, side by side per device: a wide stacked bar of its phases, each as a share of the
    step as a run takes it (the dashed line at 100 %), and beside it a narrow bar of what the step costs by cause
    (data, CPU fallback, waits, launching, and the device computing the rest: the engine's shares, whose largest
    names the bound); above them the step time and the bound. Shares, not milliseconds: a CPU step and a GPU step
    differ by orders of magnitude, the question is where each one's time goes (the table has the milliseconds)."""

    def __init__(self, parent=None):
        super().__init__("% of the step", 200, (10, 6), columns=3, parent=parent)

    def show_diagnosis(self, result: Diagnosis) -> None:
        from ...engine.analysis.bottleneck import PHASES
        from ...engine.tools.diagnose.view import PHASE_WORDS

        self.clear()
        self.legend.clear()
        ran = [d for d in result.devices if isinstance(d, Diagnosed) and d.step_ms]
        if not ran:
            self.setTitle("No device was diagnosed")
            return
        xs = np.arange(len(ran), dtype=float)
        bottoms = np.zeros(len(ran))
        text = self.palette().color(QPalette.ColorRole.Text)
        for phase in PHASES:
            heights = np.array([100 * d.phase_ms(phase) / d.step_ms for d in ran])
            bars = pg.BarGraphItem(x=xs - 0.12, y0=bottoms, height=heights, width=0.42,
                                   brush=QColor(PHASE_COLOURS[phase]), pen=pg.mkPen(None))
            self.addItem(bars)
            self.legend.addItem(bars, PHASE_WORDS[phase])
            bottoms = bottoms + heights
        below = np.zeros(len(ran))
        for cause in ("data", "fallback", "sync", "launch", "compute"):
            shares = [d.shares for d in ran]
            heights = np.array([100 * max(0.0, 1 - sum(s.values())) if cause == "compute" else 100 * s.get(cause, 0.0)
                                for s in shares])
            bars = pg.BarGraphItem(x=xs + 0.22, y0=below, height=heights, width=0.14,
                                   brush=QColor(CAUSE_COLOURS[cause]), pen=pg.mkPen(text, width=0.5))
            self.addItem(bars)
            if cause != "data":  # the data wait has the phases' grey already
                self.legend.addItem(bars, CAUSE_WORDS[cause])
            below = below + heights
        step_line = pg.InfiniteLine(pos=100, angle=0, pen=pg.mkPen(text, width=1, style=Qt.PenStyle.DashLine))
        self.addItem(step_line)
        for i, d in enumerate(ran):
            label = pg.TextItem(f"{d.step_ms:,.2f} ms/step (measured)\n{d.bound}-bound", color=text,
                                anchor=(0.5, 1.0))
            label.setPos(i, max(100.0, float(bottoms[i])) + 2)
            self.addItem(label)
        self.getAxis("bottom").setTicks([[(i, d.device) for i, d in enumerate(ran)]])
        pad = max(0.0, (3 - len(ran)) / 2)  # one or two devices keep bars of a sensible width
        self.setXRange(-0.6 - pad, len(ran) - 0.4 + pad, padding=0)
        self.setYRange(0, max(260.0, float(bottoms.max()) * 2.4), padding=0)  # labels, then the legend above them
        self.setTitle("wide: the phases (each synchronized) · narrow: the causes · dashed: the step")
