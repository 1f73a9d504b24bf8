"""The Training section: batch size, the length (in steps or in epochs, each kept: rules.Length), the precision (only
those every checked device runs) and, for a Hugging Face model folder, the fine-tuning."""

from __future__ import annotations

from PySide6.QtCore import QObject, QSignalBlocker, Qt, Signal
from PySide6.QtGui import QStandardItemModel
from PySide6.QtWidgets import QComboBox, QHBoxLayout, QVBoxLayout, QWidget

from ...engine.basics.config import PRECISIONS, RunConfig
from ...engine.basics.request import RunRequest
from . import rules
from .widgets import FormRows, section, spin

_PRECISION_TITLES = {"fp32": "fp32", "fp16": "fp16 (autocast)", "bf16": "bf16 (autocast)"}
_FINETUNING = (("Full", "full", "Every weight trains."),
               ("LoRA", "lora", "LoRA adapters (rank 8, alpha 16) on the attention's query and value projections "
                                "train; the rest is frozen."),
               ("Head only", "head", "The task head trains; the body is frozen."))
_MLX_WEIGHTS = (("As stored", None, "MLX's side trains the folder's weights in the run's precision."),
                ("8-bit", 8, "MLX's side quantizes the weights to 8 bits as mlx-lm's convert -q does and trains LoRA "
                             "on them (QLoRA); PyTorch's keeps its precision: not the same arithmetic."),
                ("4-bit", 4, "MLX's side quantizes the weights to 4 bits as mlx-lm's convert -q does and trains LoRA "
                             "on them (QLoRA); PyTorch's keeps its precision: not the same arithmetic."))


