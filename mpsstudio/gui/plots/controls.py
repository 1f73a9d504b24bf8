"""The bar above the plots: what the x axis counts, the loss smoothing, the readout of the values under the pointer,
and the note saying why there is no power plot."""

from __future__ import annotations

from collections.abc import Callable

from PySide6.QtCore import Qt
from PySide6.QtGui import QStandardItemModel
from PySide6.QtWidgets import QComboBox, QHBoxLayout, QLabel, QSizePolicy, QSlider, QWidget
from ..style import keys
from .plot_runs import X_MODES


class PlotControls(QWidget):
    def __init__(self, parent: QWidget, alpha: float, on_axis: Callable[[str], None],
                 on_smoothing: Callable[[float], None]):
        super().__init__(parent)
        row = QHBoxLayout(self)
        row.setContentsMargins(8, 4, 8, 0)
        row.setSpacing(6)
        self.x_box = QComboBox(self)
        self.x_box.addItems(["Step", "Training time", "Tokens"])
        self.x_box.setToolTip("What the horizontal axis counts: steps (warm-up included), training seconds "
                              "(warm-up and measured windows, timed with the device synchronized; validation "
                              "excluded), or training tokens (a token model's: the real tokens of a step, padding "
                              "excluded, times the steps).")
        self.x_box.currentIndexChanged.connect(lambda i: on_axis(X_MODES[i]))
        self.smooth_slider = QSlider(Qt.Orientation.Horizontal, self)
        self.smooth_slider.setRange(0, 99)
        self.smooth_slider.setValue(round((1 - alpha) * 100))
        self.smooth_slider.setFixedWidth(120)
        self.smooth_slider.setToolTip("Smoothing of the solid loss line: an exponential moving average's weight "
                                      "of the past, 0 (none) to 0.99. The faint line is every step's loss.")
        self.smooth_slider.valueChanged.connect(lambda v: on_smoothing(v / 100))
        self.smooth_value = QLabel(f"{1 - alpha:.2f}", self)
        self.readout = QLabel("", self)
        self.readout.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.readout.setMinimumWidth(10)
        self.readout.setSizePolicy(QSizePolicy.Policy.Ignored, QSizePolicy.Policy.Preferred)
        x_label, smooth_label = QLabel("X axis:", self), QLabel("Smoothing:", self)
        x_label.setBuddy(self.x_box)
        smooth_label.setBuddy(self.smooth_slider)
        for w in (x_label, self.x_box, smooth_label, self.smooth_slider, self.smooth_value):
            row.addWidget(w)
        row.addSpacing(12)
        row.addWidget(self.readout, 1)
        self.power_label = QLabel("", self)
        self.power_label.setEnabled(False)  # secondary text
        self.power_label.hide()
        row.addWidget(self.power_label)

    def allow_tokens(self, allowed: bool) -> None:
        """The tokens axis is offered only while every run drawn is a token model's."""
        model = self.x_box.model()
        assert isinstance(model, QStandardItemModel)  # a QComboBox's own model
        item = model.item(X_MODES.index("tokens"))
        item.setEnabled(allowed)
        item.setToolTip("" if allowed else "Tokens: only when every run shown trains a token model.")

    def show_smoothing(self, weight: float) -> None:
        self.smooth_slider.blockSignals(True)
        self.smooth_slider.setValue(round(weight * 100))
        self.smooth_slider.blockSignals(False)
        self.smooth_value.setText(f"{weight:.2f}")

    def show_power_note(self, text: str, visible: bool) -> None:
        self.power_label.setVisible(visible)
        self.power_label.setToolTip(text)
        fm = self.power_label.fontMetrics()
        self.power_label.setText(fm.elidedText(text, Qt.TextElideMode.ElideRight, 520))


def empty_label() -> QLabel:
    """What the plots say before any run: one line, so the table below gets the room."""
    shortcut = keys("Ctrl+R")
    label = QLabel(f"Press Run ({shortcut}) to start, or select runs below to see their curves: loss, throughput, "
                   "memory and power.")
    label.setAlignment(Qt.AlignmentFlag.AlignCenter)
    label.setEnabled(False)  # the secondary text colour
    label.setWordWrap(True)
    return label
