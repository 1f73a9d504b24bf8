"""Run Your Training Script…: which script, its arguments, and how long to measure it.

The dialog only gathers the choices; the engine checks them (run.script.script_config, the same check as
`mpsstudio run`) and its sentence shows in the dialog, which stays open. The window asks for consent to run the
script's code and runs it on the sidebar's checked devices (window/launch.py).
"""

from __future__ import annotations

import shlex
from pathlib import Path
from typing import TYPE_CHECKING

from PySide6.QtCore import Qt
from PySide6.QtGui import QPalette
from PySide6.QtWidgets import (
    QCheckBox, QDialog, QDialogButtonBox, QFileDialog, QFormLayout, QHBoxLayout, QLabel, QLineEdit, QPushButton, QSpinBox,
    QVBoxLayout,
)

from ..engine.basics.config import MAX_BATCH, MAX_STEPS
from ..engine.basics.errors import UserError

if TYPE_CHECKING:
    from ..engine.basics.config import RunConfig

INTRO = ("MPS Studio runs your script as “python script.py arguments” would, once on each device checked in the "
         "sidebar, in a process of its own, and measures its training steps: each optimizer step, or what it "
         "reports with mpsstudio.track.step(loss, batch_size=n). In each run the script sees that device as the only "
         "one (a script that picks “the best available” trains on it); mpsstudio.track.device() and {device} in its "
         "arguments name it too.")
UNTIL_END = "until the script ends"
FROM_MODEL = "read from the model's input"


