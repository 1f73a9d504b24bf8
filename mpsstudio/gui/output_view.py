"""The Output tab: what the runs' processes write (a script's own log, a model file's prints), as it comes, and the
sentences a run in progress says that are not measurements (a script whose steps are not counted yet). Kept to
its newest lines: the whole output of each run stays in its output log (the run's Details name it)."""

from __future__ import annotations

from PySide6.QtGui import QFontDatabase, QTextCursor
from PySide6.QtWidgets import QLabel, QPlainTextEdit, QVBoxLayout, QWidget

from ..engine.basics.formatting import printable

MAX_LINES = 5000


class OutputView(QWidget):
    """The runs' output since the last Run; `add(device, text)`, `say(device, sentence)`, `clear()`."""

    def __init__(self, parent=None):
        super().__init__(parent)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(8, 6, 8, 6)
        self.hint = QLabel("What your script (or model file) prints shows here while it runs; each run's whole output "
                           "is kept in its output log (Details names it).")
        self.hint.setWordWrap(True)
        self.text = QPlainTextEdit()
        self.text.setReadOnly(True)
        self.text.setMaximumBlockCount(MAX_LINES)
        self.text.setFont(QFontDatabase.systemFont(QFontDatabase.SystemFont.FixedFont))
        self.text.setPlaceholderText("No output yet.")
        layout.addWidget(self.hint)
        layout.addWidget(self.text, 1)
        self._device = ""

    def clear(self) -> None:
        self.text.clear()
        self._device = ""

    def _heading(self, device: str) -> None:
        if device and device != self._device:
            self._device = device
            self._append(f"── {printable(device)} ──")

    def add(self, device: str, text: str) -> None:
        """Lines a run's process wrote (printable: no escape sequence reaches the view)."""
        self._heading(device)
        lines = [printable(line.rstrip("\r")) for line in text.splitlines()]
        if lines:
            self._append("\n".join(lines[-MAX_LINES:]))

    def say(self, device: str, sentence: str) -> None:
        """A sentence of MPS Studio's about the run in progress, marked as such."""
        self._heading(device)
        self._append(f"▶ MPS Studio: {printable(sentence)}")

    def _append(self, text: str) -> None:
        bar = self.text.verticalScrollBar()
        at_end = bar.value() >= bar.maximum() - 2
        self.text.appendPlainText(text)
        if at_end:  # following the newest lines, unless the user scrolled up to read
            self.text.moveCursor(QTextCursor.MoveOperation.End)
            bar.setValue(bar.maximum())
