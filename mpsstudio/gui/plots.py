"""Live loss, throughput and memory plots of runs as they stream in from the engine.

Data is appended into growing numpy buffers (series.py) and drawn only from a timer (REDRAW_INTERVAL_MS,
10 Hz; BUSY_REDRAW_INTERVAL_MS while a CPU run uses every core), and only when something changed (docs/architecture.md, "Live plots"): a long run costs memory in
proportion to its steps, never a redraw per step.
About 480 lines, on purpose: one widget whose three linked plots share their runs, colours and redraw
budget; its buffers live in series.py.
"""

from __future__ import annotations

import math
import time
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import QEvent, Qt, QTimer, Signal
from PySide6.QtGui import QColor, QFont, QKeySequence, QPalette
from PySide6.QtWidgets import QComboBox, QHBoxLayout, QLabel, QSizePolicy, QSlider, QVBoxLayout, QWidget

from .series import GrowingSeries, ema as _ema

__all__ = ["GrowingSeries", "LivePlots"]


# Runs execute in their own process, so drawing no longer takes the GIL from a run: 10 Hz. It still takes CPU
# time, which a CPU run that uses every core loses (its threads wait for each other at every parallel region):
# measured on the 2-core build machine (benchmarks/gui_penalty.py, docs/benchmarks.md), 10 Hz cost such a run
# ~18 % of its throughput, so while one runs the plots redraw at 2 Hz; a run that leaves a core free (fewer
# torch threads than cores, or a GPU run) gets 10 Hz.
REDRAW_INTERVAL_MS = 100
BUSY_REDRAW_INTERVAL_MS = 500
# Drawing may take at most this share of the GUI thread: it competes with the run for cores and for the GIL.
# Measured (benchmarks/gui_penalty.py, 2-core machine): at 0.33 a CPU run read 10,237 samples/s in the window
# against 19,409 without plots; at 0.1, 18,679.
REDRAW_SHARE = 0.03
EMA_ALPHA = 0.05  # weight of the newest loss in the smoothed line
SYMBOLS_UP_TO = 150  # per-window points get dots while a run has at most this many windows

# Okabe-Ito: distinguishable with the common colour-vision deficiencies. Black and the darkest blue are
# dropped or moved back on dark backgrounds, where they would vanish.
_OKABE_ITO_LIGHT = ("#0072B2", "#E69F00", "#009E73", "#CC79A7", "#D55E00", "#56B4E9", "#F0E442")
_OKABE_ITO_DARK = ("#56B4E9", "#E69F00", "#009E73", "#CC79A7", "#D55E00", "#F0E442", "#0072B2")
_ENDED_BADLY = ("failed", "cancelled")


def _number(v) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


def _positive(v) -> bool:
    return _number(v) and v > 0


def _fmt(v: float) -> str:
    return f"{v:.4g}" if math.isfinite(v) else "NaN"


class _StepAxis(pg.AxisItem):
    """Tick labels with thousands separators (12,000 rather than 12000 or 1.2e+04)."""

    def tickStrings(self, values, scale, spacing):  # noqa: N802 (pyqtgraph API)
        places = max(0, math.ceil(-math.log10(spacing * scale))) if spacing > 0 else 0
        return [f"{v * scale:,.{places}f}" for v in values]


class _BytesAxis(pg.AxisItem):
    """Tick labels in IEC bytes (powers of 1024, as everywhere in MPS Studio) with one unit for the visible
    range, ticks at round numbers of that unit (256 MiB, 512 MiB, 768 MiB)."""

    _UNITS = ((1024.0**4, "TiB"), (1024.0**3, "GiB"), (1024.0**2, "MiB"), (1024.0, "KiB"), (1.0, "B"))

    def _factor(self, top: float) -> tuple[float, str]:
        return next(((f, u) for f, u in self._UNITS if top >= f), (1.0, "B"))

    def tickSpacing(self, minVal, maxVal, size):  # noqa: N802
        factor, _ = self._factor(max(abs(minVal), abs(maxVal)))
        spacings = super().tickSpacing(minVal / factor, maxVal / factor, size)
        return [(major * factor, offset * factor) for major, offset in spacings]

    def tickStrings(self, values, scale, spacing):  # noqa: N802
        top = max((abs(v) for v in values), default=0.0)
        factor, unit = self._factor(top)
        step = spacing / factor
        places = max(0, math.ceil(-math.log10(step))) if step > 0 else 0
        return [("0" if v == 0 else f"{v / factor:,.{places}f} {unit}") for v in values]


