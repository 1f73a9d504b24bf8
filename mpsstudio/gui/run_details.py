"""The Details tab beside the comparison chart: the selected run's note, its per-epoch table, its loss curve
export, and (for labelled image datasets) its evaluation. Everything shown comes from the stored run."""

from __future__ import annotations

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import (QAbstractItemView, QHBoxLayout, QHeaderView, QLabel, QLineEdit, QPushButton,
                               QTableWidget, QTableWidgetItem, QVBoxLayout, QWidget)

from ..engine.formatting import fmt_duration, is_finite, local_time, plural, printable
from ..engine.results import RunResult
from .style import placeholder_label

EPOCH_HEADERS = ("Epoch", "Step", "Train time", "Val. loss", "Val. acc.")


class RunDetails(QWidget):
    """One run's details. `note_changed(run_id, text)` when the user edits the note; `export_steps(run_id)` when
    they ask for the loss curve as CSV."""

    note_changed = Signal(str, str)
    export_steps = Signal(str)

    def __init__(self, parent=None):
        super().__init__(parent)
        self.run: RunResult | None = None
        self.title = QLabel()
        self.title.setWordWrap(True)
        self.title.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.note = QLineEdit()
        self.note.setPlaceholderText("Add a note (what changed, why you ran it)…")
        self.note.setMaxLength(10_000)
        self.note.setClearButtonEnabled(True)
        self.note.editingFinished.connect(self._note_edited)
        self.steps_button = QPushButton("Export Loss Curve…")
        self.steps_button.setToolTip("Every step's loss, with its phase, training time and its window's "
                                     "throughput and memory, as CSV.")
        self.steps_button.clicked.connect(lambda: self.run is not None and self.export_steps.emit(self.run.id))
        self.epochs_label = QLabel()
        self.epochs_label.setWordWrap(True)
        self.epochs = QTableWidget(0, len(EPOCH_HEADERS))
        self.epochs.setHorizontalHeaderLabels(EPOCH_HEADERS)
        self.epochs.verticalHeader().hide()
        self.epochs.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
        self.epochs.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
        self.epochs.setAlternatingRowColors(True)
        self.epochs.setShowGrid(False)
        self.epochs.horizontalHeader().setSectionResizeMode(QHeaderView.ResizeMode.ResizeToContents)
        self.epochs.horizontalHeader().setStretchLastSection(True)
        self.empty = placeholder_label("<b>No run selected</b><br>Select a run in the table to see its epochs, "
                                       "its note and its evaluation.")

        note_row = QHBoxLayout()
        note_row.addWidget(self.note, 1)
        note_row.addWidget(self.steps_button)
        self.body = QWidget()
        body = QVBoxLayout(self.body)
        body.setContentsMargins(8, 8, 8, 8)
        body.setSpacing(6)
        body.addWidget(self.title)
        body.addLayout(note_row)
        body.addWidget(self.epochs_label)
        body.addWidget(self.epochs, 1)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addWidget(self.body)
        layout.addWidget(self.empty)
        self.show_run(None)

    def show_run(self, run: RunResult | None) -> None:
        """Show a whole run (steps, windows and epochs read), or the hint when None."""
        self.run = run
        self.body.setVisible(run is not None)
        self.empty.setVisible(run is None)
        if run is None:
            return
        cfg = run.config
        dt = local_time(run.created_at)
        when = f"{dt:%d %b %Y %H:%M}" if dt else run.created_at
        status = {"finished": "finished", "failed": "failed", "cancelled": "stopped before the end"}.get(
            run.status, run.status)
        self.title.setText(f"<b>{printable(cfg.device)} · {printable(cfg.model)} on {printable(cfg.dataset)} · "
                           f"batch {cfg.batch_size} · {cfg.precision}</b><br>{when} · {printable(run.machine)} · "
                           f"{status}" + (f"<br>{printable(run.error)}" if run.error else ""))
        self.note.blockSignals(True)
        self.note.setText(run.note)
        self.note.blockSignals(False)
        self.steps_button.setEnabled(bool(run.losses))
        self._fill_epochs(run)

    def _fill_epochs(self, run: RunResult) -> None:
        rows = [e for e in run.epochs if isinstance(e, dict)] if run.config.steps is None else []
        if run.config.steps is not None:
            self.epochs_label.setText(f"This run was measured in steps ({plural(run.config.steps, 'step')} after "
                                      "warm-up), not epochs, so it has no per-epoch table.")
        elif not rows:
            self.epochs_label.setText("No epoch finished before the run ended.")
        else:
            self.epochs_label.setText(f"{plural(len(rows), 'epoch')} of {run.config.epochs}: training time "
                                      "measured with the device synchronized, validation excluded.")
        self.epochs.setVisible(bool(rows))
        self.epochs.setRowCount(len(rows))
        best = _best_epoch(rows)
        for i, e in enumerate(rows):
            acc = e.get("val_accuracy")
            step = run.epoch_step(e)
            cells = (str(e.get("epoch", "")), f"{step:,}" if step is not None else "\u2014",
                     fmt_duration(e["seconds"]) if is_finite(e.get("seconds")) else "\u2014",
                     f"{e['val_loss']:.4g}" if is_finite(e.get("val_loss")) else "\u2014",
                     f"{100 * acc:.1f} %" if is_finite(acc) else "\u2014")
            for col, text in enumerate(cells):
                item = QTableWidgetItem(text)
                item.setTextAlignment(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
                if i == best:
                    font = item.font()
                    font.setBold(True)
                    item.setFont(font)
                    item.setToolTip("The best epoch by validation accuracy (or loss, where there is no accuracy).")
                self.epochs.setItem(i, col, item)

    def _note_edited(self) -> None:
        if self.run is not None and self.note.text() != self.run.note:
            self.run.note = self.note.text()
            self.note_changed.emit(self.run.id, self.note.text())

    def epoch_rows(self) -> list[list[str]]:
        """The table's text, row by row (for tests and reading back)."""
        return [[self.epochs.item(r, c).text() for c in range(self.epochs.columnCount())]
                for r in range(self.epochs.rowCount())]


def _best_epoch(rows: list[dict]) -> int | None:
    accs = [(e.get("val_accuracy"), i) for i, e in enumerate(rows) if is_finite(e.get("val_accuracy"))]
    if accs:
        return max(accs, key=lambda t: (t[0], -t[1]))[1]  # the first of equals
    losses = [(e.get("val_loss"), i) for i, e in enumerate(rows) if is_finite(e.get("val_loss"))]
    return min(losses)[1] if losses else None