class TrainingRows(QObject):
    """The Training section's fields; `changed` when one changes, `unit_changed(by_epoch)` when the length's unit
    does (early stopping and the best epoch work per epoch only)."""

    changed = Signal()
    unit_changed = Signal(bool)

    def __init__(self, layout: QVBoxLayout, rows: FormRows, parent: QWidget) -> None:
        super().__init__(parent)
        section(layout, "Training")
        self.form = rows.new_form()
        defaults = RunRequest().settings
        self.length = rules.Length(epochs=defaults.epochs or 2)
        self.batch_spin = spin(1, 65536, defaults.batch_size or 64,
                               "Samples per step. Larger batches keep a GPU busier; too large runs out of memory.")
        self.batch_spin.valueChanged.connect(self.changed)
        rows.row(self.form, "Batch size", self.batch_spin)

        length = QHBoxLayout()
        length.setSpacing(6)
        self.length_spin = spin(1, 10_000_000, self.length.shown(), "How long to measure, after the warm-up.")
        self.length_spin.valueChanged.connect(self._on_length_value)
        self.length_unit = QComboBox()
        self.length_unit.addItem("epochs", "epochs")
        self.length_unit.addItem("steps", "steps")
        self.length_unit.setItemData(0, "Whole passes over the training set (with validation).",
                                     Qt.ItemDataRole.ToolTipRole)
        self.length_unit.setItemData(1, "A fixed number of measured steps: quicker for big datasets.",
                                     Qt.ItemDataRole.ToolTipRole)
        self.length_unit.currentIndexChanged.connect(self._on_length_unit)
        length.addWidget(self.length_spin, 1)
        length.addWidget(self.length_unit)
        rows.row(self.form, "Length", length)

        self.precision_combo = QComboBox()
        self.precision_combo.setModel(QStandardItemModel(self.precision_combo))
        for p in PRECISIONS:
            self.precision_combo.addItem(_PRECISION_TITLES.get(p, p), p)
            self.precision_combo.setItemData(self.precision_combo.count() - 1, rules.PRECISION_TIPS.get(p, ""),
                                             Qt.ItemDataRole.ToolTipRole)
        self.precision_combo.currentIndexChanged.connect(self._on_precision_index)
        rows.row(self.form, "Precision", self.precision_combo)

        self.finetune_combo = QComboBox()  # a Hugging Face model folder's fine-tuning (shown for one only)
        for text, value, tip in _FINETUNING:
            self.finetune_combo.addItem(text, value)
            self.finetune_combo.setItemData(self.finetune_combo.count() - 1, tip, Qt.ItemDataRole.ToolTipRole)
        self.finetune_combo.currentIndexChanged.connect(self.changed)
        rows.row(self.form, "Fine-tuning", self.finetune_combo)
        self.weights_combo = QComboBox()  # the MLX side's weights of a model folder (shown where MLX is ticked)
        for title, bits, words in _MLX_WEIGHTS:
            self.weights_combo.addItem(title, bits)
            self.weights_combo.setItemData(self.weights_combo.count() - 1, words, Qt.ItemDataRole.ToolTipRole)
        self.weights_combo.currentIndexChanged.connect(self.changed)
        rows.row(self.form, "MLX weights", self.weights_combo)
        layout.addLayout(self.form)

    @property
    def by_epoch(self) -> bool:
        return self.length.by_epoch

    def fields(self) -> dict:
        """batch_size, steps or epochs, and precision for the form's settings."""
        return {"batch_size": self.batch_spin.value(), **self.length.fields(self.length_spin.value()),
                "precision": self.precision_combo.currentData() or "fp32"}

    def finetune(self) -> str:
        return self.finetune_combo.currentData()

    def quantize(self) -> int | None:
        """The bits of the MLX side's weights (None: as stored)."""
        return self.weights_combo.currentData()

    def show_finetune(self, shown: bool, mlx: bool = False) -> None:
        self.form.setRowVisible(self.finetune_combo, shown)
        self.form.setRowVisible(self.weights_combo, shown and mlx)

    def apply(self, config: RunConfig, devices: list) -> None:
        """A config's fields put back; its precision only where every device in `devices` runs it."""
        if config.batch_size is not None:  # a script's run keeps its own
            self.batch_spin.setValue(config.batch_size)
        shown = self.length.mode
        self.length.restore(config.steps, config.epochs)
        wanted, self.length.mode = self.length.mode, shown  # the unit's handler switches it and shows its value
        self.length_unit.setCurrentIndex(self.length_unit.findData(wanted))
        self.length_spin.setValue(self.length.shown())
        self.update_precisions(devices)
        index = self.precision_combo.findData(config.precision)
        if index >= 0 and self._precision_enabled(index):
            self.precision_combo.setCurrentIndex(index)

    def update_precisions(self, devices: list) -> None:
        """Disable precisions a device in `devices` cannot run (the reason becomes the tooltip); fall back to fp32."""
        model = self.precision_combo.model()
        assert isinstance(model, QStandardItemModel)
        for i in range(self.precision_combo.count()):
            enabled, tip = rules.precision_state(devices, self.precision_combo.itemData(i))
            model.item(i).setEnabled(enabled)
            self.precision_combo.setItemData(i, tip, Qt.ItemDataRole.ToolTipRole)
        if not self._precision_enabled(self.precision_combo.currentIndex()):
            with QSignalBlocker(self.precision_combo):
                self.precision_combo.setCurrentIndex(self.precision_combo.findData("fp32"))
        self._show_precision_tip(self.precision_combo.currentIndex())

    def _precision_enabled(self, index: int) -> bool:
        model = self.precision_combo.model()
        assert isinstance(model, QStandardItemModel)
        item = model.item(index)
        return item is not None and item.isEnabled()

    def _show_precision_tip(self, index: int) -> None:
        self.precision_combo.setToolTip(self.precision_combo.itemData(index, Qt.ItemDataRole.ToolTipRole) or "")

    def _on_precision_index(self, index: int) -> None:
        self._show_precision_tip(index)
        self.changed.emit()

    def _on_length_unit(self, _index: int) -> None:
        if not self.length.switch(self.length_unit.currentData()):
            return
        with QSignalBlocker(self.length_spin):
            self.length_spin.setValue(self.length.shown())
        self.unit_changed.emit(self.length.by_epoch)
        self.changed.emit()

    def _on_length_value(self, value: int) -> None:
        self.length.set(value)
        self.changed.emit()
