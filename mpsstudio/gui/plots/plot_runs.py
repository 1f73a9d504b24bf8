"""What the live plots keep per run: its buffers (series.py), curves, colour, status, what changed since the last
redraw, the knots that map steps to training seconds for the time axis, and a step's tokens for the tokens axis."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
import pyqtgraph as pg
from PySide6.QtGui import QColor

from .series import GrowingSeries

# Okabe-Ito: distinguishable with the common colour-vision deficiencies. Black and the darkest blue are
# dropped or moved back on dark backgrounds, where they would vanish.
OKABE_ITO_LIGHT = ("#0072B2", "#E69F00", "#009E73", "#CC79A7", "#D55E00", "#56B4E9", "#F0E442")
OKABE_ITO_DARK = ("#56B4E9", "#E69F00", "#009E73", "#CC79A7", "#D55E00", "#F0E442", "#0072B2")
ENDED_BADLY = ("failed", "cancelled", "interrupted")
X_MODES = ("step", "time", "tokens")  # what the plots' x axis counts
MEMORY_LINES = ("memory_driver", "memory_process", "swap_used")  # the memory plot's lines beside the run's own
SERIES = ("loss", "loss_smooth", "throughput", "memory", *MEMORY_LINES, "power")


@dataclass
class PlotRun:
    """Everything drawn for one run: its buffers, curves and what changed since the last redraw."""

    run_id: str
    label: str
    colour: QColor
    warmup_steps: int
    series: dict[str, GrowingSeries] = field(default_factory=lambda: {key: GrowingSeries() for key in SERIES})
    val: GrowingSeries = field(default_factory=lambda: GrowingSeries(capacity=16))
    curves: dict[str, pg.PlotDataItem] = field(default_factory=dict)
    status: str = "running"
    dirty: set[str] = field(default_factory=set)
    # Training time at known steps, (step, seconds): warm-up, then the end of each measurement window; the time
    # axis interpolates between them. Validation and setup are not training time and are left out.
    knot_steps: list[float] = field(default_factory=lambda: [0.0])
    knot_seconds: list[float] = field(default_factory=lambda: [0.0])
    tokens_per_step: float | None = None  # the engine's (Started, RunSummary): a token model's real tokens a step

    def x_of(self, steps, mode: str):
        """Steps (a number or an array) as the x axis `mode` counts them: steps, training seconds, or tokens."""
        if mode == "time":
            return np.interp(steps, self.knot_steps, self.knot_seconds)
        if mode == "tokens":
            return np.asarray(steps, dtype=np.float64) * (self.tokens_per_step or math.nan)
        return steps

    def step_at(self, x: float, mode: str) -> float:
        """The step at `x` on the axis `mode` counts (x_of's inverse)."""
        if mode == "time":
            return float(np.interp(x, self.knot_seconds, self.knot_steps))
        if mode == "tokens":
            return x / self.tokens_per_step if self.tokens_per_step else math.nan
        return x

    def add_time(self, step: int, seconds: float | None) -> None:
        if seconds is None or not math.isfinite(seconds) or seconds < 0 or step <= self.knot_steps[-1]:
            return
        self.knot_steps.append(float(step))
        self.knot_seconds.append(self.knot_seconds[-1] + float(seconds))

    @property
    def legend_text(self) -> str:
        return self.label if self.status in ("running", "finished") else f"{self.label} — {self.status}"

    def colour_at(self, alpha: float) -> QColor:
        """The run's colour at `alpha`, faded further once the run failed or was cancelled."""
        c = QColor(self.colour)
        c.setAlphaF(alpha * (0.55 if self.status in ENDED_BADLY else 1.0))
        return c
