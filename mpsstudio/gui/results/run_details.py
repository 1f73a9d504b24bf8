"""The Details tab beside the comparison chart: the selected run's note, its per-epoch table, its loss curve
export, and (for labelled image datasets) its evaluation. Everything shown comes from the stored run."""

from __future__ import annotations

from html import escape

from PySide6.QtCore import Qt, Signal
from PySide6.QtGui import QColor, QPalette
from PySide6.QtWidgets import (QAbstractItemView, QFrame, QHBoxLayout, QHeaderView, QLabel, QLineEdit, QPushButton,
                               QScrollArea, QTableWidget, QTableWidgetItem, QVBoxLayout, QWidget)

from ...engine.analysis import evaluation
from ...engine.run.script.words import script_lines
from ...engine.basics.config import precision_note
from ...engine.basics.formatting import fmt_duration, is_finite, local_time, plural, printable
from ...engine.basics.results import EpochRow, RunResult
from ..style import facts_table, placeholder_label

EPOCH_HEADERS = ("Epoch", "Step", "Train time", "Val. loss", "Val. acc.")
CLASS_HEADERS = ("Class", "Samples", "Correct", "Accuracy", "Most confused with")


class RunDetails(QWidget):
    """One run's details. `note_changed(run_id, text)` when the user edits the note; `export_steps(run_id)` when
    they ask for the loss curve as CSV."""

    note_changed = Signal(str, str)
    export_steps = Signal(str)
    save_model = Signal(str)

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
        self.epochs = facts_table(EPOCH_HEADERS)
        self.epochs.horizontalHeader().setSectionResizeMode(QHeaderView.ResizeMode.ResizeToContents)
        self.epochs.horizontalHeader().setStretchLastSection(True)
        self.empty = placeholder_label("<b>No run selected</b><br>Select a run in the table to see its epochs, "
                                       "its note and its evaluation.")

        self.save_button = QPushButton("Save Trained Model…")
        self.save_button.setToolTip("The trained weights (a state_dict: torch.load(..., weights_only=True)) and a "
                                    "JSON of what rebuilding the model needs: name, input, classes, normalisation.")
        self.save_button.clicked.connect(lambda: self.run is not None and self.save_model.emit(self.run.id))
        self.eval_label = QLabel()
        self.eval_label.setWordWrap(True)
        self.classes = facts_table(CLASS_HEADERS)
        self.matrix = QTableWidget(0, 0)
        self.matrix.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
        self.matrix.setShowGrid(False)
        self.classes.horizontalHeader().setSectionResizeMode(QHeaderView.ResizeMode.ResizeToContents)
        self.matrix.horizontalHeader().setSectionResizeMode(QHeaderView.ResizeMode.Fixed)  # square-ish cells
        self.matrix.verticalHeader().setSectionResizeMode(QHeaderView.ResizeMode.ResizeToContents)
        self.matrix.setToolTip("Confusion matrix: rows are the true class, columns the predicted one; the "
                               "darker a cell, the more of that row's samples it holds.")
        note_row = QHBoxLayout()
        note_row.addWidget(self.note, 1)
        note_row.addWidget(self.steps_button)
        note_row.addWidget(self.save_button)
        self.body = QWidget()
        body = QHBoxLayout(self.body)  # the run and its epochs | its evaluation
        body.setContentsMargins(8, 8, 8, 8)
        body.setSpacing(16)
        left = QVBoxLayout()
        left.setSpacing(6)
        left.addWidget(self.title)
        left.addLayout(note_row)
        left.addWidget(self.epochs_label)
        left.addWidget(self.epochs, 1)
        right = QVBoxLayout()
        right.setSpacing(6)
        right.addWidget(self.eval_label)
        right.addWidget(self.classes, 2)
        right.addWidget(self.matrix, 3)
        body.addLayout(left, 1)
        body.addLayout(right, 1)
        scroll = QScrollArea()  # the evaluation of 100 classes is taller than any window
        scroll.setWidgetResizable(True)
        scroll.setFrameShape(QFrame.Shape.NoFrame)
        scroll.setWidget(self.body)
        self.scroll_area = scroll
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addWidget(scroll)
        layout.addWidget(self.empty)
        self.show_run(None)

    def show_run(self, run: RunResult | None) -> None:
        """Show a whole run (steps, windows and epochs read), or the hint when None."""
        self.run = run
        self.scroll_area.setVisible(run is not None)
        self.body.setVisible(run is not None)
        self.empty.setVisible(run is None)
        if run is None:
            return
        cfg = run.config
        dt = local_time(run.created_at)
        when = f"{dt:%d %b %Y %H:%M}" if dt else run.created_at
        status = {"finished": "finished", "failed": "failed", "cancelled": "stopped before the end",
                  "interrupted": "interrupted (MPS Studio ended during the run)"}.get(
            run.status, run.status)
        s = run.summary
        lines = [f"<b>{escape(printable(cfg.device))} · {escape(printable(cfg.work_words))} · {cfg.batch_words}"
                 + (f" × {cfg.accumulate} accumulated" if cfg.accumulate > 1 else "") + f" · {cfg.precision_words}</b>",
                 f"{when} · {escape(printable(run.machine))} · {status}"]
        if s.stopped_early_reason:
            lines.append(f"Stopped early after epoch {s.stopped_early_epoch}: "
                         f"{escape(printable(s.stopped_early_reason))}.")
        if cfg.keep_best and s.best_epoch:
            lines.append(f"Ended with the weights of epoch {s.best_epoch}, its best by {s.monitor}.")
        if run.error:
            lines.append(escape(printable(run.error)))
        lines += [escape(printable(line)) for line in script_lines(run)]  # a script's batch, tokens, settings
        for note in (s.leftover_processes, s.output_note):
            if note:
                lines.append(escape(printable(note)))
        if s.memory_flag:
            lines.append(f"⚠︎ Memory: {escape(printable(s.memory_flag))}")
        if precision_note(cfg):
            lines.append(escape(precision_note(cfg)))
        lines.append(environment_line(run.env))
        self.title.setText("<br>".join(lines))
        self.note.blockSignals(True)
        self.note.setText(run.note)
        self.note.blockSignals(False)
        self.steps_button.setEnabled(bool(run.losses))
        self.save_button.setVisible(cfg.mode == "train")
        self.save_button.setEnabled(run.status == "finished")
        self._fill_epochs(run)
        self._fill_evaluation(run)

    def _fill_evaluation(self, run: RunResult) -> None:
        """Per-class accuracy and the confusion matrix on the validation split (labelled image datasets)."""
        ev = run.evaluation
        rows = evaluation.per_class(ev)
        shown = bool(rows)
        self.classes.setVisible(shown)
        self.matrix.setVisible(shown)
        if ev is None or not shown:
            self.eval_label.setText("No evaluation: it needs a finished epoch on a labelled image dataset with a "
                                    "validation split (up to 100 classes)." if run.config.mode == "train" else "")
            return
        which = f"epoch {ev.epoch}" if ev.epoch else "the last epoch"
        total = evaluation.overall(ev)
        self.eval_label.setText(f"<b>Evaluation</b> on the {ev.split} split after {which}: "
                                f"{100 * total:.1f} % correct of {sum(r.samples for r in rows):,} samples "
                                "(measured)." if total is not None else "<b>Evaluation</b>: no samples.")
        self.classes.setRowCount(len(rows))
        for i, r in enumerate(rows):
            cells = (r.name, f"{r.samples:,}", f"{r.correct:,}",
                     f"{100 * r.accuracy:.1f} %" if r.accuracy is not None else "\u2014", r.confused_with)
            for col, text in enumerate(cells):
                item = QTableWidgetItem(text)
                if col in (1, 2, 3):
                    item.setTextAlignment(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
                self.classes.setItem(i, col, item)
        names = [r.name for r in rows]
        n = len(names)
        self.matrix.setRowCount(n)
        self.matrix.setColumnCount(n)
        short = [name if len(name) <= 12 else name[:11] + "\u2026" for name in names]
        self.matrix.setHorizontalHeaderLabels([name if len(name) <= 6 else name[:5] + "\u2026" for name in names])
        self.matrix.setVerticalHeaderLabels(short)
        self.matrix.horizontalHeader().setDefaultSectionSize(self.matrix.fontMetrics().horizontalAdvance("00000") + 12)
        base = self.palette().color(QPalette.ColorRole.Highlight)
        for i in range(n):
            row_total = sum(ev.matrix[i]) or 1
            for j in range(n):
                count = ev.matrix[i][j]
                item = QTableWidgetItem(f"{count:,}" if count else "")
                item.setTextAlignment(Qt.AlignmentFlag.AlignCenter)
                share = count / row_total
                if count:
                    shade = QColor(base)
                    shade.setAlphaF(0.12 + 0.78 * share)
                    item.setBackground(shade)
                    if share > 0.55:
                        item.setForeground(QColor("white"))
                item.setToolTip(f"true {names[i]}, predicted {names[j]}: {count:,} ({100 * share:.1f} % of "
                                f"{names[i]})")
                self.matrix.setItem(i, j, item)

    def class_rows(self) -> list[list[str]]:
        return [[self.classes.item(r, c).text() for c in range(self.classes.columnCount())]
                for r in range(self.classes.rowCount())]

    def _fill_epochs(self, run: RunResult) -> None:
        rows = run.epochs if run.config.steps is None else []
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
            acc = e.val_accuracy
            step = run.epoch_step(e)
            cells = (str(e.epoch if e.epoch is not None else ""), f"{step:,}" if step is not None else "\u2014",
                     fmt_duration(e.seconds) if is_finite(e.seconds) else "\u2014",
                     f"{e.val_loss:.4g}" if is_finite(e.val_loss) else "\u2014",
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


def environment_line(env: dict) -> str:
    """What can change the run's numbers besides its settings, as recorded (engine analysis/differences.py), in
    grey: "Environment: torch 2.14.1 · Python 3.11.7 · macOS 14.5 · macOS build 23F79 · …"."""
    from ...engine.analysis.differences import environment_items

    items = [f"{k} {v[:12] if k == 'torch build' else v}" for k, v in environment_items(env)]
    if env.get("python_env") and not env.get("torch"):  # another environment's run that ended before it started
        return (f"<span style='color:gray'>Environment: Python environment {escape(str(env['python_env']))} (the "
                "run ended before it could say more)</span>")
    if not items:
        return "<span style='color:gray'>Environment: not recorded (an older run, or one that never started)</span>"
    return f"<span style='color:gray'>Environment: {escape(' · '.join(items))}</span>"


def _best_epoch(rows: list[EpochRow]) -> int | None:
    accs = [(e.val_accuracy, i) for i, e in enumerate(rows) if is_finite(e.val_accuracy)]
    if accs:
        return max(accs, key=lambda t: (t[0], -t[1]))[1]  # the first of equals
    losses = [(e.val_loss, i) for i, e in enumerate(rows) if is_finite(e.val_loss)]
    return min(losses)[1] if losses else None
