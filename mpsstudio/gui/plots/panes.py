"""Each of the live plots is its own class: the loss (every step, its moving average, validation diamonds, the
warm-up band, the legend) and one plot per measurement-window series (throughput, memory, power), each with its
title, what it means, its axis and how it draws a run."""

from __future__ import annotations

from collections.abc import Callable

import pyqtgraph as pg
from PySide6.QtCore import Qt
from PySide6.QtGui import QColor, QFont

from .axes import BytesAxis, StepAxis
from .plot_runs import ENDED_BADLY, PlotRun
from ..style import keys

SYMBOLS_UP_TO = 150  # per-window points get dots while a run has at most this many windows


class RunPlot(pg.PlotItem):
    """One stacked plot: its title and tooltip, its axes, a hover line, and each run's curves for `keys`."""

    keys: tuple[str, ...] = ()

    def __init__(self, title: str, tooltip: str, left: pg.AxisItem):
        super().__init__(axisItems={"left": left, "bottom": StepAxis("bottom")})
        self.titleLabel.setAttr("justify", "left")
        self.setTitle(title)
        self.hideButtons()
        # No grid: pyqtgraph's axis grid made each frame ~8x dearer (27 ms vs 3.5 ms at 1100x520 here), and every
        # millisecond of drawing is taken from the run being measured (docs/benchmarks.md, gui_penalty).
        self.getAxis("left").setWidth(64)
        self.setMenuEnabled(True)
        self.titleLabel.setToolTip(tooltip)
        self.hover_line = pg.InfiniteLine(angle=90, movable=False)
        self.hover_line.setVisible(False)

    def add_hover_line(self) -> None:
        self.addItem(self.hover_line, ignoreBounds=True)

    def make_curves(self, run: PlotRun) -> dict[str, pg.PlotDataItem]:
        curves = {key: self.plot() for key in self.keys}
        for key, curve in curves.items():
            if key != "val":
                curve.setDownsampling(auto=True, method="peak")
                curve.setClipToView(True)
        return curves

    def style(self, run: PlotRun, curves: dict[str, pg.PlotDataItem], base: QColor) -> None:
        raise NotImplementedError

    def remove(self, curves: dict[str, pg.PlotDataItem]) -> None:
        for key in self.keys:
            if key in curves:
                self.removeItem(curves[key])

    def theme(self, axis_pen: QColor, secondary: QColor, text: QColor, tick_font: QFont, title_pt: str) -> None:
        for name in ("left", "bottom"):
            axis = self.getAxis(name)
            axis.setPen(axis_pen)
            axis.setTextPen(secondary)
            axis.setStyle(tickFont=tick_font, tickLength=-4)
            axis.label.setDefaultTextColor(secondary)
        self.titleLabel.setText(self.titleLabel.text, color=text, size=title_pt, bold=True)


