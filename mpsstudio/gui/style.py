"""Shared look of the window: system colours that read on light and dark backgrounds, placeholders."""

from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtGui import QColor, QKeySequence, QPalette
from PySide6.QtWidgets import (QAbstractItemView, QDialog, QFrame, QHBoxLayout, QLabel, QPushButton, QTableWidget,
                               QWidget)

TIMES = "\u00d7"

# Apple's system colours, readable on light and dark backgrounds alike: one per comparison group.
GROUP_COLORS = ("#0a84ff", "#ff9f0a", "#30d158", "#bf5af2", "#ff375f", "#40c8e0", "#5e5ce6", "#ac8e68")


def keys(sequence: str) -> str:
    """A shortcut as this platform writes it, the way the menus show it: "Ctrl+R" is ⌘R on a Mac, Ctrl+R elsewhere
    (Qt's Ctrl is the Command key on macOS). Every shortcut named in a text goes through here."""
    return QKeySequence(sequence).toString(QKeySequence.SequenceFormat.NativeText)


def warning_color(palette: QPalette) -> QColor:
    """A calm red that reads on the palette's base colour (Apple's system red, light or dark variant)."""
    dark = palette.color(QPalette.ColorRole.Base).lightness() < 128
    return QColor("#ff6961") if dark else QColor("#c4302b")


def device_color(device: str, palette: QPalette) -> QColor:
    """Bars: the accent colour for the Apple GPU, green for CUDA, the palette's grey for the CPU."""
    if device.startswith("mps"):
        return palette.color(QPalette.ColorRole.Highlight)
    if device.startswith("cuda"):
        return QColor("#34a853") if palette.color(QPalette.ColorRole.Base).lightness() >= 128 else QColor("#2e9e4c")
    grey = QColor(palette.color(QPalette.ColorRole.Text))
    grey.setAlphaF(0.45)
    return grey


def group_color(letter: str) -> QColor:
    """The colour of a comparison's badge, from its letter."""
    index = 0
    for ch in letter:
        index = index * 26 + (ord(ch) - 64)
    return QColor(GROUP_COLORS[(index - 1) % len(GROUP_COLORS)])


def placeholder_label(text: str) -> QLabel:
    """Grey centred text on the base colour, framed like the view it stands in for."""
    label = QLabel(text)
    label.setAlignment(Qt.AlignmentFlag.AlignCenter)
    label.setWordWrap(True)
    label.setFrameShape(QFrame.Shape.StyledPanel)
    label.setBackgroundRole(QPalette.ColorRole.Base)
    label.setAutoFillBackground(True)
    label.setForegroundRole(QPalette.ColorRole.PlaceholderText)
    return label


def labelled_row(text: str, field: QWidget) -> QWidget:
    """A row of its own: `text` before `field`, which takes the rest of the width."""
    row = QHBoxLayout()
    row.setContentsMargins(0, 0, 0, 0)
    row.addWidget(QLabel(text))
    row.addWidget(field, 1)
    widget = QWidget()
    widget.setLayout(row)
    return widget


def facts_table(headers, rows: int = 0) -> QTableWidget:
    """A read-only table of facts (the Details tab, the setup window, a folder's summary): no grid, alternating
    rows, no row numbers, whole rows selected."""
    table = QTableWidget(rows, len(headers))
    table.setHorizontalHeaderLabels(list(headers))
    table.verticalHeader().hide()
    table.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
    table.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
    table.setAlternatingRowColors(True)
    table.setShowGrid(False)
    return table


def close_row(dialog: QDialog, *left: QWidget) -> QHBoxLayout:
    """A dialog's bottom row: its own buttons on the left, Close (the default) on the right."""
    close = QPushButton("Close")
    close.setDefault(True)
    close.clicked.connect(dialog.close)
    row = QHBoxLayout()
    for widget in left:
        row.addWidget(widget)
    row.addStretch(1)
    row.addWidget(close)
    return row
