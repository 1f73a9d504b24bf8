"""Axes and the canvas of the live plots: step ticks with thousands separators, memory ticks in IEC bytes, and a
canvas that remembers how long its last paint took (the redraw budget reads it)."""

from __future__ import annotations

import math
import time

import pyqtgraph as pg


def number(v) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


def positive(v) -> bool:
    return number(v) and v > 0


class StepAxis(pg.AxisItem):
    """Tick labels with thousands separators (12,000 rather than 12000 or 1.2e+04)."""

    def tickStrings(self, values, scale, spacing):  # pyqtgraph API
        places = max(0, math.ceil(-math.log10(spacing * scale))) if spacing > 0 else 0
        return [f"{v * scale:,.{places}f}" for v in values]


class BytesAxis(pg.AxisItem):
    """Tick labels in IEC bytes (powers of 1024, as everywhere in MPS Studio) with one unit for the visible
    range, ticks at round numbers of that unit (256 MiB, 512 MiB, 768 MiB)."""

    _UNITS = ((1024.0**4, "TiB"), (1024.0**3, "GiB"), (1024.0**2, "MiB"), (1024.0, "KiB"), (1.0, "B"))

    def _factor(self, top: float) -> tuple[float, str]:
        return next(((f, u) for f, u in self._UNITS if top >= f), (1.0, "B"))

    def tickSpacing(self, minVal, maxVal, size):
        factor, _ = self._factor(max(abs(minVal), abs(maxVal)))
        spacings = super().tickSpacing(minVal / factor, maxVal / factor, size)
        return [(major * factor, offset * factor) for major, offset in spacings]

    def tickStrings(self, values, scale, spacing):
        top = max((abs(v) for v in values), default=0.0)
        factor, unit = self._factor(top)
        step = spacing / factor
        places = max(0, math.ceil(-math.log10(step))) if step > 0 else 0
        return [("0" if v == 0 else f"{v / factor:,.{places}f} {unit}") for v in values]


class TimedView(pg.GraphicsLayoutWidget):
    """The plot canvas, remembering how long its last paint took (drawing cost grows with the run)."""

    last_paint_s = 0.0

    def paintEvent(self, event) -> None:
        start = time.perf_counter()
        super().paintEvent(event)
        self.last_paint_s = time.perf_counter() - start