class LossPlot(RunPlot):
    """Every step's loss (faint), its exponential moving average (solid), validation diamonds, the warm-up band
    and the legend of the runs."""

    keys = ("loss", "loss_smooth", "val")

    def __init__(self, hint_text: str, legend_pt: str, legend_clicked: Callable):
        super().__init__("Loss", "Training loss of every step (faint) and its exponential moving average (solid). "
                                 "Diamonds: validation loss at the end of each epoch. The shaded band is the warm-up.",
                         pg.AxisItem("left"))
        self.regions: dict[int, pg.LinearRegionItem] = {}  # one warm-up band per distinct warm-up length
        self.legend = self.addLegend(offset=(-8, 8), verSpacing=-4, labelTextSize=legend_pt)
        self.legend.sigSampleClicked.connect(legend_clicked)
        self.legend.setToolTip("Click a run to hide or show it.")
        self.hint = pg.TextItem(hint_text, anchor=(0.5, 0.5))
        self.hint.setParentItem(self.getViewBox())
        self.getViewBox().sigResized.connect(lambda: self.hint.setPos(self.getViewBox().rect().center()))
        self.val_proxy: pg.PlotDataItem | None = None  # the legend's "validation loss" entry

    def make_curves(self, run: PlotRun) -> dict[str, pg.PlotDataItem]:
        curves = super().make_curves(run)
        curves["loss"].setZValue(1)
        curves["loss_smooth"].setZValue(2)
        curves["val"].setZValue(3)
        return curves

    def style(self, run: PlotRun, curves: dict[str, pg.PlotDataItem], base: QColor) -> None:
        dashed = Qt.PenStyle.DashLine if run.status in ENDED_BADLY else Qt.PenStyle.SolidLine
        curves["loss"].setPen(pg.mkPen(run.colour_at(0.2), width=1))
        curves["loss_smooth"].setPen(pg.mkPen(run.colour_at(1.0), width=1, style=dashed))
        val = curves["val"]
        val.setPen(None)
        val.setSymbol("d")
        val.setSymbolSize(10)
        val.setSymbolBrush(pg.mkBrush(run.colour_at(1.0)))
        val.setSymbolPen(pg.mkPen(base, width=1))

    def shade_warmup(self, steps: int, text: QColor, secondary: QColor) -> None:
        """One light, fixed band per distinct warm-up length, labelled "warm-up"."""
        if steps in self.regions:
            return
        region = pg.LinearRegionItem(values=(0.5, steps + 0.5), movable=False)
        region.setZValue(-10)
        region.setToolTip(f"Warm-up: steps 1–{steps:,} are timed apart and never counted in throughput "
                          "(graph compilation, autotuning, caches).")
        pg.InfLineLabel(region.lines[1], "warm-up", position=0.05, anchors=[(0, 1), (0, 1)])
        self.addItem(region, ignoreBounds=True)
        self.regions[steps] = region
        self.style_region(region, text, secondary)

    @staticmethod
    def style_region(region: pg.LinearRegionItem, text: QColor, secondary: QColor) -> None:
        shade = QColor(text)
        shade.setAlphaF(0.07)
        region.setBrush(pg.mkBrush(shade))
        region.setHoverBrush(pg.mkBrush(shade))
        edge = QColor(text)
        edge.setAlphaF(0.25)
        for line in region.lines:
            line.setPen(pg.mkPen(edge, width=1, style=Qt.PenStyle.DotLine))
            line.setHoverPen(pg.mkPen(edge, width=1, style=Qt.PenStyle.DotLine))
            for child in line.childItems():
                if isinstance(child, pg.InfLineLabel):
                    child.setColor(secondary)

    def clear_regions(self) -> None:
        for region in self.regions.values():
            self.removeItem(region)
        self.regions.clear()

    def rebuild_legend(self, runs) -> None:
        """Runs in start order, then the validation marker; rebuilt whole because it changes rarely."""
        self.legend.clear()
        for run in runs:
            self.legend.addItem(run.curves["loss_smooth"], run.legend_text)
        if self.val_proxy is not None:
            self.legend.addItem(self.val_proxy, "validation loss")
        self.legend.setColumnCount(min(4, max(1, len(self.legend.items))))  # one row: the short loss plot
        self.legend.setVisible(bool(self.legend.items))

    def theme(self, axis_pen: QColor, secondary: QColor, text: QColor, tick_font: QFont, title_pt: str) -> None:
        super().theme(axis_pen, secondary, text, tick_font, title_pt)
        self.hint.setColor(secondary)
        for region in self.regions.values():
            self.style_region(region, text, secondary)
        if self.val_proxy is not None:
            self.val_proxy.setSymbolBrush(pg.mkBrush(secondary))


class WindowPlot(RunPlot):
    """One value per measurement window, drawn as a filled line with a dot per window (while there are few)."""

    key = ""

    def __init__(self, title: str, tooltip: str, left: pg.AxisItem):
        super().__init__(title, tooltip, left)
        self.keys = (self.key,)

    def style(self, run: PlotRun, curves: dict[str, pg.PlotDataItem], base: QColor) -> None:
        dashed = Qt.PenStyle.DashLine if run.status in ENDED_BADLY else Qt.PenStyle.SolidLine
        curve = curves[self.key]
        curve.setPen(pg.mkPen(run.colour_at(1.0), width=1, style=dashed))
        curve.setFillLevel(0)
        curve.setFillBrush(pg.mkBrush(run.colour_at(0.08)))
        curve.setSymbol("o")
        curve.setSymbolSize(4)
        curve.setSymbolPen(None)
        curve.setSymbolBrush(pg.mkBrush(run.colour_at(1.0)))

    @staticmethod
    def dots(curve: pg.PlotDataItem, points: int) -> None:
        """A dot per window while a run has at most SYMBOLS_UP_TO windows; a plain line beyond."""
        wants_dots = points <= SYMBOLS_UP_TO
        if wants_dots != (curve.opts["symbol"] is not None):
            curve.setSymbol("o" if wants_dots else None)


class ThroughputPlot(WindowPlot):
    key = "throughput"

    def __init__(self):
        super().__init__("Throughput (samples/s)", "Samples per second of each measurement window, timed with the "
                         "device synchronized. Warm-up steps are never counted.", StepAxis("left"))


