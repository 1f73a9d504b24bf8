"""The widgets of the setup sidebar, built and laid out (SetupPanel in setup_panel.py gives them meaning).

The handlers the widgets connect to (_on_model_index, _emit_changed, ...) are SetupPanel's methods.
"""

from __future__ import annotations

import sys

from PySide6.QtCore import QEvent, Qt
from PySide6.QtGui import QFont, QPalette, QStandardItemModel
from PySide6.QtWidgets import (
    QCheckBox, QComboBox, QFormLayout, QFrame, QHBoxLayout, QLabel, QPushButton, QScrollArea, QSizePolicy, QSpinBox,
    QToolButton, QVBoxLayout, QWidget,
)

from ..engine.basics.config import FROZEN_COMPILE_REASON, MAX_ACCUMULATE, MODES, OPTIMIZERS, PRECISIONS, RunConfig
from ..engine.machine.apple import MPS_COMPILE_NOTE
from .setup_widgets import LearningRateBox, SectionHeading

LOADING_TEXT = "Loading PyTorch…"
NO_DEVICE_TIP = "Check at least one device to run on."
RUN_TIP = "Run the setup on the checked devices, one after another (⌘R)."
_PRECISION_TITLES = {"fp32": "fp32", "fp16": "fp16 (autocast)", "bf16": "bf16 (autocast)"}
PRECISION_TIPS = {
    "fp32": "Full 32-bit floating point: the reference every device supports.",
    "fp16": "Mixed precision: matrix work in 16-bit floats (torch.autocast), weights kept in fp32.",
    "bf16": "Mixed precision with bfloat16 (torch.autocast): fp32's range with half the bits.",
}
_OPTIMIZER_TITLES = {"sgd": "SGD", "adam": "Adam", "adamw": "AdamW"}
_MODE_TITLES = {"train": "Train", "inference": "Inference"}
_MODE_TIPS = {"train": "Forward pass, backward pass and optimizer step.",
              "inference": "Forward passes only, under torch.inference_mode()."}


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
        self._add_advanced_section(form)
        form.addStretch(1)
        self._align_labels()

        footer = QVBoxLayout()
        footer.setContentsMargins(16, 8, 16, 16)
        footer.setSpacing(10)
        self.summary = QLabel(LOADING_TEXT)
        self.summary.setWordWrap(True)
        self.summary.setForegroundRole(QPalette.ColorRole.PlaceholderText)
        self.summary.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        footer.addWidget(self.summary)
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

    def _add_devices_section(self, layout: QVBoxLayout) -> None:
        self._section(layout, "Devices")
        self._devices_box = QVBoxLayout()
        self._devices_box.setSpacing(4)
        layout.addLayout(self._devices_box)

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
        defaults = RunConfig()
        self.batch_spin = self._spin(1, 65536, defaults.batch_size,
                                     "Samples per step. Larger batches keep a GPU busier; too large runs out of memory.")
        self.batch_spin.valueChanged.connect(self._emit_changed)
        self._row(form, "Batch size", self.batch_spin)

        length = QHBoxLayout()
        length.setSpacing(6)
        self.length_spin = self._spin(1, 10_000_000, self._epochs_value, "How long to measure, after the warm-up.")
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
        layout.addLayout(form)

    def _add_advanced_section(self, layout: QVBoxLayout) -> None:
        layout.addSpacing(8)
        self.advanced_toggle = QToolButton()
        self.advanced_toggle.setText("Advanced")
        self.advanced_toggle.setAutoRaise(True)
        self.advanced_toggle.setArrowType(Qt.ArrowType.RightArrow)
        self.advanced_toggle.setToolButtonStyle(Qt.ToolButtonStyle.ToolButtonTextBesideIcon)
        self.advanced_toggle.setToolTip("Optimizer, warm-up, data loading and compilation options")
        font = QFont(self.advanced_toggle.font())
        font.setBold(True)
        font.setPointSizeF(max(8.0, font.pointSizeF() - 1))
        self.advanced_toggle.setFont(font)
        self.advanced_toggle.setForegroundRole(QPalette.ColorRole.PlaceholderText)
        self.advanced_toggle.clicked.connect(lambda: self.set_advanced_open(not self.advanced.isVisible()))
        layout.addWidget(self.advanced_toggle)

        self.advanced = QWidget()
        self.advanced.setVisible(False)
        box = QVBoxLayout(self.advanced)
        box.setContentsMargins(0, 0, 0, 0)
        box.setSpacing(6)
        form = self._new_form()
        defaults = RunConfig()

        self.lr_box = LearningRateBox()
        self.lr_box.setValue(defaults.lr)
        self.lr_box.setAlignment(Qt.AlignmentFlag.AlignRight)
        self.lr_box.setToolTip("Optimizer learning rate. The arrows step 0.01 → 0.02 → 0.05 → 0.1.")
        self.lr_box.valueChanged.connect(self._emit_changed)
        self._row(form, "Learning rate", self.lr_box)

        self.optimizer_combo = QComboBox()
        for o in OPTIMIZERS:
            self.optimizer_combo.addItem(_OPTIMIZER_TITLES.get(o, o), o)
        self.optimizer_combo.setCurrentIndex(OPTIMIZERS.index(defaults.optimizer))
        self.optimizer_combo.currentIndexChanged.connect(self._emit_changed)
        self._row(form, "Optimizer", self.optimizer_combo)

        self.warmup_spin = self._spin(0, 100_000, defaults.warmup_steps,
                                      "Steps run first and timed apart (Metal graph compilation, cuDNN autotuning, "
                                      "torch.compile); never mixed into throughput.")
        self.warmup_spin.valueChanged.connect(self._emit_changed)
        self._row(form, "Warm-up steps", self.warmup_spin)

        self.workers_spin = self._spin(0, 64, defaults.workers,
                                       "DataLoader worker processes; 0 loads batches in the main process.")
        self.workers_spin.valueChanged.connect(self._emit_changed)
        self._row(form, "Data workers", self.workers_spin)

        self.mode_combo = QComboBox()
        for i, m in enumerate(MODES):
            self.mode_combo.addItem(_MODE_TITLES.get(m, m), m)
            self.mode_combo.setItemData(i, _MODE_TIPS.get(m, ""), Qt.ItemDataRole.ToolTipRole)
        self.mode_combo.setCurrentIndex(MODES.index(defaults.mode))
        self.mode_combo.currentIndexChanged.connect(self._emit_changed)
        self._row(form, "Mode", self.mode_combo)

        self.repeat_spin = self._spin(1, 100, 1,
                                      "Run the devices this many times, interleaved (A B B A …), so drift and heat "
                                      "affect both; the speedup is then the median of the paired rounds with their "
                                      "range.")
        self.repeat_spin.setSuffix(" ×")
        self._row(form, "Repeat", self.repeat_spin)

        self.accumulate_spin = self._spin(1, MAX_ACCUMULATE, defaults.accumulate,
                                          "Gradient accumulation: one optimizer step every N batches, an effective "
                                          "batch of N × the batch size. Steps and throughput still count batches "
                                          "and samples, so runs stay comparable.")
        self.accumulate_spin.setSuffix(" batches")
        self.accumulate_spin.valueChanged.connect(self._emit_changed)
        self._row(form, "Accumulate", self.accumulate_spin)

        self.patience_spin = self._spin(0, 1000, 0,
                                        "Early stopping: end the run when the monitored validation figure has not "
                                        "improved for this many epochs (Off: train every epoch). Epoch runs with a "
                                        "validation split only.")
        self.patience_spin.setSpecialValueText("Off")
        self.patience_spin.setSuffix(" epochs")
        self.patience_spin.valueChanged.connect(self._emit_changed)
        self._row(form, "Early stopping", self.patience_spin)

        self.monitor_combo = QComboBox()
        self.monitor_combo.addItem("Validation accuracy", "val_accuracy")
        self.monitor_combo.addItem("Validation loss", "val_loss")
        self.monitor_combo.setToolTip("What early stopping and the best epoch watch.")
        self.monitor_combo.currentIndexChanged.connect(self._emit_changed)
        self._row(form, "Monitor", self.monitor_combo)

        self.monitor_mode_combo = QComboBox()
        self.monitor_mode_combo.addItem("Automatic", None)
        self.monitor_mode_combo.addItem("Higher is better (max)", "max")
        self.monitor_mode_combo.addItem("Lower is better (min)", "min")
        self.monitor_mode_combo.setToolTip("Automatic: higher accuracy, lower loss.")
        self.monitor_mode_combo.currentIndexChanged.connect(self._emit_changed)
        self._row(form, "Better is", self.monitor_mode_combo)
        box.addLayout(form)

        self.resident_check = QCheckBox("Keep data on the device (resident)")
        self.resident_check.setToolTip("Copy the whole dataset to the device once, so no step waits for data.")
        self.channels_last_check = QCheckBox("channels_last")
        self.channels_last_check.setToolTip("Store images as NHWC; often faster for convolutions on GPUs.")
        self.compile_check = QCheckBox("torch.compile")
        self.compile_check.setToolTip("Compile the model first; the compile time shows up in the warm-up. "
                                      + MPS_COMPILE_NOTE)
        if getattr(sys, "frozen", False):
            self.compile_check.setEnabled(False)
            self.compile_check.setToolTip(FROZEN_COMPILE_REASON)
        self.mps_fallback_check = QCheckBox("Run operations MPS lacks on the CPU")
        self.mps_fallback_check.setChecked(defaults.mps_fallback)
        self.mps_fallback_check.setToolTip(
            "Apple GPU runs: an operation MPS has no kernel for runs on the CPU, with a copy each way (slow), "
            "instead of stopping the run. Set in each run's own process and recorded with the run.")
        self.keep_best_check = QCheckBox("Keep the best epoch's weights")
        self.keep_best_check.setToolTip("End the run with the weights of its best epoch by the monitored figure "
                                        "(a best checkpoint, kept in memory): what Save Trained Model saves.")
        for check in (self.resident_check, self.channels_last_check, self.compile_check, self.mps_fallback_check,
                      self.keep_best_check):
            check.toggled.connect(self._emit_changed)
            box.addWidget(check)
        layout.addWidget(self.advanced)

    def changeEvent(self, event: QEvent) -> None:  # noqa: N802 (Qt override)
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
