"""The one-sentence banner above the plots: drop results, load errors, warnings. Never a modal dialog."""

from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QFrame, QHBoxLayout, QLabel, QPushButton, QToolButton


class Banner(QFrame):
    """One sentence shown inline above the plots (drop results, load errors); never a modal dialog."""

    def __init__(self, parent=None):
        super().__init__(parent)
        self.setObjectName("banner")
        self.setFrameShape(QFrame.StyledPanel)
        layout = QHBoxLayout(self)
        layout.setContentsMargins(10, 6, 6, 6)
        self.label = QLabel()
        self.label.setWordWrap(True)
        self.label.setTextInteractionFlags(Qt.TextSelectableByMouse)
        close = QToolButton()
        close.setText("✕")
        close.setAutoRaise(True)
        close.setToolTip("Dismiss")
        close.clicked.connect(self.hide)
        self.action = QPushButton()
        self.action.setAutoDefault(False)
        self.action.hide()
        self.action.clicked.connect(self._act)
        self._callback = None
        self.kind = ""
        layout.addWidget(self.label, 1)
        layout.addWidget(self.action)
        layout.addWidget(close)
        self.hide()

    def show_message(self, text: str, warning: bool = False, action: tuple[str, object] | None = None,
                     kind: str = "") -> None:
        """Show one sentence; `action` (button text, callback) adds the one thing to do about it; `kind` ("run":
        a run's failure) lets clear() take it away when it no longer applies."""
        self.kind = kind
        self.label.setText(text)
        self._callback = action[1] if action else None
        self.action.setText(action[0] if action else "")
        self.action.setVisible(action is not None)
        pal = self.palette()
        accent = "#c0392b" if warning else pal.highlight().color().name()
        self.setStyleSheet(f"#banner {{ border: 1px solid {accent}; border-radius: 6px; }}")
        self.show()

    def clear(self, kind: str) -> None:
        """Hide the banner if it shows a message of this kind (a run's failure, when the next run starts)."""
        if self.isVisible() and self.kind == kind:
            self.hide()

    def _act(self) -> None:
        callback, self._callback = self._callback, None
        self.hide()
        if callback is not None:
            callback()

    def text(self) -> str:
        return self.label.text() if self.isVisible() else ""
