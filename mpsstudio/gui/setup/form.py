"""The widgets of the setup sidebar, built and laid out (SetupPanel in panel.py gives them meaning; the Advanced section is
advanced.py's).

The handlers the widgets connect to (_on_model_index, _emit_changed, ...) are SetupPanel's methods.
"""

from __future__ import annotations

import sys

from PySide6.QtCore import QEvent, Qt
from PySide6.QtGui import QFont, QPalette, QStandardItemModel
from PySide6.QtWidgets import (
    QComboBox, QFormLayout, QFrame, QHBoxLayout, QLabel, QPushButton, QScrollArea, QSizePolicy, QSpinBox,
    QVBoxLayout, QWidget,
)

from ...engine.basics.config import PRECISIONS
from ...engine.basics.request import RunRequest
from . import rules
from .environments import FrameworkChoice, GpuChoice, PythonChoice
from .guards import GuardRow
from .inputs import InputRows
from .advanced import AdvancedSection
from .widgets import SectionHeading
from ..style import keys

LOADING_TEXT = rules.LOADING_TEXT
NO_DEVICE_TIP = "Check at least one device to run on."
RUN_TIP = f"Run the setup on the checked devices, one after another ({keys('Ctrl+R')})."
_PRECISION_TITLES = {"fp32": "fp32", "fp16": "fp16 (autocast)", "bf16": "bf16 (autocast)"}
PRECISION_TIPS = rules.PRECISION_TIPS


