"""The sidebar's footer: the summary line, the guard under it and the Run button.

The guard is what would make this setup fail or measure too little (the engine's run.guards, found by
rules.first_guard), with a button that applies the fix. A guard that the run would refuse keeps Run off, saying why.
While a run is in progress the Run button reads Stop."""

from __future__ import annotations

import sys

from PySide6.QtCore import QObject, Qt, Signal
from PySide6.QtGui import QFont, QKeySequence, QPalette
from PySide6.QtWidgets import QHBoxLayout, QLabel, QPushButton, QVBoxLayout, QWidget

from . import rules
from ..style import keys

NO_DEVICE_TIP = "Check at least one device to run on."
RUN_TIP = f"Run the setup on the checked devices, one after another ({keys('Ctrl+R')})."
SUMMARY_TIP = ("What one run of this setup trains on and the model's size. MACs: multiply-adds of one sample's forward "
               "pass (matrix products and convolutions), counted by PyTorch's FlopCounterMode, not measured; a "
               "training step is about three times that.")


class GuardRow(QObject):
    """The first guard of the form's setup, shown with its fix; `fix_requested(fix)` when its button is pressed."""

    fix_requested = Signal(dict)

    def __init__(self, layout: QVBoxLayout, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self.box = QWidget()
        row = QHBoxLayout(self.box)
        row.setContentsMargins(0, 0, 0, 0)
        row.setSpacing(8)
        self.label = QLabel()
        self.label.setWordWrap(True)
        self.label.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.button = QPushButton()
        self.button.clicked.connect(self._clicked)
        row.addWidget(self.label, 1)
        row.addWidget(self.button, 0, Qt.AlignmentFlag.AlignTop)
        self.box.setVisible(False)
        layout.addWidget(self.box)
        self._fix: dict = {}

    def show(self, found) -> None:
        """The engine's guard (run.guards.Guard), or None: the row hidden."""
        self.box.setVisible(found is not None)
        self._fix = dict(found.fix) if found is not None else {}
        if found is not None:
            self.label.setText(("⚠︎ " if found.blocking else "") + found.sentence)
            self.button.setText(found.button)
            self.button.setToolTip(f"Set {', '.join(f'{k.replace(chr(95), chr(32))} to {v:,}' for k, v in found.fix.items())}.")

    def _clicked(self) -> None:
        if self._fix:
            self.fix_requested.emit(dict(self._fix))


class RunFooter(QObject):
    """The summary, the guard and Run: `run_requested`, or `stop_requested` while a run is in progress (Stop, once:
    the button says Stopping… until the run ends); `fix_requested(fix)` from the guard's button."""

    run_requested = Signal()
    stop_requested = Signal()

    def __init__(self, layout: QVBoxLayout, parent: QWidget) -> None:
        super().__init__(parent)
        self._parent = parent
        self.running = False
        self.stopping = False
        self.summary = QLabel(rules.LOADING_TEXT)
        self.summary.setWordWrap(True)
        self.summary.setForegroundRole(QPalette.ColorRole.PlaceholderText)
        self.summary.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.summary.setToolTip(SUMMARY_TIP)
        layout.addWidget(self.summary)
        self.guard_row = GuardRow(layout, self)
        self.fix_requested = self.guard_row.fix_requested
        self.run_button = QPushButton("Run on CPU")
        self.run_button.setDefault(True)
        self.run_button.setToolTip(RUN_TIP)
        self.run_button.clicked.connect(self._clicked)
        self.restyle()
        layout.addWidget(self.run_button)

    def set_running(self, running: bool) -> None:
        self.running = running
        self.stopping = False

    def show_running(self) -> None:
        """Stop (⌘.), or Stopping… once asked."""
        self.run_button.setText("Stopping…" if self.stopping else "Stop")
        self.run_button.setEnabled(not self.stopping)
        self.run_button.setToolTip("Stop at the end of the current measurement window; what was measured is kept "
                                   f"({QKeySequence('Ctrl+.').toString(QKeySequence.SequenceFormat.NativeText)}).")

    def show_ready(self, words: str, loaded: bool, checked: bool, problem: str) -> None:
        """Run's words (rules.run_words); off, saying why, before the catalogue, with no device checked or with a
        `problem` (a sentence)."""
        self.run_button.setText(words)
        self.run_button.setEnabled(loaded and checked and not problem)
        self.run_button.setToolTip(rules.LOADING_TEXT if not loaded else NO_DEVICE_TIP if not checked else
                                   problem or RUN_TIP)

    def _clicked(self) -> None:
        if not self.running:
            self.run_requested.emit()
        elif not self.stopping:
            self.stop_requested.emit()

    def restyle(self) -> None:
        """The accent-coloured main button, in the palette's colours (again after a light/dark switch); macOS draws
        a default button in the accent colour by itself."""
        if sys.platform == "darwin":
            return  # a taller or recoloured push button turns into a bevel button in the macOS style
        button = self.run_button
        button.setMinimumHeight(34)
        font = QFont(button.font())
        font.setBold(True)
        button.setFont(font)
        palette = QPalette(self._parent.palette())
        for group in (QPalette.ColorGroup.Active, QPalette.ColorGroup.Inactive):
            palette.setColor(group, QPalette.ColorRole.Button, palette.color(group, QPalette.ColorRole.Highlight))
            palette.setColor(group, QPalette.ColorRole.ButtonText,
                             palette.color(group, QPalette.ColorRole.HighlightedText))
        button.setPalette(palette)
