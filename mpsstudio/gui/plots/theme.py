"""The live plots follow the system's light or dark appearance: the background from the palette's Base, axes, titles
and labels from its Text, the legend over a translucent Base."""

from __future__ import annotations

import pyqtgraph as pg
from PySide6.QtGui import QColor, QFont, QPalette
from PySide6.QtWidgets import QWidget


def text(widget: QWidget) -> QColor:
    return QColor(widget.palette().color(QPalette.ColorRole.Text))


def secondary(widget: QWidget) -> QColor:
    c = text(widget)
    c.setAlphaF(0.6)
    return c


def is_dark(widget: QWidget) -> bool:
    return widget.palette().color(QPalette.ColorRole.Base).lightnessF() < 0.5


def small_pt(widget: QWidget) -> str:
    return f"{max(9.0, widget.font().pointSizeF() - 1):g}pt"


def apply(view: pg.GraphicsLayoutWidget, plots, legend, widget: QWidget) -> None:
    """Colours and fonts from `widget`'s palette and font on the canvas, every plot and the legend."""
    base = widget.palette().color(QPalette.ColorRole.Base)
    view.setBackground(base)
    axis_pen = text(widget)
    axis_pen.setAlphaF(0.35)
    tick_font = QFont(widget.font())
    tick_font.setPointSizeF(max(8.0, widget.font().pointSizeF() - 2))
    title_pt = f"{max(9.0, widget.font().pointSizeF()):g}pt"
    for plot in plots:
        plot.theme(axis_pen, secondary(widget), text(widget), tick_font, title_pt)
    legend_bg, legend_edge = QColor(base), text(widget)
    legend_bg.setAlphaF(0.85)
    legend_edge.setAlphaF(0.15)
    legend.setBrush(pg.mkBrush(legend_bg))
    legend.setPen(pg.mkPen(legend_edge))
    legend.setLabelTextColor(text(widget))
