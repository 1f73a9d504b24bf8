"""The setup form's Advanced section: a control that owns its widgets (built folded), gives the settings they hold
and puts a config's back, and says `changed`."""

from __future__ import annotations

import sys

from PySide6.QtCore import QObject, Qt, Signal
from PySide6.QtGui import QFont, QPalette
from PySide6.QtWidgets import QCheckBox, QComboBox, QToolButton, QVBoxLayout, QWidget

from ...engine.basics.config import FROZEN_COMPILE_REASON, MAX_ACCUMULATE, MODES, OPTIMIZERS, RunConfig
from ...engine.basics.request import RunRequest
from ...engine.machine.apple import MPS_COMPILE_NOTE
from . import rules
from .widgets import FormRows, LearningRateBox, spin

_OPTIMIZER_TITLES = {"sgd": "SGD", "adam": "Adam", "adamw": "AdamW"}
_MODE_TITLES = {"train": "Train", "inference": "Inference"}
_MODE_TIPS = {"train": "Forward pass, backward pass and optimizer step.",
              "inference": "Forward passes only, under torch.inference_mode()."}


class AdvancedSection(QObject):
    """The Advanced section's widgets: learning rate, optimizer, warm-up, data workers, mode, repeat, accumulation,
    early stopping, the best epoch, resident data, channels_last, torch.compile and the MPS fallback. Its rows are
    made with the form's others (`rows`: their labels aligned); `changed` when a setting the runs take changes."""

    changed = Signal()

    def __init__(self, layout: QVBoxLayout, rows: FormRows, parent: QWidget) -> None:
        super().__init__(parent)
        self._rows = rows
        self._build(layout)
        self._epoch_tips = {id(w): w.toolTip() for w in self._per_epoch()}

    def rounds(self) -> int:
        """How many times the devices run, interleaved (Repeat)."""
        return self.repeat_spin.value()

    def fields(self, by_epoch: bool) -> dict:
        """The settings the section holds; early stopping and the best epoch only for a run `by_epoch`."""
        return dict(
            lr=float(self.lr_box.value()),
            optimizer=self.optimizer_combo.currentData(),
            warmup_steps=self.warmup_spin.value(),
            workers=self.workers_spin.value(),
            mode=self.mode_combo.currentData(),
            resident=self.resident_check.isChecked(),
            channels_last=self.channels_last_check.isChecked(),
            compile=self.compile_check.isChecked(),
            tf32=self.tf32_check.checkState() == Qt.CheckState.Checked,
            tf32_conv=self.tf32_check.checkState() == Qt.CheckState.PartiallyChecked,
            mps_fallback=self.mps_fallback_check.isChecked(),
            cast_float64=self.cast_float64_check.isChecked(),
            accumulate=self.accumulate_spin.value(),
            **rules.epoch_fields(by_epoch, self.patience_spin.value(), self.keep_best_check.isChecked()),
            early_stop_monitor=self.monitor_combo.currentData(),
            early_stop_mode=self.monitor_mode_combo.currentData(),
        )

    def apply(self, config: RunConfig) -> None:
        """A config's settings put back (Repeat is not a config's: it stays)."""
        if config.lr is not None:  # a script's run keeps its own learning rate and optimizer
            self.lr_box.setValue(config.lr)
        if config.optimizer is not None:
            _select(self.optimizer_combo, config.optimizer)
        self.warmup_spin.setValue(config.warmup_steps)
        self.workers_spin.setValue(config.workers)
        _select(self.mode_combo, config.mode)
        self.resident_check.setChecked(config.resident)
        self.channels_last_check.setChecked(config.channels_last)
        self.compile_check.setChecked(config.compile)
        self.tf32_check.setCheckState(Qt.CheckState.Checked if config.tf32 else Qt.CheckState.PartiallyChecked
                                      if config.tf32_conv else Qt.CheckState.Unchecked)
        self.mps_fallback_check.setChecked(config.mps_fallback)
        self.cast_float64_check.setChecked(config.cast_float64)
        self.accumulate_spin.setValue(config.accumulate)
        self.patience_spin.setValue(config.early_stop_patience or 0)
        _select(self.monitor_combo, config.early_stop_monitor)
        self.monitor_mode_combo.setCurrentIndex(max(0, self.monitor_mode_combo.findData(config.early_stop_mode)))
        self.keep_best_check.setChecked(config.keep_best)

    def set_by_epoch(self, by_epoch: bool) -> None:
        """Early stopping and the best epoch work per epoch: greyed out, saying why, for a steps run."""
        for w in self._per_epoch():
            w.setEnabled(by_epoch)
            w.setToolTip(self._epoch_tips[id(w)] if by_epoch else
                         "Early stopping and the best epoch watch the validation split after each epoch; set "
                         "the length in epochs to use them.")

    def _per_epoch(self) -> tuple[QWidget, ...]:
        return self.patience_spin, self.monitor_combo, self.monitor_mode_combo, self.keep_best_check

    def set_open(self, opened: bool) -> None:
        """Show or hide the Advanced options (collapsed by default)."""
        self.advanced_toggle.setArrowType(Qt.ArrowType.DownArrow if opened else Qt.ArrowType.RightArrow)
        self.advanced.setVisible(opened)

    def _emit_changed(self, *_args) -> None:
        self.changed.emit()

    def _build(self, layout: QVBoxLayout) -> None:
        maker = self._rows
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
        layout.addWidget(self.advanced_toggle)

        self.advanced = QWidget()
        self.advanced_toggle.clicked.connect(lambda: self.set_open(not self.advanced.isVisible()))
        self.advanced.setVisible(False)
        box = QVBoxLayout(self.advanced)
        box.setContentsMargins(0, 0, 0, 0)
        box.setSpacing(6)
        form = maker.new_form()
        defaults = RunRequest().settings

        self.lr_box = LearningRateBox()
        self.lr_box.setValue(defaults.lr or 0.01)
        self.lr_box.setAlignment(Qt.AlignmentFlag.AlignRight)
        self.lr_box.setToolTip("Optimizer learning rate. The arrows step 0.01 → 0.02 → 0.05 → 0.1.")
        self.lr_box.valueChanged.connect(self._emit_changed)
        maker.row(form, "Learning rate", self.lr_box)

        self.optimizer_combo = QComboBox()
        for o in OPTIMIZERS:
            self.optimizer_combo.addItem(_OPTIMIZER_TITLES.get(o, o), o)
        self.optimizer_combo.setCurrentIndex(OPTIMIZERS.index(defaults.optimizer))
        self.optimizer_combo.currentIndexChanged.connect(self._emit_changed)
        maker.row(form, "Optimizer", self.optimizer_combo)

        self.warmup_spin = spin(0, 100_000, defaults.warmup_steps,
                                      "Steps run first and timed apart (Metal graph compilation, cuDNN autotuning, "
                                      "torch.compile); never mixed into throughput.")
        self.warmup_spin.valueChanged.connect(self._emit_changed)
        maker.row(form, "Warm-up steps", self.warmup_spin)

        self.workers_spin = spin(0, 64, defaults.workers,
                                       "DataLoader worker processes; 0 loads batches in the main process.")
        self.workers_spin.valueChanged.connect(self._emit_changed)
        maker.row(form, "Data workers", self.workers_spin)

        self.mode_combo = QComboBox()
        for i, m in enumerate(MODES):
            self.mode_combo.addItem(_MODE_TITLES.get(m, m), m)
            self.mode_combo.setItemData(i, _MODE_TIPS.get(m, ""), Qt.ItemDataRole.ToolTipRole)
        self.mode_combo.setCurrentIndex(MODES.index(defaults.mode))
        self.mode_combo.currentIndexChanged.connect(self._emit_changed)
        maker.row(form, "Mode", self.mode_combo)

        self.repeat_spin = spin(1, 100, 1,
                                      "Run the devices this many times, interleaved (A B B A …), so drift and heat "
                                      "affect both; the speedup is then the median of the paired rounds with their "
                                      "range.")
        self.repeat_spin.setSuffix(" ×")
        maker.row(form, "Repeat", self.repeat_spin)

        self.accumulate_spin = spin(1, MAX_ACCUMULATE, defaults.accumulate,
                                          "Gradient accumulation: one optimizer step every N batches, an effective "
                                          "batch of N × the batch size. Steps and throughput still count batches "
                                          "and samples, so runs stay comparable.")
        self.accumulate_spin.setSuffix(" batches")
        self.accumulate_spin.valueChanged.connect(self._emit_changed)
        maker.row(form, "Accumulate", self.accumulate_spin)

        self.patience_spin = spin(0, 1000, 0,
                                        "Early stopping: end the run when the monitored validation figure has not "
                                        "improved for this many epochs (Off: train every epoch). Epoch runs with a "
                                        "validation split only.")
        self.patience_spin.setSpecialValueText("Off")
        self.patience_spin.setSuffix(" epochs")
        self.patience_spin.valueChanged.connect(self._emit_changed)
        maker.row(form, "Early stopping", self.patience_spin)

        self.monitor_combo = QComboBox()
        self.monitor_combo.addItem("Validation accuracy", "val_accuracy")
        self.monitor_combo.addItem("Validation loss", "val_loss")
        self.monitor_combo.setToolTip("What early stopping and the best epoch watch.")
        self.monitor_combo.currentIndexChanged.connect(self._emit_changed)
        maker.row(form, "Monitor", self.monitor_combo)

        self.monitor_mode_combo = QComboBox()
        self.monitor_mode_combo.addItem("Automatic", None)
        self.monitor_mode_combo.addItem("Higher is better (max)", "max")
        self.monitor_mode_combo.addItem("Lower is better (min)", "min")
        self.monitor_mode_combo.setToolTip("Automatic: higher accuracy, lower loss.")
        self.monitor_mode_combo.currentIndexChanged.connect(self._emit_changed)
        maker.row(form, "Better is", self.monitor_mode_combo)
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
        self.tf32_check = QCheckBox("TF32 (CUDA)")
        self.tf32_check.setTristate(True)
        self.tf32_check.setToolTip("NVIDIA GPUs from Ampere on: TF32 (a 10-bit mantissa) instead of full fp32. "
                                   "Checked: in convolutions and matrix products; partly checked (−): in "
                                   "convolutions only, PyTorch's default; off: full fp32 on every device, like "
                                   "with like. Recorded with the run.")
        self.mps_fallback_check = QCheckBox("Run operations MPS lacks on the CPU")
        self.mps_fallback_check.setChecked(defaults.mps_fallback)
        self.mps_fallback_check.setToolTip(
            "Apple GPU runs: an operation MPS has no kernel for runs on the CPU, with a copy each way (slow), "
            "instead of stopping the run. Set in each run's own process and recorded with the run.")
        self.cast_float64_check = QCheckBox("Cast float64 for MPS")
        self.cast_float64_check.setToolTip(
            "Apple GPU runs: MPS has no float64 or complex128. Off, a model holding them is refused before the run, "
            "naming them; on, they are cast to float32 / complex64 for the run (results can differ from float64).")
        self.keep_best_check = QCheckBox("Keep the best epoch's weights")
        self.keep_best_check.setToolTip("End the run with the weights of its best epoch by the monitored figure "
                                        "(a best checkpoint, kept in memory): what Save Trained Model saves.")
        for check in (self.resident_check, self.channels_last_check, self.compile_check, self.tf32_check,
                      self.mps_fallback_check, self.cast_float64_check, self.keep_best_check):
            check.stateChanged.connect(self._emit_changed)
            box.addWidget(check)
        layout.addWidget(self.advanced)


def _select(combo: QComboBox, value: str) -> None:
    index = combo.findData(value)
    if index >= 0:
        combo.setCurrentIndex(index)
