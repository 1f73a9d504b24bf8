"""The live plots (live.py: loss, throughput, memory and power, each its own class in panes.py): the runs drawn on
them (curves.py; one run's buffers, curves and colours in runs.py, its growing numpy buffers in series.py), when
they redraw (redraw.py), axes, controls, colours from the palette (theme.py), and stored runs replayed through the
same calls (stored.py)."""

from .live import EMA_ALPHA, LivePlots
from .redraw import BUSY_REDRAW_INTERVAL_MS, REDRAW_INTERVAL_MS, REFRESH_CHOICES, interval_for
from .series import GrowingSeries

__all__ = ["BUSY_REDRAW_INTERVAL_MS", "EMA_ALPHA", "REDRAW_INTERVAL_MS", "REFRESH_CHOICES", "GrowingSeries",
           "LivePlots", "interval_for"]
