"""The guard under the summary: what would make this setup fail or measure too little (the engine's run.guards,
found by rules.first_guard), with a button that applies the fix. A guard that the run would refuse keeps Run off,
saying why."""

from __future__ import annotations

from PySide6.QtCore import QObject, Qt, Signal
from PySide6.QtWidgets import QHBoxLayout, QLabel, QPushButton, QVBoxLayout, QWidget


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