class _TimedView(pg.GraphicsLayoutWidget):
    """The plot canvas, remembering how long its last paint took (drawing cost grows with the run)."""

    last_paint_s = 0.0

    def paintEvent(self, event) -> None:  # noqa: N802
        start = time.perf_counter()
        super().paintEvent(event)
        self.last_paint_s = time.perf_counter() - start


@dataclass
class _Run:
    """Everything drawn for one run: its buffers, curves and what changed since the last redraw."""

    run_id: str
    label: str
    colour: QColor
    warmup_steps: int
    series: dict[str, GrowingSeries]
    val: GrowingSeries
    curves: dict[str, pg.PlotDataItem] = field(default_factory=dict)
    status: str = "running"
    dirty: set[str] = field(default_factory=set)
    # Training time at known steps, (step, seconds): warm-up, then the end of each measurement window; the time
    # axis interpolates between them. Validation and setup are not training time and are left out.
    knot_steps: list[float] = field(default_factory=lambda: [0.0])
    knot_seconds: list[float] = field(default_factory=lambda: [0.0])

    def add_time(self, step: int, seconds: float | None) -> None:
        if seconds is None or not math.isfinite(seconds) or seconds < 0 or step <= self.knot_steps[-1]:
            return
        self.knot_steps.append(float(step))
        self.knot_seconds.append(self.knot_seconds[-1] + float(seconds))

    @property
    def legend_text(self) -> str:
        return self.label if self.status in ("running", "finished") else f"{self.label} — {self.status}"