class SetupForm(QWidget):
    """The sidebar's widgets: sections for model, dataset, devices, training and advanced options, and Run."""

    # ------------------------------------------------------------------------------------------- building

    def _build(self) -> None:
        outer = QVBoxLayout(self)
        outer.setContentsMargins(0, 0, 0, 0)
        outer.setSpacing(0)

        self._scroll = QScrollArea()
        self._scroll.setFrameShape(QFrame.Shape.NoFrame)
        self._scroll.setWidgetResizable(True)
        self._scroll.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        self._form = QWidget()
        self._scroll.setWidget(self._form)
        outer.addWidget(self._scroll, 1)

        form = QVBoxLayout(self._form)
        form.setContentsMargins(16, 14, 16, 8)
        form.setSpacing(6)
        self._add_model_section(form)
        self._add_dataset_section(form)
        self._add_devices_section(form)
        self._add_training_section(form)
        self.advanced_section = AdvancedSection(form, self)
        a = self.advanced_section  # its widgets, which the panel reads and sets
        self.advanced_toggle, self.advanced = a.advanced_toggle, a.advanced
        self.lr_box, self.optimizer_combo, self.warmup_spin, self.workers_spin = (a.lr_box, a.optimizer_combo,
                                                                                 a.warmup_spin, a.workers_spin)
        self.mode_combo, self.repeat_spin, self.accumulate_spin = a.mode_combo, a.repeat_spin, a.accumulate_spin
        self.patience_spin, self.monitor_combo, self.monitor_mode_combo = (a.patience_spin, a.monitor_combo,
                                                                           a.monitor_mode_combo)
        self.resident_check, self.channels_last_check, self.compile_check = (a.resident_check,
                                                                             a.channels_last_check, a.compile_check)
        self.tf32_check, self.mps_fallback_check = a.tf32_check, a.mps_fallback_check
        self.cast_float64_check, self.keep_best_check = a.cast_float64_check, a.keep_best_check
        a.changed.connect(self._emit_changed)
        form.addStretch(1)
        self._align_labels()

        footer = QVBoxLayout()
        footer.setContentsMargins(16, 8, 16, 16)
        footer.setSpacing(10)
        self.summary = QLabel(LOADING_TEXT)
        self.summary.setWordWrap(True)
        self.summary.setForegroundRole(QPalette.ColorRole.PlaceholderText)
        self.summary.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.summary.setToolTip("What one run of this setup trains on and the model's size. MACs: multiply-adds of "
                                "one sample's forward pass (matrix products and convolutions), counted by PyTorch's "
                                "FlopCounterMode, not measured; a training step is about three times that.")
        footer.addWidget(self.summary)
        self.guard_row = GuardRow(footer, self)
        self.guard_box, self.guard_label, self.guard_button = (self.guard_row.box, self.guard_row.label,
                                                               self.guard_row.button)
        self.run_button = QPushButton("Run on CPU")
        self.run_button.setDefault(True)
        self.run_button.setToolTip(RUN_TIP)
        self.run_button.clicked.connect(self._run_clicked)
        self._style_primary(self.run_button)
        footer.addWidget(self.run_button)
        outer.addLayout(footer)

    def _section(self, layout: QVBoxLayout, title: str, first: bool = False) -> None:
        if not first:
            layout.addSpacing(10)
        layout.addWidget(SectionHeading(title))

    @staticmethod
    def _narrow(combo: QComboBox) -> QComboBox:
        """Long entries (folder names, chip names) must not widen the sidebar."""
        combo.setSizeAdjustPolicy(QComboBox.SizeAdjustPolicy.AdjustToMinimumContentsLengthWithIcon)
        combo.setMinimumContentsLength(8)
        combo.setSizePolicy(QSizePolicy.Policy.Expanding, QSizePolicy.Policy.Fixed)
        return combo

    def _add_model_section(self, layout: QVBoxLayout) -> None:
        self._section(layout, "Model", first=True)
        self.model_combo = self._narrow(QComboBox())
        self.model_combo.currentIndexChanged.connect(self._on_model_index)
        layout.addWidget(self.model_combo)
        self.check_model_button = QPushButton("Check Model File")
        self.check_model_button.setToolTip("Build the model from its file in a separate process (after asking you "
                                           "once) to count its parameters and check its output.")
        self.check_model_button.setVisible(False)
        self.check_model_button.clicked.connect(self.check_model_file)
        layout.addWidget(self.check_model_button, 0, Qt.AlignmentFlag.AlignLeft)

    def _add_dataset_section(self, layout: QVBoxLayout) -> None:
        self._section(layout, "Dataset")
        row = QHBoxLayout()
        row.setSpacing(6)
        self.dataset_combo = self._narrow(QComboBox())
        self.dataset_combo.currentIndexChanged.connect(self._on_dataset_index)
        self.open_folder_button = QPushButton("Open Folder…")
        self.open_folder_button.setToolTip(
            "Use your own images: a folder with one subfolder of images per class (you can also drop it here).")
        self.open_folder_button.clicked.connect(self.open_folder_requested)
        row.addWidget(self.dataset_combo, 1)
        row.addWidget(self.open_folder_button)
        layout.addLayout(row)
        self.inputs = InputRows(layout, self)
        self.input_edit, self.classes_spin, self.image_size_spin = (self.inputs.input_edit, self.inputs.classes_spin,
                                                                    self.inputs.image_size_spin)
        self.inputs.changed.connect(self._emit_changed)

    def _add_devices_section(self, layout: QVBoxLayout) -> None:
        self._section(layout, "Devices")
        self._devices_box = QVBoxLayout()
        self._devices_box.setSpacing(4)
        layout.addLayout(self._devices_box)
        # the framework, GPU-count and PyTorch choices: controls of their own, their widgets in this layout
        self.frameworks = FrameworkChoice(layout, self)
        self.gpus = GpuChoice(layout, self)
        self.pythons = PythonChoice(layout, SectionHeading("PyTorch"), self)
        self.torch_check, self.mlx_check = self.frameworks.torch_check, self.frameworks.mlx_check
        self.gpus_combo, self.gpus_row = self.gpus.combo, self.gpus.row

    def _new_form(self) -> QFormLayout:
        form = QFormLayout()
        form.setContentsMargins(0, 2, 0, 0)
        form.setHorizontalSpacing(10)
        form.setVerticalSpacing(6)
        form.setLabelAlignment(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
        form.setFieldGrowthPolicy(QFormLayout.FieldGrowthPolicy.AllNonFixedFieldsGrow)
        form.setRowWrapPolicy(QFormLayout.RowWrapPolicy.DontWrapRows)
        return form

    def _row(self, form: QFormLayout, text: str, field) -> None:
        """A form row whose label shares one width with every other form's labels (so fields line up)."""
        label = QLabel(text)
        self._labels.append(label)
        form.addRow(label, field)

    def _align_labels(self) -> None:
        width = max(label.sizeHint().width() for label in self._labels)
        for label in self._labels:
            label.setMinimumWidth(width)
            label.setAlignment(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)

    @staticmethod
    def _spin(low: int, high: int, value: int, tip: str) -> QSpinBox:
        spin = QSpinBox()
        spin.setRange(low, high)
        spin.setValue(value)
        spin.setGroupSeparatorShown(True)
        spin.setAccelerated(True)
        spin.setToolTip(tip)
        spin.setAlignment(Qt.AlignmentFlag.AlignRight)
        return spin

    def _add_training_section(self, layout: QVBoxLayout) -> None:
        self._section(layout, "Training")
        form = self._new_form()
        defaults = RunRequest().settings
        self.batch_spin = self._spin(1, 65536, defaults.batch_size,
                                     "Samples per step. Larger batches keep a GPU busier; too large runs out of memory.")
        self.batch_spin.valueChanged.connect(self._emit_changed)
        self._row(form, "Batch size", self.batch_spin)

        length = QHBoxLayout()
        length.setSpacing(6)
        self.length_spin = self._spin(1, 10_000_000, self._length.shown(), "How long to measure, after the warm-up.")
        self.length_spin.valueChanged.connect(self._on_length_value)
        self.length_unit = QComboBox()
        self.length_unit.addItem("epochs", "epochs")
        self.length_unit.addItem("steps", "steps")
        self.length_unit.setItemData(0, "Whole passes over the training set (with validation).", Qt.ItemDataRole.ToolTipRole)
        self.length_unit.setItemData(1, "A fixed number of measured steps: quicker for big datasets.",
                                     Qt.ItemDataRole.ToolTipRole)
        self.length_unit.currentIndexChanged.connect(self._on_length_unit)
        length.addWidget(self.length_spin, 1)
        length.addWidget(self.length_unit)
        self._row(form, "Length", length)

        self.precision_combo = QComboBox()
        model: QStandardItemModel = QStandardItemModel(self.precision_combo)
        self.precision_combo.setModel(model)
        for p in PRECISIONS:
            self.precision_combo.addItem(_PRECISION_TITLES.get(p, p), p)
            self.precision_combo.setItemData(self.precision_combo.count() - 1, PRECISION_TIPS.get(p, ""),
                                             Qt.ItemDataRole.ToolTipRole)
        self.precision_combo.currentIndexChanged.connect(self._on_precision_index)
        self._row(form, "Precision", self.precision_combo)
        self.finetune_combo = QComboBox()  # a Hugging Face model folder's fine-tuning (shown for one only)
        for text, value, tip in (("Full", "full", "Every weight trains."),
                                 ("LoRA", "lora", "LoRA adapters (rank 8, alpha 16) on the attention's query and value "
                                                  "projections train; the rest is frozen."),
                                 ("Head only", "head", "The task head trains; the body is frozen.")):
            self.finetune_combo.addItem(text, value)
            self.finetune_combo.setItemData(self.finetune_combo.count() - 1, tip, Qt.ItemDataRole.ToolTipRole)
        self.finetune_combo.currentIndexChanged.connect(self._emit_changed)
        self._row(form, "Fine-tuning", self.finetune_combo)
        self._training_form = form
        layout.addLayout(form)


    def changeEvent(self, event: QEvent) -> None:  # Qt override
        """Follow a light/dark switch: the primary button's colours come from the palette."""
        super().changeEvent(event)
        if hasattr(self, "run_button") and event.type() in (QEvent.Type.PaletteChange, QEvent.Type.ApplicationPaletteChange):
            self._style_primary(self.run_button)

    def _style_primary(self, button: QPushButton) -> None:
        """The accent-coloured main button; macOS draws a default button in the accent colour by itself."""
        if sys.platform == "darwin":
            return  # a taller or recoloured push button turns into a bevel button in the macOS style
        button.setMinimumHeight(34)
        font = QFont(button.font())
        font.setBold(True)
        button.setFont(font)
        palette = QPalette(self.palette())
        for group in (QPalette.ColorGroup.Active, QPalette.ColorGroup.Inactive):
            palette.setColor(group, QPalette.ColorRole.Button, palette.color(group, QPalette.ColorRole.Highlight))
            palette.setColor(group, QPalette.ColorRole.ButtonText,
                             palette.color(group, QPalette.ColorRole.HighlightedText))
        button.setPalette(palette)