class MemoryPlot(WindowPlot):
    """The run's own memory figure (solid, filled) and, where read, the driver's memory on MPS or the caching
    allocator's reserve on CUDA (dashed), the run process's memory (dotted) and the machine's swap (dash-dot), each in
    the run's colour; a legend of the line kinds, clicking one hides or shows it for every run."""

    key = "memory"
    KINDS = {"memory": ("tensors (GPU) · run's growth (CPU)", Qt.PenStyle.SolidLine),
             "memory_driver": ("driver (MPS) · reserved (CUDA)", Qt.PenStyle.DashLine),
             "memory_process": ("process", Qt.PenStyle.DotLine),
             "swap_used": ("swap (whole machine)", Qt.PenStyle.DashDotLine)}

    def __init__(self):
        super().__init__("Memory", "Bytes at the end of each measurement window (IEC units). Solid: on a GPU the "
                         "tensors PyTorch holds (its allocator's bytes), on the CPU the run process's growth over its "
                         "level before the model was built. Dashed: what the Metal driver holds for the process on "
                         "MPS (tensors plus its caches), or the CUDA caching allocator's reserve. Dotted: the run "
                         "process's own memory (its physical footprint on macOS, as Activity Monitor shows it; "
                         "resident memory elsewhere). Dash-dot: swap in use on the whole machine. Click a line kind "
                         "in the legend to hide or show it.", BytesAxis("left"))
        self.keys = tuple(self.KINDS)
        self.hidden: set[str] = set()
        self.kinds_legend = self.addLegend(offset=(-8, 4), verSpacing=-6, labelTextSize="8pt")
        self.kinds_legend.setColumnCount(4)
        self.kinds_legend.sigSampleClicked.connect(self._kind_clicked)
        self.kinds_legend.setToolTip("Click a line kind to hide or show it for every run.")
        self._samples: dict[str, pg.PlotDataItem] = {}
        self._shown_kinds: tuple[str, ...] = ()
        self._runs: list = []

    def make_curves(self, run: PlotRun) -> dict[str, pg.PlotDataItem]:
        curves = super().make_curves(run)
        for key in self.keys:  # only the run's own figure is a legend entry of the runs
            curves[key].setVisible(key not in self.hidden)
        return curves

    def style(self, run: PlotRun, curves: dict[str, pg.PlotDataItem], base: QColor) -> None:
        super().style(run, curves, base)
        for key in self.keys[1:]:
            curve = curves[key]
            curve.setPen(pg.mkPen(run.colour_at(0.9 if key != "swap_used" else 0.6), width=1,
                                  style=self.KINDS[key][1]))
            curve.setFillLevel(None)
            curve.setSymbol(None)

    def show_kinds(self, runs) -> None:
        """The legend names the line kinds that some run has (a CPU run has no driver line)."""
        self._runs = list(runs)
        kinds = tuple(k for k in self.keys if k == "memory" or any(len(r.series[k]) for r in self._runs))
        if kinds == self._shown_kinds:
            return
        self._shown_kinds = kinds
        self.kinds_legend.clear()
        for key in kinds:
            sample = self._samples.get(key)
            if sample is None:
                sample = self._samples[key] = pg.PlotDataItem(pen=pg.mkPen("#888888", width=1.5,
                                                                           style=self.KINDS[key][1]))
            sample.setVisible(key not in self.hidden)
            self.kinds_legend.addItem(sample, self.KINDS[key][0])
        self.kinds_legend.setVisible(len(kinds) > 1)

    def _kind_clicked(self, sample: pg.PlotDataItem) -> None:
        key = next((k for k, s in self._samples.items() if s is sample), None)
        if key is None:
            return
        (self.hidden.discard if sample.isVisible() else self.hidden.add)(key)
        for run in self._runs:
            if key in run.curves and run.curves["loss_smooth"].isVisible():
                run.curves[key].setVisible(key not in self.hidden)


class PowerPlot(WindowPlot):
    key = "power"

    def __init__(self):
        super().__init__("Power (W): the device's, per energy span (~1 s)",
                         "Average watts of the device that ran the work over each energy span (about a second of "
                         "measurement windows): its energy counter's difference over the window's time (NVML on "
                         "NVIDIA GPUs, RAPL for Linux CPUs: measured; macOS's IOReport model on Apple silicon: "
                         "estimated). Idle power is included.", StepAxis("left"))

    def show_measured(self, measured: bool, memory: MemoryPlot, any_runs: bool, x_mode: str) -> None:
        """The power plot appears with the first reading (an unmeasured run gives its room to the others); the
        lowest plot shown carries the x axis's values and label."""
        self.setVisible(measured)
        self.setMaximumHeight(1e6 if measured else 0)
        bottom = self if measured else memory
        for plot in (memory, self):
            axis = plot.getAxis("bottom")
            axis.setStyle(showValues=plot is bottom and any_runs)
            if plot is bottom:
                plot.setLabel("bottom", X_LABELS[x_mode])
            axis.showLabel(plot is bottom)


X_LABELS = {"step": "Step", "time": "Training time (s): warm-up and measured windows, validation excluded",
            "tokens": "Training tokens: a step's real tokens (padding excluded; padded text: their mean) × steps"}


def stack(view, legend_pt: str, legend_clicked: Callable) -> tuple[LossPlot, ThroughputPlot, MemoryPlot, PowerPlot]:
    """The four plots stacked on `view`, sharing the loss plot's x range, each with its hover line."""
    view.ci.layout.setContentsMargins(8, 8, 12, 6)
    view.ci.layout.setVerticalSpacing(4)
    shortcut = keys("Ctrl+R")
    loss = LossPlot(f"Press Run ({shortcut}) to start — loss, throughput, memory and power appear here live",
                    legend_pt, legend_clicked)
    plots = (loss, ThroughputPlot(), MemoryPlot(), PowerPlot())
    for row, plot in enumerate(plots):
        view.addItem(plot, row=row, col=0)
        plot.add_hover_line()
    for plot in plots[1:]:
        plot.setXLink(loss)
        plot.enableAutoRange(x=False)  # the loss plot, which has every step, drives the shared x range
    for plot in plots[:2]:
        plot.getAxis("bottom").setStyle(showValues=False)
    return plots
