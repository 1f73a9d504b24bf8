"""The runs drawn on the four plots: their buffers (series.py), curves, colours and legend entries, what changed
since the last redraw, and the values under the pointer. LivePlots (live.py) owns the widgets and the timer."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

import numpy as np
import pyqtgraph as pg
from PySide6.QtGui import QColor

from .panes import LossPlot, WindowPlot
from .plot_runs import ENDED_BADLY, MEMORY_LINES, PlotRun
from .series import GrowingSeries, ema


def _fmt(v: float) -> str:
    return f"{v:.4g}" if math.isfinite(v) else "NaN"


class RunCurves:
    """`colours()` gives the palette for the current theme, `base()` the background colour, `text()` and
    `secondary()` the text colours (all read when used: the theme can change)."""

    def __init__(self, loss: LossPlot, window_plots: dict[str, WindowPlot], colours: Callable[[], Sequence[str]],
                 base: Callable[[], QColor], text: Callable[[], QColor], secondary: Callable[[], QColor]):
        self.loss, self.window_plots = loss, window_plots
        self.colours, self.base, self.text, self.secondary = colours, base, text, secondary
        self.runs: dict[str, PlotRun] = {}
        self.count = 0  # runs started since the last clear: the next colour
        self.alpha = 0.05  # weight of the newest loss in the smoothed line (LivePlots sets it)

    def plots(self) -> tuple:
        return (self.loss, *self.window_plots.values())

    def start(self, run_id: str, label: str, warmup_steps: int, tokens_per_step: float | None = None) -> None:
        if run_id in self.runs:
            self.remove(self.runs.pop(run_id))
        colours = self.colours()
        tokens = tokens_per_step if isinstance(tokens_per_step, (int, float)) and tokens_per_step > 0 else None
        run = PlotRun(run_id=run_id, label=label, colour=QColor(colours[self.count % len(colours)]),
                      warmup_steps=int(warmup_steps), tokens_per_step=tokens)
        self.count += 1
        for plot in self.plots():
            run.curves.update(plot.make_curves(run))
        self.style(run)
        self.runs[run_id] = run
        self.loss.rebuild_legend(self.runs.values())

    def add_warmup(self, run_id: str, losses: Sequence[float], seconds: float | None) -> None:
        run = self.runs.get(run_id)
        if run is None:
            return
        self.append_losses(run_id, 1, losses)
        run.add_time(len(losses), seconds)
        if len(losses):
            self.loss.shade_warmup(len(losses), self.text(), self.secondary())

    def add_window(self, run_id: str, first_step: int, losses: Sequence[float], samples_per_s: float, memory: int,
                   power_w: float | None, seconds: float | None, lines: dict | None = None) -> bool:
        """True when this window brought a power reading. `lines`: the memory plot's other lines (bytes or None)."""
        run = self.runs.get(run_id)
        if run is None:
            return False
        self.append_losses(run_id, first_step, losses)
        last_step = first_step + max(len(losses), 1) - 1
        run.add_time(last_step, seconds)
        run.series["throughput"].append(last_step, samples_per_s)
        run.series["memory"].append(last_step, memory)
        run.dirty.update(("throughput", "memory"))
        for key, value in (lines or {}).items():
            if key in MEMORY_LINES and isinstance(value, (int, float)) and math.isfinite(value):
                run.series[key].append(last_step, value)
                run.dirty.add(key)
        if power_w is not None and math.isfinite(power_w):
            run.series["power"].append(last_step, power_w)
            run.dirty.add("power")
            return True
        return False

    def append_losses(self, run_id: str, first_step: int, losses: Sequence[float]) -> None:
        run = self.runs.get(run_id)
        if run is None or not len(losses):
            return
        values = np.asarray(losses, dtype=np.float64)
        steps = np.arange(first_step, first_step + len(values), dtype=np.float64)
        run.series["loss"].append(steps, values)
        run.series["loss_smooth"].append(steps, ema(values, run.series["loss_smooth"].last_y(), self.alpha))
        run.dirty.update(("loss", "loss_smooth"))

    def add_epoch(self, run_id: str, step: int, val_loss: float | None) -> None:
        run = self.runs.get(run_id)
        if run is None or val_loss is None:
            return
        run.val.append(step, val_loss)
        run.dirty.add("val")
        if self.loss.val_proxy is None:
            self.loss.val_proxy = pg.PlotDataItem(symbol="d", symbolSize=8, symbolBrush=self.secondary(),
                                                  symbolPen=None, pen=None)
            self.loss.rebuild_legend(self.runs.values())

    def finish(self, run_id: str, status: str) -> None:
        run = self.runs.get(run_id)
        if run is None:
            return
        run.status = status
        if status in ENDED_BADLY:
            self.style(run)
            self.loss.rebuild_legend(self.runs.values())

    def tokens_for_all(self) -> bool:
        """Every run drawn says its tokens a step (the tokens axis can place them all)."""
        return all(run.tokens_per_step for run in self.runs.values())

    def clear(self) -> None:
        for run in self.runs.values():
            self.remove(run)
        self.runs.clear()
        self.loss.clear_regions()
        self.loss.val_proxy = None
        self.count = 0

    def remove(self, run: PlotRun) -> None:
        for plot in self.plots():
            plot.remove(run.curves)
        run.curves.clear()

    def style(self, run: PlotRun) -> None:
        """Pens and fills from the run's colour; dashed and faded once the run failed or was cancelled."""
        for plot in self.plots():
            plot.style(run, run.curves, self.base())

    def legend_clicked(self, item: pg.PlotDataItem) -> None:
        """Clicking a run in the legend hides or shows all of its curves, not only the smoothed loss."""
        hidden: set = getattr(self.window_plots.get("memory"), "hidden", set())  # line kinds the memory legend hid
        visible = item.isVisible()
        for run in self.runs.values():
            if run.curves.get("loss_smooth") is item:
                for key, curve in run.curves.items():
                    curve.setVisible(visible and key not in hidden)

    def smooth(self, alpha: float) -> None:
        """Recompute every run's smoothed loss with the newest loss weighted `alpha`."""
        self.alpha = alpha
        for run in self.runs.values():
            loss = run.series["loss"]
            smoothed = GrowingSeries(max(1024, len(loss)))
            smoothed.append(loss.x, ema(loss.y, None, alpha))
            run.series["loss_smooth"] = smoothed
            run.dirty.add("loss_smooth")

    def redraw(self, x_mode: str) -> None:
        """Push new data to the curves that changed since the last redraw."""
        for run in self.runs.values():
            for key in run.dirty:
                source = run.val if key == "val" else run.series[key]
                curve = run.curves[key]
                if key in self.window_plots:
                    WindowPlot.dots(curve, len(source))
                curve.setData(run.x_of(source.x, x_mode), source.y, connect="finite")
            run.dirty.clear()

    def readout(self, x: float, x_mode: str) -> str:
        """At `x` (a step, training seconds or tokens): each visible run's loss, smoothed loss and the throughput of
        the window holding that step."""
        parts = []
        for run in self.runs.values():
            loss = run.series["loss"]
            if not run.curves.get("loss_smooth") or not run.curves["loss_smooth"].isVisible() or not len(loss):
                continue
            step = run.step_at(x, x_mode)
            if not math.isfinite(step):
                continue
            i = int(np.clip(np.searchsorted(loss.x, step), 0, len(loss) - 1))
            if i > 0 and abs(loss.x[i - 1] - step) < abs(loss.x[i] - step):
                i -= 1
            text = f"{run.label}: step {int(loss.x[i]):,} loss {_fmt(loss.y[i])}"
            if x_mode == "tokens":
                text += f" at {loss.x[i] * run.tokens_per_step:,.0f} tokens"
            smooth = run.series["loss_smooth"]
            if i < len(smooth):
                text += f" (smoothed {_fmt(smooth.y[i])})"
            rate = run.series["throughput"]
            j = int(np.searchsorted(rate.x, loss.x[i])) if len(rate) else 0
            if j < len(rate) and math.isfinite(rate.y[j]):
                text += f", {rate.y[j]:,.0f} samples/s (its window)"
            parts.append(text)
        return "   ".join(parts)

    def hover(self, pos, x_mode: str) -> str:
        """The hover lines at the pointer `pos` (scene coordinates) and the readout there ("" outside the plots)."""
        inside = next((p for p in self.plots() if p.sceneBoundingRect().contains(pos)), None)
        shown = inside is not None and bool(self.runs)
        for plot in self.plots():
            plot.hover_line.setVisible(shown)
        if inside is None or not shown:
            return ""
        x = inside.getViewBox().mapSceneToView(pos).x()
        for plot in self.plots():
            plot.hover_line.setPos(x)
        return self.readout(x, x_mode)