class LivePlots(QWidget):
    """Four stacked plots sharing the step axis (loss, throughput, memory, power), one coloured series set per run.

    Above them: the x axis (steps or training time), the loss smoothing, and a readout of the values under the
    pointer. Stored runs are drawn with show_runs, through the same calls as a live run."""

    emptied = Signal(bool)  # True: no run is drawn (the plots collapse to a hint)

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self._runs: dict[str, _Run] = {}
        self._warmup_regions: dict[int, pg.LinearRegionItem] = {}
        self._colour_count = 0
        self._val_legend_proxy: pg.PlotDataItem | None = None

        self._next_redraw_at = 0.0
        self._x_mode = "step"
        self._alpha = EMA_ALPHA
        self._view = _TimedView(self)
        self._view.ci.layout.setContentsMargins(8, 8, 12, 6)
        self._view.ci.layout.setVerticalSpacing(4)
        self._controls = self._make_controls()
        shortcut = QKeySequence("Ctrl+R").toString(QKeySequence.SequenceFormat.NativeText)
        self._empty_label = QLabel(f"Press Run ({shortcut}) to start, or select runs below to see their curves: "
                                   "loss, throughput, memory and power.")
        self._empty_label.setAlignment(Qt.AlignmentFlag.AlignCenter)
        self._empty_label.setEnabled(False)  # the secondary text colour
        self._empty_label.setWordWrap(True)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.setSpacing(2)
        layout.addWidget(self._controls)
        layout.addWidget(self._view, 1)
        layout.addWidget(self._empty_label, 1)

        self._loss = self._add_plot(0, "Loss", pg.AxisItem("left"))
        self._throughput = self._add_plot(1, "Throughput (samples/s)", _StepAxis("left"))
        self._memory = self._add_plot(2, "Memory: GPU allocator, CPU run's growth", _BytesAxis("left"))
        self._power = self._add_plot(3, "Power (W): the device's, per energy span (~1 s)", _StepAxis("left"))
        self._window_plots = {"throughput": self._throughput, "memory": self._memory, "power": self._power}
        self._loss.titleLabel.setToolTip(
            "Training loss of every step (faint) and its exponential moving average (solid). "
            "Diamonds: validation loss at the end of each epoch. The shaded band is the warm-up."
        )
        self._throughput.titleLabel.setToolTip(
            "Samples per second of each measurement window, timed with the device synchronized. "
            "Warm-up steps are never counted."
        )
        self._memory.titleLabel.setToolTip("Device memory in use at the end of each measurement window.")
        self._power.titleLabel.setToolTip(
            "Average watts of the device that ran the work over each energy span (about a second of measurement "
            "windows): its energy counter's "
            "difference over the window's time (NVML on NVIDIA GPUs, RAPL for Linux CPUs: measured; macOS's "
            "IOReport model on Apple silicon: estimated). Idle power is included."
        )
        self._power_text = ""
        for plot in self._window_plots.values():
            plot.setXLink(self._loss)
            plot.enableAutoRange(x=False)  # the loss plot, which has every step, drives the shared x range
        for plot in (self._loss, self._throughput):
            plot.getAxis("bottom").setStyle(showValues=False)

        self._legend = self._loss.addLegend(offset=(-8, 8), verSpacing=-4, labelTextSize=self._small_pt())
        self._legend.sigSampleClicked.connect(self._legend_clicked)
        self._legend.setToolTip("Click a run to hide or show it.")

        shortcut = QKeySequence("Ctrl+R").toString(QKeySequence.SequenceFormat.NativeText)
        self._hint = pg.TextItem(
            f"Press Run ({shortcut}) to start — loss, throughput, memory and power appear here live",
            anchor=(0.5, 0.5)
        )
        self._hint.setParentItem(self._loss.getViewBox())
        self._loss.getViewBox().sigResized.connect(self._place_hint)

        self._hover_lines = []
        for plot in (self._loss, *self._window_plots.values()):
            line = pg.InfiniteLine(angle=90, movable=False)
            line.setVisible(False)
            plot.addItem(line, ignoreBounds=True)
            self._hover_lines.append(line)
        self._view.scene().sigMouseMoved.connect(self._hover)

        self._timer = QTimer(self)
        self._timer.setInterval(REDRAW_INTERVAL_MS)
        self._timer.timeout.connect(self._tick)
        self._apply_theme()
        self._show_empty(True)

    # ---- public API ---------------------------------------------------------------------------------

    def set_cores_busy(self, busy: bool) -> None:
        """A CPU run that uses every core is being measured: redraw less often (see BUSY_REDRAW_INTERVAL_MS)."""
        self._timer.setInterval(BUSY_REDRAW_INTERVAL_MS if busy else REDRAW_INTERVAL_MS)

    def redraw_interval_ms(self) -> int:
        return self._timer.interval()

    def start_run(self, run_id: str, label: str, warmup_steps: int) -> None:
        """Begin a new series set in the next palette colour; the legend names it `label`."""
        if run_id in self._runs:
            self._remove_run(self._runs.pop(run_id))
        colour = QColor(self._palette_colours()[self._colour_count % len(_OKABE_ITO_LIGHT)])
        self._colour_count += 1
        run = _Run(
            run_id=run_id,
            label=label,
            colour=colour,
            warmup_steps=int(warmup_steps),
            series={key: GrowingSeries() for key in ("loss", "loss_smooth", "throughput", "memory", "power")},
            val=GrowingSeries(capacity=16),
        )
        run.curves = self._make_curves(run)
        self._runs[run_id] = run
        self._show_empty(False)
        self._rebuild_legend()

    def add_warmup(self, run_id: str, losses: Sequence[float], seconds: float | None = None) -> None:
        """Losses of warm-up steps 1..len(losses) (taking `seconds`); the warm-up span is shaded on the loss plot."""
        run = self._runs.get(run_id)
        if run is None:
            return
        self._append_losses(run, 1, losses)
        run.add_time(len(losses), seconds)
        if len(losses):
            self._shade_warmup(len(losses))

    def add_window(
        self, run_id: str, first_step: int, losses: Sequence[float], samples_per_s: float, memory: int,
        power_w: float | None = None, seconds: float | None = None,
    ) -> None:
        """Per-step losses from `first_step`; throughput, memory (bytes) and power (W, when measured) land on the
        window's last step; `seconds` is the window's synchronized time (for the time axis)."""
        run = self._runs.get(run_id)
        if run is None:
            return
        self._append_losses(run, first_step, losses)
        last_step = first_step + max(len(losses), 1) - 1
        run.add_time(last_step, seconds)
        run.series["throughput"].append(last_step, samples_per_s)
        run.series["memory"].append(last_step, memory)
        run.dirty.update(("throughput", "memory"))
        if power_w is not None and math.isfinite(power_w):
            run.series["power"].append(last_step, power_w)
            run.dirty.add("power")
            if not self._power.isVisible():
                self._update_power()

    def show_runs(self, results: Sequence, power_notes: bool = True) -> None:
        """Draw stored runs (whole RunResults: steps, windows, epochs) as they were drawn live, one colour per
        run, the legend naming each by device (and machine and setup where they differ). Replaces what is shown."""
        self.clear()
        results = list(results)
        machines = {r.machine for r in results}
        setups = {(r.config.model, r.config.dataset, r.config.batch_size, r.config.precision) for r in results}
        for r in results:
            label = r.config.device
            if len(machines) > 1:
                label += f" · {r.machine}"
            if len(setups) > 1:
                label += f" · {r.config.model} batch {r.config.batch_size}"
            self._draw_stored(r, label)
        notes = [str(r.summary.get("energy_reason") or "") for r in results if not r.summary.get("energy_j")]
        note = ""
        if power_notes and notes and notes[0] and len(notes) == len(results):
            note = notes[0] if notes[0].lower().startswith("not measured") else f"not measured: {notes[0]}"
            note = "Power " + note
        self.set_power_note(note)
        self.redraw()

    def _draw_stored(self, r, label: str) -> None:
        s = r.summary
        losses = list(r.losses)
        warm = int(s.get("warmup_steps") or 0) if isinstance(s.get("warmup_steps"), (int, float)) else 0
        warm = max(0, min(warm, len(losses)))
        self.start_run(r.id, label, warm)
        run = self._runs[r.id]
        warmup_s = s.get("warmup_s")
        self.add_warmup(r.id, losses[:warm], warmup_s if isinstance(warmup_s, (int, float)) else None)
        drawn = warm
        for w in r.windows:
            first, steps = w.get("first_step"), w.get("steps")
            if not isinstance(first, int) or not isinstance(steps, int) or first < 1 or steps < 0:
                continue
            if first - 1 > drawn:  # steps between windows (none in a run of this version): drawn as they are
                self._append_losses(run, drawn + 1, losses[drawn:first - 1])
            window_losses = losses[first - 1:first - 1 + steps]
            energy_j, energy_s = w.get("energy_j"), w.get("energy_s")
            power = energy_j / energy_s if _positive(energy_j) and _positive(energy_s) else None
            sps = w.get("samples_per_s")
            self.add_window(r.id, first, window_losses, sps if _number(sps) else math.nan,
                            w.get("memory") if _number(w.get("memory")) else math.nan, power,
                            seconds=w.get("seconds") if _number(w.get("seconds")) else None)
            drawn = max(drawn, first - 1 + len(window_losses))
        if drawn < len(losses):  # a failed run's steps after its last window: what it measured until it failed
            self._append_losses(run, drawn + 1, losses[drawn:])
        for e in r.epochs:
            step = r.epoch_step(e)
            if step is not None and _number(e.get("val_loss")):
                self.add_epoch(r.id, step, e["val_loss"])
        self.finish_run(r.id, r.status)

    def set_x_axis(self, mode: str) -> None:
        """"step" (every step, warm-up included) or "time": training seconds (warm-up and measured windows, as
        timed with the device synchronized; validation and setup left out)."""
        if mode not in ("step", "time") or mode == self._x_mode:
            return
        self._x_mode = mode
        self._update_power()
        self._x_box.setCurrentIndex(0 if mode == "step" else 1)
        for region in self._warmup_regions.values():
            region.setVisible(mode == "step")
        for run in self._runs.values():
            run.dirty.update((*run.series, "val"))
        self._loss.enableAutoRange(x=True)
        self.redraw()

    def x_axis(self) -> str:
        return self._x_mode

    def set_smoothing(self, weight: float) -> None:
        """The smoothed loss's weight of the past, 0 (none) to 0.99 (TensorBoard's slider); redraws every run."""
        weight = min(0.99, max(0.0, float(weight)))
        self._alpha = 1.0 - weight
        self._smooth_slider.blockSignals(True)
        self._smooth_slider.setValue(round(weight * 100))
        self._smooth_slider.blockSignals(False)
        self._smooth_value.setText(f"{weight:.2f}")
        for run in self._runs.values():
            loss = run.series["loss"]
            smooth = GrowingSeries(max(1024, len(loss)))
            smooth.append(loss.x, _ema(loss.y, None, self._alpha))
            run.series["loss_smooth"] = smooth
            run.dirty.add("loss_smooth")
        self.redraw()

    def smoothing(self) -> float:
        return round(1.0 - self._alpha, 2)

    def readout(self, x: float) -> str:
        """What the hover line shows at `x` (a step or training seconds): each visible run's loss, smoothed
        loss and the throughput of the window holding that step."""
        parts = []
        for run in self._runs.values():
            if not run.curves.get("loss_smooth") or not run.curves["loss_smooth"].isVisible():
                continue
            loss = run.series["loss"]
            if not len(loss):
                continue
            step = x if self._x_mode == "step" else float(np.interp(x, run.knot_seconds, run.knot_steps))
            i = int(np.clip(np.searchsorted(loss.x, step), 0, len(loss) - 1))
            if i > 0 and abs(loss.x[i - 1] - step) < abs(loss.x[i] - step):
                i -= 1
            text = f"{run.label}: step {int(loss.x[i]):,} loss {_fmt(loss.y[i])}"
            smooth = run.series["loss_smooth"]
            if i < len(smooth):
                text += f" (smoothed {_fmt(smooth.y[i])})"
            rate = run.series["throughput"]
            j = int(np.searchsorted(rate.x, loss.x[i])) if len(rate) else 0
            if j < len(rate) and math.isfinite(rate.y[j]):
                text += f", {rate.y[j]:,.0f} samples/s (its window)"
            parts.append(text)
        return "   ".join(parts)

    def set_power_note(self, text: str) -> None:
        """Say why there is no power plot ("Power not measured: no energy counter readable on this Linux VM"),
        in the bar above the plots; "" hides the note. The power plot itself appears with the first reading,
        so an unmeasured run's plots give its room to the others instead of an empty frame."""
        self._power_text = text
        self._update_power()

    def power_note(self) -> str:
        """The note shown instead of the power plot ("" when none is shown)."""
        return self._power_label.toolTip() if not self._power_label.isHidden() else ""

    def power_shown(self) -> bool:
        return self._power.isVisible()

    def _update_power(self) -> None:
        measured = any(len(r.series["power"]) for r in self._runs.values())
        self._power.setVisible(measured)
        self._power.setMaximumHeight(1e6 if measured else 0)
        bottom = self._power if measured else self._memory
        for plot in (self._memory, self._power):
            axis = plot.getAxis("bottom")
            axis.setStyle(showValues=plot is bottom and bool(self._runs))
            if plot is bottom:
                plot.setLabel("bottom", self._x_label())
            axis.showLabel(plot is bottom)
        self._power_label.setVisible(bool(self._power_text) and not measured)
        self._power_label.setToolTip(self._power_text)
        fm = self._power_label.fontMetrics()
        self._power_label.setText(fm.elidedText(self._power_text, Qt.TextElideMode.ElideRight, 520))

    def _x_label(self) -> str:
        return "Step" if self._x_mode == "step" else "Training time (s): warm-up and measured windows, " \
            "validation excluded"

    def add_epoch(self, run_id: str, step: int, val_loss: float | None) -> None:
        """Validation loss at `step`, drawn as a diamond on the loss plot (nothing when there is none)."""
        run = self._runs.get(run_id)
        if run is None or val_loss is None:
            return
        run.val.append(step, val_loss)
        run.dirty.add("val")
        if self._val_legend_proxy is None:
            self._val_legend_proxy = pg.PlotDataItem(
                symbol="d", symbolSize=8, symbolBrush=self._secondary_text(), symbolPen=None, pen=None
            )
            self._rebuild_legend()

    def finish_run(self, run_id: str, status: str) -> None:
        """Mark the run over; a failed or cancelled run is drawn dashed and faded and says so in the legend."""
        run = self._runs.get(run_id)
        if run is None:
            return
        run.status = status
        if status in _ENDED_BADLY:
            self._style_curves(run)
            self._rebuild_legend()

    def clear(self) -> None:
        """Remove every run, warm-up band and legend entry; the start hint shows again."""
        for run in self._runs.values():
            self._remove_run(run)
        self._runs.clear()
        for region in self._warmup_regions.values():
            self._loss.removeItem(region)
        self._warmup_regions.clear()
        self._val_legend_proxy = None
        self._colour_count = 0
        self._legend.clear()
        self._legend.setVisible(False)
        for plot in (self._loss, *self._window_plots.values()):
            plot.enableAutoRange(y=True)
        self._power_text = ""
        self._loss.enableAutoRange(x=True)
        self._show_empty(True)

    def redraw(self) -> None:
        """Push new data to the curves that changed since the last redraw (the timer calls this)."""
        for run in self._runs.values():
            if not run.dirty:
                continue
            for key in run.dirty:
                source = run.val if key == "val" else run.series[key]
                curve = run.curves[key]
                if key in self._window_plots:
                    wants_dots = len(source) <= SYMBOLS_UP_TO
                    if wants_dots != (curve.opts["symbol"] is not None):
                        curve.setSymbol("o" if wants_dots else None)
                x = source.x if self._x_mode == "step" else np.interp(source.x, run.knot_steps, run.knot_seconds)
                curve.setData(x, source.y, connect="finite")
            run.dirty.clear()

    def series(self, run_id: str) -> dict[str, GrowingSeries]:
        """The run's buffers: "loss", "loss_smooth", "throughput", "memory", "power" (x is the step)."""
        return dict(self._runs[run_id].series)

    def curves(self, run_id: str) -> dict[str, pg.PlotDataItem]:
        """The run's plot items: the series keys plus "val" (for tests and image export)."""
        return dict(self._runs[run_id].curves)

    def run_ids(self) -> list[str]:
        return list(self._runs)

    def hint_visible(self) -> bool:
        return self._hint.isVisible()

    def timer_active(self) -> bool:
        return self._timer.isActive()

    def _tick(self) -> None:
        """Timer slot: redraw, but back off while a redraw (update plus last paint) costs much of a frame."""
        start = time.perf_counter()
        if start < self._next_redraw_at or not any(run.dirty for run in self._runs.values()):
            return
        self.redraw()
        cost = time.perf_counter() - start + self._view.last_paint_s
        self._next_redraw_at = start + cost / REDRAW_SHARE

    def _make_controls(self) -> QWidget:
        bar = QWidget(self)
        row = QHBoxLayout(bar)
        row.setContentsMargins(8, 4, 8, 0)
        row.setSpacing(6)
        self._x_box = QComboBox(bar)
        self._x_box.addItems(["Step", "Training time"])
        self._x_box.setToolTip("What the horizontal axis counts: steps (warm-up included), or training seconds "
                               "(warm-up and measured windows, timed with the device synchronized; validation "
                               "excluded).")
        self._x_box.currentIndexChanged.connect(lambda i: self.set_x_axis("step" if i == 0 else "time"))
        self._smooth_slider = QSlider(Qt.Orientation.Horizontal, bar)
        self._smooth_slider.setRange(0, 99)
        self._smooth_slider.setValue(round((1 - EMA_ALPHA) * 100))
        self._smooth_slider.setFixedWidth(120)
        self._smooth_slider.setToolTip("Smoothing of the solid loss line: an exponential moving average's weight "
                                       "of the past, 0 (none) to 0.99. The faint line is every step's loss.")
        self._smooth_slider.valueChanged.connect(lambda v: self.set_smoothing(v / 100))
        self._smooth_value = QLabel(f"{1 - EMA_ALPHA:.2f}", bar)
        self._readout = QLabel("", bar)
        self._readout.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self._readout.setMinimumWidth(10)
        self._readout.setSizePolicy(QSizePolicy.Policy.Ignored, QSizePolicy.Policy.Preferred)
        x_label, smooth_label = QLabel("X axis:", bar), QLabel("Smoothing:", bar)
        x_label.setBuddy(self._x_box)
        smooth_label.setBuddy(self._smooth_slider)
        for w in (x_label, self._x_box, smooth_label, self._smooth_slider, self._smooth_value):
            row.addWidget(w)
        row.addSpacing(12)
        row.addWidget(self._readout, 1)
        self._power_label = QLabel("", bar)
        self._power_label.setEnabled(False)  # secondary text
        self._power_label.hide()
        row.addWidget(self._power_label)
        return bar

    def _hover(self, pos) -> None:
        """A vertical line through every plot at the pointer, and each run's values there in the readout."""
        inside = next((p for p in (self._loss, *self._window_plots.values())
                       if p.sceneBoundingRect().contains(pos)), None)
        shown = inside is not None and bool(self._runs)
        for line in self._hover_lines:
            line.setVisible(shown)
        if not shown:
            self._readout.setText("")
            return
        x = inside.getViewBox().mapSceneToView(pos).x()
        for line in self._hover_lines:
            line.setPos(x)
        self._readout.setText(self.readout(x))

    def readout_text(self) -> str:
        return self._readout.text()

    # ---- Qt events ----------------------------------------------------------------------------------

    def showEvent(self, event) -> None:  # noqa: N802
        super().showEvent(event)
        self.redraw()
        self._timer.start()

    def hideEvent(self, event) -> None:  # noqa: N802
        self._timer.stop()
        super().hideEvent(event)

    def closeEvent(self, event) -> None:  # noqa: N802
        self._timer.stop()
        super().closeEvent(event)

    def changeEvent(self, event) -> None:  # noqa: N802
        if event.type() in (QEvent.Type.PaletteChange, QEvent.Type.ApplicationPaletteChange):
            self._apply_theme()
        super().changeEvent(event)

    # ---- building blocks ----------------------------------------------------------------------------

    def _add_plot(self, row: int, title: str, left: pg.AxisItem) -> pg.PlotItem:
        plot = self._view.addPlot(row=row, col=0, axisItems={"left": left, "bottom": _StepAxis("bottom")})
        plot.titleLabel.setAttr("justify", "left")
        plot.setTitle(title)
        plot.hideButtons()
        # No grid: pyqtgraph's axis grid made each frame ~8x dearer (27 ms vs 3.5 ms at 1100x520 here), and every
        # millisecond of drawing is taken from the run being measured (docs/benchmarks.md, gui_penalty).
        plot.getAxis("left").setWidth(64)
        plot.setMenuEnabled(True)
        return plot

    def _make_curves(self, run: _Run) -> dict[str, pg.PlotDataItem]:
        curves = {
            "loss": self._loss.plot(),
            "loss_smooth": self._loss.plot(),
            "throughput": self._throughput.plot(),
            "memory": self._memory.plot(),
            "power": self._power.plot(),
            "val": self._loss.plot(),
        }
        for key, curve in curves.items():
            if key != "val":
                curve.setDownsampling(auto=True, method="peak")
                curve.setClipToView(True)
        curves["loss"].setZValue(1)
        curves["loss_smooth"].setZValue(2)
        curves["val"].setZValue(3)
        self._style_curves_of(run, curves)
        return curves

    def _style_curves(self, run: _Run) -> None:
        self._style_curves_of(run, run.curves)

    def _style_curves_of(self, run: _Run, curves: dict[str, pg.PlotDataItem]) -> None:
        """Pens and fills from the run's colour; dashed and faded once the run failed or was cancelled."""
        ended_badly = run.status in _ENDED_BADLY
        style = Qt.PenStyle.DashLine if ended_badly else Qt.PenStyle.SolidLine
        fade = 0.55 if ended_badly else 1.0

        def colour(alpha: float) -> QColor:
            c = QColor(run.colour)
            c.setAlphaF(alpha * fade)
            return c

        curves["loss"].setPen(pg.mkPen(colour(0.2), width=1))
        curves["loss_smooth"].setPen(pg.mkPen(colour(1.0), width=1, style=style))
        for key in self._window_plots:
            curve = curves[key]
            curve.setPen(pg.mkPen(colour(1.0), width=1, style=style))
            curve.setFillLevel(0)
            curve.setFillBrush(pg.mkBrush(colour(0.08)))
            curve.setSymbol("o")
            curve.setSymbolSize(4)
            curve.setSymbolPen(None)
            curve.setSymbolBrush(pg.mkBrush(colour(1.0)))
        val = curves["val"]
        val.setPen(None)
        val.setSymbol("d")
        val.setSymbolSize(10)
        val.setSymbolBrush(pg.mkBrush(colour(1.0)))
        val.setSymbolPen(pg.mkPen(self.palette().color(QPalette.ColorRole.Base), width=1))

    def _append_losses(self, run: _Run, first_step: int, losses: Sequence[float]) -> None:
        if not len(losses):
            return
        values = np.asarray(losses, dtype=np.float64)
        steps = np.arange(first_step, first_step + len(values), dtype=np.float64)
        run.series["loss"].append(steps, values)
        run.series["loss_smooth"].append(steps, _ema(values, run.series["loss_smooth"].last_y(), self._alpha))
        run.dirty.update(("loss", "loss_smooth"))

    def _shade_warmup(self, steps: int) -> None:
        """One light, fixed band per distinct warm-up length, labelled "warm-up"."""
        if steps in self._warmup_regions:
            return
        region = pg.LinearRegionItem(values=(0.5, steps + 0.5), movable=False)
        region.setZValue(-10)
        region.setToolTip(
            f"Warm-up: steps 1–{steps:,} are timed apart and never counted in throughput "
            "(graph compilation, autotuning, caches)."
        )
        pg.InfLineLabel(region.lines[1], "warm-up", position=0.05, anchors=[(0, 1), (0, 1)])
        self._loss.addItem(region, ignoreBounds=True)
        self._warmup_regions[steps] = region
        self._style_region(region)

    def _style_region(self, region: pg.LinearRegionItem) -> None:
        shade = self._text()
        shade.setAlphaF(0.07)
        region.setBrush(pg.mkBrush(shade))
        region.setHoverBrush(pg.mkBrush(shade))
        edge = self._text()
        edge.setAlphaF(0.25)
        for line in region.lines:
            line.setPen(pg.mkPen(edge, width=1, style=Qt.PenStyle.DotLine))
            line.setHoverPen(pg.mkPen(edge, width=1, style=Qt.PenStyle.DotLine))
            for child in line.childItems():
                if isinstance(child, pg.InfLineLabel):
                    child.setColor(self._secondary_text())

    def _remove_run(self, run: _Run) -> None:
        for key, curve in run.curves.items():
            plot = self._loss if key in ("loss", "loss_smooth", "val") else self._window_plots[key]
            plot.removeItem(curve)
        run.curves.clear()

    def _rebuild_legend(self) -> None:
        """Runs in start order, then the validation marker; rebuilt whole because it changes rarely."""
        self._legend.clear()
        for run in self._runs.values():
            self._legend.addItem(run.curves["loss_smooth"], run.legend_text)
        if self._val_legend_proxy is not None:
            self._legend.addItem(self._val_legend_proxy, "validation loss")
        self._legend.setColumnCount(min(4, max(1, len(self._legend.items))))  # one row: the short loss plot
        self._legend.setVisible(bool(self._legend.items))

    def _legend_clicked(self, item: pg.PlotDataItem) -> None:
        """Clicking a run in the legend hides or shows all of its curves, not only the smoothed loss."""
        for run in self._runs.values():
            if run.curves.get("loss_smooth") is item:
                for curve in run.curves.values():
                    curve.setVisible(item.isVisible())

    def is_empty(self) -> bool:
        return not self._runs

    def _show_empty(self, empty: bool) -> None:
        """With no runs the plots collapse to one line of hint (no empty frames and 0..1 scales), so the
        table below gets the room; `emptied` tells the window."""
        changed = self._view.isHidden() != empty
        self._view.setVisible(not empty)
        self._controls.setVisible(not empty)
        self._empty_label.setVisible(empty)
        if changed:
            self.emptied.emit(empty)
        self._hint.setVisible(empty)
        self._legend.setVisible(not empty and bool(self._legend.items))
        for plot in (self._loss, *self._window_plots.values()):
            plot.getAxis("left").setStyle(showValues=not empty)
        self._update_power()

    def _place_hint(self) -> None:
        self._hint.setPos(self._loss.getViewBox().rect().center())

    # ---- theme --------------------------------------------------------------------------------------

    def _text(self) -> QColor:
        return QColor(self.palette().color(QPalette.ColorRole.Text))

    def _secondary_text(self) -> QColor:
        c = self._text()
        c.setAlphaF(0.6)
        return c

    def _is_dark(self) -> bool:
        return self.palette().color(QPalette.ColorRole.Base).lightnessF() < 0.5

    def _palette_colours(self) -> tuple[str, ...]:
        return _OKABE_ITO_DARK if self._is_dark() else _OKABE_ITO_LIGHT

    def _small_pt(self) -> str:
        return f"{max(9.0, self.font().pointSizeF() - 1):g}pt"

    def _apply_theme(self) -> None:
        """Background from the palette's Base, axes and labels from its Text, so dark mode just works."""
        base = self.palette().color(QPalette.ColorRole.Base)
        self._view.setBackground(base)
        axis_pen = self._text()
        axis_pen.setAlphaF(0.35)
        tick_font = QFont(self.font())
        tick_font.setPointSizeF(max(8.0, self.font().pointSizeF() - 2))
        title_pt = f"{max(9.0, self.font().pointSizeF()):g}pt"
        for plot in (self._loss, *self._window_plots.values()):
            for name in ("left", "bottom"):
                axis = plot.getAxis(name)
                axis.setPen(axis_pen)
                axis.setTextPen(self._secondary_text())
                axis.setStyle(tickFont=tick_font, tickLength=-4)
                axis.label.setDefaultTextColor(self._secondary_text())
            plot.titleLabel.setText(plot.titleLabel.text, color=self._text(), size=title_pt, bold=True)
        legend_bg = QColor(base)
        legend_bg.setAlphaF(0.85)
        legend_edge = self._text()
        legend_edge.setAlphaF(0.15)
        self._legend.setBrush(pg.mkBrush(legend_bg))
        self._legend.setPen(pg.mkPen(legend_edge))
        self._legend.setLabelTextColor(self._text())
        self._hint.setColor(self._secondary_text())
        for region in self._warmup_regions.values():
            self._style_region(region)
        if self._val_legend_proxy is not None:
            self._val_legend_proxy.setSymbolBrush(pg.mkBrush(self._secondary_text()))
        for run in self._runs.values():
            self._style_curves(run)
