"""Small widgets of the setup sidebar: the learning-rate field, section headings, one row per device, and the form
rows every section makes (FormRows: their labels share one width, so fields line up)."""

from __future__ import annotations

import re

from PySide6.QtCore import Qt, Signal
from PySide6.QtGui import QFont, QPalette, QValidator
from PySide6.QtWidgets import (
    QAbstractSpinBox, QCheckBox, QComboBox, QDoubleSpinBox, QFormLayout, QHBoxLayout, QLabel, QSizePolicy, QSpinBox,
    QVBoxLayout, QWidget,
)

from ...engine.basics.formatting import fmt_bytes
from ...engine.machine.probe import NOT_WORKING


def _clean_chip_name(name: str) -> str:
    """'Intel(R) Xeon(R) Processor' -> 'Intel Xeon Processor'."""
    return " ".join(re.sub(r"\((R|TM|C)\)", "", name, flags=re.I).split())


def device_title(device) -> str:
    """Short name of a device: 'CPU', 'Apple GPU (MPS)', 'CUDA 0'."""
    if device.kind == "mps":
        return "Apple GPU (MPS)"
    if device.kind == "cuda":
        _, _, index = device.id.partition(":")
        return f"CUDA {index}" if index else "CUDA"
    return device.id.upper()


def device_label(device, limit: int = 38) -> str:
    """The checkbox text: 'CPU — Intel Xeon', 'CUDA 0 — NVIDIA H100' (cut short in the narrow sidebar)."""
    name = _clean_chip_name(device.name or "")
    text = f"{device_title(device)} — {name}" if name else device_title(device)
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"


def run_target(device) -> str:
    return "Apple GPU" if device.kind == "mps" else device_title(device)


class LearningRateBox(QDoubleSpinBox):
    """A learning-rate field that shows 0.01 rather than 0.01000 and steps 0.01 → 0.02 → 0.05 → 0.1."""

    _MANTISSAS = (1.0, 2.0, 5.0)

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setDecimals(5)
        self.setRange(0.00001, 10.0)
        self.setCorrectionMode(QAbstractSpinBox.CorrectionMode.CorrectToNearestValue)

    def textFromValue(self, value: float) -> str:  # Qt override
        return f"{value:.5f}".rstrip("0").rstrip(".")

    def valueFromText(self, text: str) -> float:
        try:
            return float(text.replace(",", "."))
        except ValueError:
            return self.value()

    def validate(self, text: str, pos: int):
        try:
            value = float(text.replace(",", "."))
        except ValueError:
            ok = re.fullmatch(r"[0-9.,eE+-]*", text) is not None
            return (QValidator.State.Intermediate if ok else QValidator.State.Invalid), text, pos
        inside = self.minimum() <= value <= self.maximum()
        return (QValidator.State.Acceptable if inside else QValidator.State.Intermediate), text, pos

    def stepBy(self, steps: int) -> None:
        ladder = sorted({m * 10.0 ** e for e in range(-5, 2) for m in self._MANTISSAS})
        ladder = [v for v in ladder if self.minimum() <= v <= self.maximum()]
        value = self.value()
        if steps > 0:
            above = [v for v in ladder if v > value * (1 + 1e-9)]
            index = ladder.index(above[0]) + steps - 1 if above else len(ladder) - 1
        else:
            below = [v for v in ladder if v < value * (1 - 1e-9)]
            index = ladder.index(below[-1]) + steps + 1 if below else 0
        self.setValue(ladder[max(0, min(len(ladder) - 1, index))])


class SectionHeading(QLabel):
    """A small bold heading in the secondary text colour, like a Mac sidebar's group titles."""

    def __init__(self, text: str, parent: QWidget | None = None) -> None:
        super().__init__(text, parent)
        font = QFont(self.font())
        font.setBold(True)
        font.setPointSizeF(max(8.0, font.pointSizeF() - 1))
        self.setFont(font)
        self.setForegroundRole(QPalette.ColorRole.PlaceholderText)


class DeviceRow(QWidget):
    """One device's checkbox; an unavailable device is disabled, says why in its tooltip, and is marked."""

    toggled = Signal(bool)

    def __init__(self, device, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.device = device
        self.checkbox = QCheckBox(device_label(device))
        self.checkbox.toggled.connect(self.toggled)
        layout = QHBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.setSpacing(6)
        layout.addWidget(self.checkbox)
        full = device_label(device, limit=10_000)
        if device.available:
            tip = full
            if device.kind == "cpu" and device.threads:
                tip += f"\n{device.threads} threads"
            if device.memory_total:
                tip += f"\n{fmt_bytes(device.memory_total)} memory"
            self.checkbox.setToolTip(tip)
        else:
            self.checkbox.setEnabled(False)
            self.checkbox.setToolTip(device.reason)
            note = QLabel("(not working)" if device.reason.startswith(NOT_WORKING) else "(not available)")
            note.setForegroundRole(QPalette.ColorRole.PlaceholderText)
            note.setToolTip(device.reason)
            layout.addWidget(note)
        layout.addStretch(1)

    @property
    def checked(self) -> bool:
        return self.device.available and self.checkbox.isChecked()


class FormRows:
    """The sections' form layouts: every row's label shares one width with every other form's labels (align() once
    all are made), so the sidebar's fields line up."""

    def __init__(self) -> None:
        self._labels: list[QLabel] = []

    @staticmethod
    def new_form() -> QFormLayout:
        form = QFormLayout()
        form.setContentsMargins(0, 2, 0, 0)
        form.setHorizontalSpacing(10)
        form.setVerticalSpacing(6)
        form.setLabelAlignment(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
        form.setFieldGrowthPolicy(QFormLayout.FieldGrowthPolicy.AllNonFixedFieldsGrow)
        form.setRowWrapPolicy(QFormLayout.RowWrapPolicy.DontWrapRows)
        return form

    def row(self, form: QFormLayout, text: str, field) -> None:
        label = QLabel(text)
        self._labels.append(label)
        form.addRow(label, field)

    def align(self) -> None:
        width = max(label.sizeHint().width() for label in self._labels)
        for label in self._labels:
            label.setMinimumWidth(width)
            label.setAlignment(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)


def spin(low: int, high: int, value: int, tip: str) -> QSpinBox:
    """A right-aligned integer field with thousands separators."""
    box = QSpinBox()
    box.setRange(low, high)
    box.setValue(value)
    box.setGroupSeparatorShown(True)
    box.setAccelerated(True)
    box.setToolTip(tip)
    box.setAlignment(Qt.AlignmentFlag.AlignRight)
    return box


def narrow(combo: QComboBox) -> QComboBox:
    """Long entries (folder names, chip names) must not widen the sidebar."""
    combo.setSizeAdjustPolicy(QComboBox.SizeAdjustPolicy.AdjustToMinimumContentsLengthWithIcon)
    combo.setMinimumContentsLength(8)
    combo.setSizePolicy(QSizePolicy.Policy.Expanding, QSizePolicy.Policy.Fixed)
    return combo


def section(layout: QVBoxLayout, title: str, first: bool = False) -> None:
    """A section's heading, spaced from the one before."""
    if not first:
        layout.addSpacing(10)
    layout.addWidget(SectionHeading(title))