class ScriptDialog(QDialog):
    """The script, its arguments, the steps to measure and the warm-up; `config` once accepted."""

    def __init__(self, devices: list[str], last: dict | None = None, parent=None):
        super().__init__(parent)
        from ..engine.run.script.runner import DEFAULT_WARMUP

        self.setWindowTitle("Run Your Training Script")
        self.config: RunConfig | None = None  # the engine's, once the dialog is accepted
        last = last or {}
        layout = QVBoxLayout(self)
        intro = QLabel(INTRO)
        intro.setWordWrap(True)
        layout.addWidget(intro)

        form = QFormLayout()
        form.setLabelAlignment(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
        row = QHBoxLayout()
        self.path_edit = QLineEdit(str(last.get("path") or ""))
        self.path_edit.setPlaceholderText("train.py")
        self.path_edit.setMinimumWidth(320)
        self.path_edit.textChanged.connect(self._changed)
        choose = QPushButton("Choose…")
        choose.clicked.connect(self._choose)
        row.addWidget(self.path_edit, 1)
        row.addWidget(choose)
        form.addRow("Script:", row)
        self.args_edit = QLineEdit(str(last.get("args") or ""))
        self.args_edit.setPlaceholderText("--epochs 5 --lr 0.1")
        self.args_edit.setToolTip("The script's own arguments, as you would type them after its name; {device} "
                                  "becomes the device of each run.")
        self.args_edit.textChanged.connect(self._changed)
        form.addRow("Arguments:", self.args_edit)
        self.steps_spin = QSpinBox()
        self.steps_spin.setRange(0, MAX_STEPS)
        self.steps_spin.setSpecialValueText(UNTIL_END)
        self.steps_spin.setSuffix(" measured steps")
        self.steps_spin.setGroupSeparatorShown(True)
        self.steps_spin.setValue(_whole(last.get("steps"), 0))
        self.steps_spin.setToolTip("End the script cleanly after this many measured steps (after the warm-up); "
                                   "what it measured is kept.")
        form.addRow("Stop after:", self.steps_spin)
        self.warmup_spin = QSpinBox()
        self.warmup_spin.setRange(0, 100_000)
        self.warmup_spin.setSuffix(" steps")
        self.warmup_spin.setValue(_whole(last.get("warmup"), DEFAULT_WARMUP))
        self.warmup_spin.setToolTip("Steps timed apart before measuring (the first steps allocate, compile and "
                                    "cache).")
        form.addRow("Warm-up:", self.warmup_spin)
        self.batch_spin = QSpinBox()
        self.batch_spin.setRange(0, MAX_BATCH)
        self.batch_spin.setSpecialValueText(FROM_MODEL)
        self.batch_spin.setSuffix(" samples a step")
        self.batch_spin.setGroupSeparatorShown(True)
        self.batch_spin.setValue(_whole(last.get("batch"), 0))
        self.batch_spin.setToolTip("The samples of each training step. Left as it is, MPS Studio reads it from the "
                                   "model's first input (a sequence-first LSTM's second dimension); set it when that "
                                   "is not the batch.")
        form.addRow("Batch:", self.batch_spin)
        form.addRow("Devices:", QLabel(", ".join(devices) + "  (checked in the sidebar)"))
        device_args = last.get("device_args")
        kept = device_args if isinstance(device_args, dict) else {}
        self.device_edits: dict[str, QLineEdit] = {}
        for device in devices:  # arguments for one device's run alone (--accel for the GPU, say)
            edit = QLineEdit(str(kept.get(device) or ""))
            edit.setPlaceholderText("--accel" if device != "cpu" else "")
            edit.setToolTip(f"Added after the arguments above in the {device} run only (e.g. a flag that makes the "
                            "script use its accelerator).")
            edit.textChanged.connect(self._changed)
            self.device_edits[device] = edit
            form.addRow(f"Only on {device}:", edit)
        self.keep_args = QCheckBox("Keep the arguments as typed")
        self.keep_args.setChecked(last.get("keep_args") is True)
        self.keep_args.setToolTip("Otherwise values that look like secrets (an --api-key's, a --token's, an hf_ or sk- "
                                  "key) are kept in the history, its exports and reports as [redacted].")
        form.addRow("", self.keep_args)
        layout.addLayout(form)

        self.problem = QLabel("")
        self.problem.setWordWrap(True)
        self.problem.setForegroundRole(QPalette.ColorRole.PlaceholderText)
        self.problem.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        layout.addWidget(self.problem)
        self.buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Cancel)
        self.run_button = self.buttons.addButton("Run Script", QDialogButtonBox.ButtonRole.AcceptRole)
        self.run_button.setDefault(True)
        self.buttons.accepted.connect(self.accept)
        self.buttons.rejected.connect(self.reject)
        layout.addWidget(self.buttons)
        self._changed()

    def _choose(self) -> None:
        start = self.path_edit.text().strip() or str(Path.home())
        path, _ = QFileDialog.getOpenFileName(self, "Choose Your Training Script", start, "Python files (*.py)")
        if path:
            self.path_edit.setText(path)

    def _changed(self, *_args) -> None:
        self.problem.setText("")
        self.run_button.setEnabled(bool(self.path_edit.text().strip()))

    def arguments(self) -> list[str]:
        """The arguments split as a shell would (UserError for unbalanced quotes)."""
        try:
            return shlex.split(self.args_edit.text())
        except ValueError as exc:
            raise UserError(f"The arguments cannot be split as a shell would ({exc}); close the quotes.") from None

    def device_arguments(self) -> dict[str, list[str]]:
        """Each device's own arguments ({"cuda": ["--accel"]}), split by the engine's rule (--args-for's)."""
        from ..engine.run.script.runner import parse_device_args

        return parse_device_args([f"{d}={e.text()}" for d, e in self.device_edits.items() if e.text().strip()])

    def remembered(self) -> dict:
        """values() as the window's settings keep them: the arguments' secrets redacted, unless they are kept."""
        from ..engine.basics.redact import redact_text

        found = self.values()
        if not found["keep_args"]:
            found["args"] = redact_text(found["args"])
            found["device_args"] = {d: redact_text(v) for d, v in found["device_args"].items()}
        return found

    def values(self) -> dict:
        """What the dialog holds, to be offered again next time."""
        return {"path": self.path_edit.text().strip(), "args": self.args_edit.text(),
                "steps": self.steps_spin.value(), "warmup": self.warmup_spin.value(),
                "batch": self.batch_spin.value(), "keep_args": self.keep_args.isChecked(),
                "device_args": {d: e.text() for d, e in self.device_edits.items() if e.text().strip()}}

    def accept(self) -> None:
        """Checked by the engine first: a sentence keeps the dialog open."""
        from ..engine.run.script.runner import script_config

        try:
            self.config = script_config(str(Path(self.path_edit.text().strip()).expanduser()), self.arguments(),
                                        self.steps_spin.value() or None, self.warmup_spin.value(),
                                        batch_size=self.batch_spin.value() or None,
                                        device_args=self.device_arguments(), keep_args=self.keep_args.isChecked())
        except UserError as exc:
            self.problem.setText(str(exc))
            return
        super().accept()


def _whole(value, default: int) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= MAX_STEPS else default
