"""A tool's settings before it runs (a sheet on macOS): the fields its row in engine/tools/registry.TABLE declares
with its command-line options (the same words, ranges and first values), prefilled from the setup, what it will do
(the engine's count, and a time estimate where an earlier run allows one: tools/chosen.py), and Start. What the sheet
gathers is read by the engine (the tool's `chosen` function, its parsers, the tool itself), never re-derived here.
"""

from __future__ import annotations

from typing import Any

from PySide6.QtCore import Qt
from PySide6.QtGui import QPalette
from PySide6.QtWidgets import (
    QCheckBox, QComboBox, QDialog, QDialogButtonBox, QDoubleSpinBox, QFormLayout, QHBoxLayout, QLabel, QLineEdit,
    QSpinBox, QVBoxLayout, QWidget,
)

from ...engine.basics.config import RunConfig
from ...engine.basics.errors import UserError
from ...engine.tools.argspec import Context, Field, value_of


class ToolSheet(QDialog):
    """One tool's settings; `chosen()` gives what the window passes to start_tool once accepted. `fields`: each
    field's widget by its option's name (a "checks" field: its boxes by value)."""

    def __init__(self, kind: str, config: RunConfig, devices: list[str], runs: list, train: int | None = None,
                 parent=None, trained: tuple[str, str, RunConfig] | None = None):
        super().__init__(parent)
        from ...engine.tools import registry

        self.kind, self.tool = kind, registry.TOOLS[kind]
        self.context = Context(config, tuple(devices), tuple(runs), train, trained)
        self.fields: dict[str, Any] = {}
        self.setWindowTitle(registry.TITLES[kind])
        self.setWindowModality(Qt.WindowModality.WindowModal)  # a sheet on macOS
        layout = QVBoxLayout(self)
        on = (f"{config.model.replace(chr(92), '/').rsplit('/', 1)[-1]} on "
              f"{config.dataset if len(config.dataset) < 40 else '…' + config.dataset[-38:]}, "
              if self.tool.on_model else "")
        intro = QLabel(f"{self.tool.what}\n{on}{', '.join(devices)}.")
        intro.setWordWrap(True)
        layout.addWidget(intro)
        self.form = QFormLayout()
        self.form.setLabelAlignment(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
        layout.addLayout(self.form)
        for option in self.tool.options:
            if option.field is not None:
                self._add(option.name, option.field)
        self.plan = QLabel()
        self.plan.setWordWrap(True)
        self.plan.setForegroundRole(QPalette.ColorRole.PlaceholderText)
        layout.addWidget(self.plan)
        self.problem = QLabel()
        self.problem.setWordWrap(True)
        layout.addWidget(self.problem)
        buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Cancel)
        self.start_button = buttons.addButton("Start", QDialogButtonBox.ButtonRole.AcceptRole)
        self.start_button.setDefault(True)
        buttons.accepted.connect(self.accept)
        buttons.rejected.connect(self.reject)
        layout.addWidget(buttons)
        self.setMinimumWidth(460)
        self._update()

    # -- the fields, as declared ---------------------------------------------------------------------------
    def _add(self, name: str, field: Field) -> None:
        initial = value_of(field.initial, self.context)
        widget: QWidget | None = None
        if field.kind in ("whole", "minutes"):
            spin = QSpinBox() if field.kind == "whole" else QDoubleSpinBox()
            low, high = value_of(field.low, self.context), value_of(field.high, self.context)
            spin.setRange(low, high)
            if isinstance(spin, QDoubleSpinBox):
                spin.setDecimals(1)
                spin.setSuffix(field.suffix)
            else:
                spin.setGroupSeparatorShown(True)
            spin.setValue(max(low, min(high, initial)))
            spin.valueChanged.connect(self._update)
            widget = spin
        elif field.kind == "text":
            line = QLineEdit(initial)
            line.setPlaceholderText(field.placeholder)
            line.textChanged.connect(self._update)
            widget = line
        elif field.kind == "choice":
            combo = QComboBox()
            for value, words in value_of(field.items, self.context):
                combo.addItem(words, value)
            if initial is not None:
                combo.setCurrentIndex(combo.findData(initial))
            combo.currentIndexChanged.connect(self._update)
            widget = combo
        elif field.kind == "check":
            box = QCheckBox(field.text)
            box.setChecked(bool(initial))
            box.toggled.connect(self._update)
            widget = box
        elif field.kind == "checks":
            boxes = {value: QCheckBox(words) for value, words in value_of(field.items, self.context)}
            row = QHBoxLayout()
            for i, (value, box) in enumerate(boxes.items()):
                box.setChecked(value in initial)
                box.setToolTip(field.tip)
                box.toggled.connect(self._update)
                if field.inline:
                    row.addWidget(box)
                else:
                    self.form.addRow(field.label if i == 0 else "", box)
            if field.inline:
                row.addStretch(1)
                self.form.addRow(field.label, row)
            self.fields[name] = boxes
            return
        else:
            raise ValueError(f"a field of kind {field.kind!r}")
        if field.tip:
            widget.setToolTip(field.tip)
        self.form.addRow(field.label, widget)
        self.fields[name] = widget
        note = value_of(field.note, self.context) if field.note is not None else ""
        if note:
            label = QLabel(note)
            label.setWordWrap(True)
            self.form.addRow("", label)

    def values(self) -> dict:
        """Each field's value by its option's name; a field switched off by another (`enabled_when`) gives None."""
        out: dict[str, Any] = {}
        for option in self.tool.options:
            widget = self.fields.get(option.name)
            if widget is None:
                continue
            if isinstance(widget, dict):
                out[option.name] = [value for value, box in widget.items() if box.isChecked()]
            elif isinstance(widget, (QSpinBox, QDoubleSpinBox)):
                out[option.name] = widget.value()
            elif isinstance(widget, QLineEdit):
                out[option.name] = widget.text()
            elif isinstance(widget, QComboBox):
                out[option.name] = widget.currentData()
            else:
                out[option.name] = widget.isChecked()
        for option in self.tool.options:
            when = option.field.enabled_when if option.field is not None else None
            if when is not None:
                on = out.get(when[0]) == when[1]
                self.fields[option.name].setEnabled(on)
                if not on:
                    out[option.name] = None
        return out

    # -- what it will do ---------------------------------------------------------------------------------
    def _update(self, *_args) -> None:
        self.problem.setText("")
        try:
            chosen = self.chosen()
        except UserError as exc:
            self.plan.setText("")
            self.problem.setText(str(exc))
            self.start_button.setEnabled(False)
            return
        self.start_button.setEnabled(True)
        self.plan.setText(self.tool.call("plan", chosen, self.context) if self.tool.plan else "")

    def chosen(self) -> dict:
        """{"config", "batch_sizes", "payload"} for start_tool; UserError for a field the engine refuses."""
        return self.tool.call("chosen", self.values(), self.context)

    def accept(self) -> None:
        try:
            self.chosen()
        except UserError as exc:
            self.problem.setText(str(exc))
            return
        super().accept()
