"""Live loss, throughput, memory and power plots of runs as they stream in from the engine, and of stored runs.

Data is appended into growing numpy buffers (series.py) and drawn only from a timer (redraw.py: 10 Hz; 2 Hz
while a CPU run uses every core), and only when something changed (docs/architecture.md, "Live plots"): a long run costs memory in proportion to its steps, never a redraw per step.
Each plot is its own class (panes.py); this widget shares their runs, colours, x axis and redraw budget.
"""

from __future__ import annotations

from collections.abc import Sequence

import pyqtgraph as pg
from PySide6.QtCore import QEvent, Signal
from PySide6.QtGui import QPalette
from PySide6.QtWidgets import QVBoxLayout, QWidget

from . import stored, theme
from .axes import TimedView
from .controls import PlotControls, empty_label
from .curves import RunCurves
from .panes import WindowPlot, stack
from .redraw import RedrawClock
from .plot_runs import OKABE_ITO_DARK, OKABE_ITO_LIGHT, X_MODES
from .series import GrowingSeries

EMA_ALPHA = 0.05  # weight of the newest loss in the smoothed line


class LivePlots(QWidget):
    """Four stacked plots sharing the step axis (loss, throughput, memory, power), one coloured series set per run.

    Above them: the x axis (steps or training time), the loss smoothing, and a readout of the values under the
    pointer. Stored runs are drawn with show_runs, through the same calls as a live run."""

    emptied = Signal(bool)  # True: no run is drawn (the plots collapse to a hint)

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self._x_mode = "step"
        self._power_text = ""
        self._view = TimedView(self)
        self._controls = PlotControls(self, EMA_ALPHA, self.set_x_axis, self.set_smoothing)
        self._smooth_slider, self._readout = self._controls.smooth_slider, self._controls.readout
        self._empty_label = empty_label()
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.setSpacing(2)
        for widget, stretch in ((self._controls, 0), (self._view, 1), (self._empty_label, 1)):
            layout.addWidget(widget, stretch)
        self._loss, self._throughput, self._memory, self._power = stack(
            self._view, theme.small_pt(self), lambda item: self._curves.legend_clicked(item))
        self._window_plots: dict[str, WindowPlot] = {p.key: p for p in (self._throughput, self._memory, self._power)}
        self._curves = RunCurves(self._loss, self._window_plots,
                                 lambda: OKABE_ITO_DARK if theme.is_dark(self) else OKABE_ITO_LIGHT,
                                 lambda: self.palette().color(QPalette.ColorRole.Base),
                                 lambda: theme.text(self), lambda: theme.secondary(self))
        self._curves.alpha = EMA_ALPHA
        self._legend, self._warmup_regions, self._hint = self._loss.legend, self._loss.regions, self._loss.hint
        self._view.scene().sigMouseMoved.connect(self._hover)
        self.redraws = RedrawClock(self, lambda: any(run.dirty for run in self._curves.runs.values()),
                                   self.redraw, lambda: self._view.last_paint_s)
        self._apply_theme()
        self._show_empty(True)

    def _plots(self) -> tuple:
        return self._curves.plots()

    # ---- runs (their buffers and curves: curves.py) ---------------------------------------------------

    def set_redraw_interval_ms(self, ms: int) -> None:
        """How often the plots redraw while a run is measured (redraw.interval_for decides, from Preferences)."""
        self.redraws.set_interval_ms(ms)

    def redraw_interval_ms(self) -> int:
        return self.redraws.interval_ms()

    def start_run(self, run_id: str, label: str, warmup_steps: int, tokens_per_step: float | None = None) -> None:
        """Begin a new series set in the next palette colour; the legend names it `label`. `tokens_per_step`: a
        token model's real tokens a step, as the engine gave it (the tokens axis; None: not a token model, and the
        axis goes back to steps)."""
        self._curves.start(run_id, label, warmup_steps, tokens_per_step)
        self._offer_tokens()
        self._show_empty(False)

    def _offer_tokens(self) -> None:
        allowed = self._curves.tokens_for_all()
        self._controls.allow_tokens(allowed)
        if self._x_mode == "tokens" and not allowed:
            self.set_x_axis("step")

    def add_warmup(self, run_id: str, losses: Sequence[float], seconds: float | None = None) -> None:
        """Losses of warm-up steps 1..len(losses) (taking `seconds`); the warm-up span is shaded on the loss plot."""
        self._curves.add_warmup(run_id, losses, seconds)

    def add_window(self, run_id: str, first_step: int, losses: Sequence[float], samples_per_s: float, memory: int,
                   power_w: float | None = None, seconds: float | None = None, lines: dict | None = None) -> None:
        """Per-step losses from `first_step`; throughput, memory (bytes) and power (W, when measured) land on the
        window's last step; `seconds` is the window's synchronized time (for the time axis); `lines` the memory
        plot's other lines (memory_driver, memory_process, swap_used: bytes, None where not read)."""
        if self._curves.add_window(run_id, first_step, losses, samples_per_s, memory, power_w, seconds, lines) \
                and not self._power.isVisible():
            self._update_power()
        if lines:
            self._memory.show_kinds(self._curves.runs.values())

    def append_losses(self, run_id: str, first_step: int, losses: Sequence[float]) -> None:
        """Losses of steps that no window holds (a stored failed run's last steps)."""
        self._curves.append_losses(run_id, first_step, losses)

    def add_epoch(self, run_id: str, step: int, val_loss: float | None) -> None:
        """Validation loss at `step`, drawn as a diamond on the loss plot (nothing when there is none)."""
        self._curves.add_epoch(run_id, step, val_loss)

    def finish_run(self, run_id: str, status: str) -> None:
        """Mark the run over; a failed or cancelled run is drawn dashed and faded and says so in the legend."""
        self._curves.finish(run_id, status)

    def show_runs(self, results: Sequence, power_notes: bool = True) -> None:
        """Draw stored runs (whole RunResults: steps, windows, epochs) as they were drawn live, one colour per
        run, the legend naming each by device (and machine and setup where they differ). Replaces what is shown."""
        self.clear()
        results = list(results)
        for r, label in zip(results, stored.legend_labels(results)):
            stored.draw(self, r, label)
        self.set_power_note(stored.power_note(results) if power_notes else "")
        self.redraw()

    def clear(self) -> None:
        """Remove every run, warm-up band and legend entry; the start hint shows again."""
        self._curves.clear()
        self._offer_tokens()
        self._memory.show_kinds(())
        self._legend.clear()
        self._legend.setVisible(False)
        for plot in self._curves.plots():
            plot.enableAutoRange(y=True)
        self._power_text = ""
        self._loss.enableAutoRange(x=True)
        self._show_empty(True)

    # ---- drawing --------------------------------------------------------------------------------------

    def redraw(self) -> None:
        """Push new data to the curves that changed since the last redraw (the timer calls this)."""
        self._curves.redraw(self._x_mode)

    def set_x_axis(self, mode: str) -> None:
        """"step" (every step, warm-up included), "time": training seconds (warm-up and measured windows, as
        timed with the device synchronized; validation and setup left out), or "tokens": a token model's training
        tokens (refused while a run drawn is not a token model's)."""
        if mode not in X_MODES or mode == self._x_mode or (mode == "tokens" and not self._curves.tokens_for_all()):
            self._controls.x_box.setCurrentIndex(X_MODES.index(self._x_mode))
            return
        self._x_mode = mode
        self._update_power()
        self._controls.x_box.setCurrentIndex(X_MODES.index(mode))
        for region in self._warmup_regions.values():
            region.setVisible(mode == "step")
        for run in self._curves.runs.values():
            run.dirty.update((*run.series, "val"))
        self._loss.enableAutoRange(x=True)
        self.redraw()

    def x_axis(self) -> str:
        return self._x_mode

    def set_smoothing(self, weight: float) -> None:
        """The smoothed loss's weight of the past, 0 (none) to 0.99 (TensorBoard's slider); redraws every run."""
        weight = min(0.99, max(0.0, float(weight)))
        self._controls.show_smoothing(weight)
        self._curves.smooth(1.0 - weight)
        self.redraw()

    def smoothing(self) -> float:
        return round(1.0 - self._curves.alpha, 2)

    # ---- the readout, the power note --------------------------------------------------------------------

    def readout(self, x: float) -> str:
        """What the hover line shows at `x` (a step, training seconds or tokens): each visible run's loss, smoothed
        loss and the throughput of the window holding that step."""
        return self._curves.readout(x, self._x_mode)

    def _hover(self, pos) -> None:
        """A vertical line through every plot at the pointer, and each run's values there in the readout."""
        self._readout.setText(self._curves.hover(pos, self._x_mode))

    def readout_text(self) -> str:
        return self._readout.text()

    def set_power_note(self, text: str) -> None:
        """Say why there is no power plot ("Power not measured: no energy counter readable on this Linux VM"),
        in the bar above the plots; "" hides the note. The power plot itself appears with the first reading,
        so an unmeasured run's plots give its room to the others instead of an empty frame."""
        self._power_text = text
        self._update_power()

    def power_note(self) -> str:
        """The note shown instead of the power plot ("" when none is shown)."""
        label = self._controls.power_label
        return label.toolTip() if not label.isHidden() else ""

    def power_shown(self) -> bool:
        return self._power.isVisible()

    def _update_power(self) -> None:
        measured = any(len(r.series["power"]) for r in self._curves.runs.values())
        self._power.show_measured(measured, self._memory, bool(self._curves.runs), self._x_mode)
        self._controls.show_power_note(self._power_text, bool(self._power_text) and not measured)

    # ---- state for tests and the window ------------------------------------------------------------------

    def series(self, run_id: str) -> dict[str, GrowingSeries]:
        """The run's buffers: "loss", "loss_smooth", "throughput", "memory", "memory_driver", "memory_process",
        "swap_used", "power" (x is the step)."""
        return dict(self._curves.runs[run_id].series)

    def curves(self, run_id: str) -> dict[str, pg.PlotDataItem]:
        """The run's plot items: the series keys plus "val" (for tests and image export)."""
        return dict(self._curves.runs[run_id].curves)

    def run_ids(self) -> list[str]:
        return list(self._curves.runs)

    def hint_visible(self) -> bool:
        return self._hint.isVisible()

    def timer_active(self) -> bool:
        return self.redraws.active()

    def is_empty(self) -> bool:
        return not self._curves.runs

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
        for plot in self._plots():
            plot.getAxis("left").setStyle(showValues=not empty)
        self._update_power()

    # ---- Qt events and the theme ----------------------------------------------------------------------

    def showEvent(self, event) -> None:
        super().showEvent(event)
        self.redraw()
        self.redraws.start()

    def hideEvent(self, event) -> None:
        self.redraws.stop()
        super().hideEvent(event)

    def closeEvent(self, event) -> None:
        self.redraws.stop()
        super().closeEvent(event)

    def changeEvent(self, event) -> None:
        if event.type() in (QEvent.Type.PaletteChange, QEvent.Type.ApplicationPaletteChange):
            self._apply_theme()
        super().changeEvent(event)

    def _apply_theme(self) -> None:
        """Background from the palette's Base, axes and labels from its Text, so dark mode just works."""
        theme.apply(self._view, self._curves.plots(), self._legend, self)
        for run in self._curves.runs.values():
            self._curves.style(run)
