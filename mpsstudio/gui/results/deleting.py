"""Deleting runs, and Undo."""

from __future__ import annotations

from PySide6.QtCore import QObject, QTimer, Signal
from PySide6.QtWidgets import QFrame, QHBoxLayout, QLabel, QMessageBox, QPushButton, QWidget

from ...engine.basics.errors import UserError
from ...engine.basics.formatting import plural
from ...engine.basics.results import RunResult
from ...engine.history.library import RunLibrary
from ..style import keys
from .selection import RunSelection

UNDO_S = 10  # seconds the Undo of a delete is offered
UNDO_UP_TO = 1000  # a delete of more runs asks first instead (Undo would hold them all in memory)


class UndoBar(QFrame):
    """"Deleted 3 runs. [Undo]" under the table for UNDO_S seconds after a delete."""

    undo = Signal()

    def __init__(self, parent=None):
        super().__init__(parent)
        self._runs: list[RunResult] = []
        self.label = QLabel()
        self.button = QPushButton("Undo")
        self.button.setToolTip(f"Put the deleted runs back ({keys('Ctrl+Z')})")
        self.button.clicked.connect(self.undo.emit)
        row = QHBoxLayout(self)
        row.setContentsMargins(8, 2, 2, 2)
        row.addWidget(self.label, 1)
        row.addWidget(self.button)
        self.timer = QTimer(self)
        self.timer.setSingleShot(True)
        self.timer.timeout.connect(self.take)
        self.hide()

    def offer(self, text: str, runs: list[RunResult]) -> None:
        self._runs = list(runs)
        self.label.setText(text)
        self.show()
        self.timer.start(UNDO_S * 1000)

    def can_undo(self) -> bool:
        return bool(self._runs)

    def take(self) -> list[RunResult]:
        """The runs to put back (once); hides the bar."""
        runs, self._runs = self._runs, []
        self.timer.stop()
        self.hide()
        return runs


class Deleter(QObject):
    """Delete with Undo: runs are kept whole for UNDO_S seconds (`bar` under the table, ⌘Z) and put back as they
    were; a delete of more than UNDO_UP_TO runs asks first. `message(sentence)`; `removed(ids)` and `restored(runs)`
    once the history has them gone or back."""

    message = Signal(str)
    removed = Signal(list)
    restored = Signal(list)

    def __init__(self, library: RunLibrary, selection: RunSelection, parent: QWidget) -> None:
        super().__init__(parent)
        self.library = library
        self._selection = selection
        self._parent = parent
        self.bar = UndoBar(parent)
        self.bar.undo.connect(self.undo)

    def undo(self) -> None:
        """Put back the runs of the last delete (within UNDO_S of it), whole, with their notes."""
        runs = self.bar.take()
        if not runs:
            return
        try:
            self.library.restore(runs)
        except UserError as exc:
            self.message.emit(str(exc))
            return
        self.restored.emit(runs)
        self.message.emit(f"Put back {plural(len(runs), 'run')}.")

    def delete_selected(self) -> None:
        """Remove the selected runs from the history and the table; asks nothing (the button asks)."""
        ids = self._selection.ids()
        if not ids:
            return
        kept: list[RunResult] = []
        if len(ids) <= UNDO_UP_TO:  # what Undo puts back
            whole = self.library.whole(self._selection.runs(ids))
            if whole.said:
                self.message.emit(whole.said)
            kept = whole.runs
        try:
            self.library.delete(ids)
        except UserError as exc:
            self.message.emit(str(exc))
            return
        self.removed.emit(ids)
        self.message.emit(f"Deleted {plural(len(ids), 'run')}.")
        if kept:
            self.bar.offer(f"Deleted {plural(len(ids), 'run')}.", kept)

    def delete_dialog(self) -> None:
        """Delete (button, menu, Delete/Backspace key): at once, with Undo for UNDO_S seconds (⌘Z); more than
        UNDO_UP_TO runs cannot be undone, so that asks first."""
        ids = self._selection.ids()
        if ids and (len(ids) <= UNDO_UP_TO or self.confirm_delete(len(ids))):
            self.delete_selected()

    def confirm_delete(self, count: int) -> bool:
        box = QMessageBox(self._parent)
        box.setIcon(QMessageBox.Icon.Warning)
        box.setText(f"Delete {plural(count, 'run')}?" if count > 1 else "Delete this run?")
        box.setInformativeText(f"More than {UNDO_UP_TO:,} runs cannot be put back with Undo; export them first "
                               "to keep a copy.")
        delete = box.addButton("Delete", QMessageBox.ButtonRole.DestructiveRole)
        box.addButton(QMessageBox.StandardButton.Cancel)
        box.setDefaultButton(QMessageBox.StandardButton.Cancel)
        box.exec()
        return box.clickedButton() is delete
