"""The run setup sidebar: model, dataset, devices and training options, turned into RunConfig objects.

It is built before torch is imported (disabled, "Loading PyTorch…") and comes alive in set_catalog().
Torch-side engine modules (models, devices) are imported only inside the methods that need them.
"""

from __future__ import annotations

import os
import re
import sys
from dataclasses import replace
from pathlib import Path

from PySide6.QtCore import QEvent, Qt, Signal
from PySide6.QtGui import QFont, QPalette, QStandardItemModel, QValidator
from PySide6.QtWidgets import (
    QAbstractSpinBox, QCheckBox, QComboBox, QDoubleSpinBox, QFileDialog, QFormLayout, QFrame, QHBoxLayout, QLabel,
    QPushButton, QScrollArea, QSizePolicy, QSpinBox, QStyle, QToolButton, QVBoxLayout, QWidget,
)

from ..engine.config import MODES, OPTIMIZERS, PRECISIONS, RunConfig
from ..engine.spec import DataSpec

LOADING_TEXT = "Loading PyTorch…"
MODEL_FILE_WARNING = "⚠︎ Loading a model file runs its code; only choose files you trust."
NO_DEVICE_TIP = "Check at least one device to run on."
RUN_TIP = "Run the setup on the checked devices, one after another (⌘R)."
DEFAULT_STEPS = 200

_CHOOSE_FILE = "\x00choose-model-file"  # item data of the "Choose .py file…" entry
_FOLDER_ICON = "📁"

# What a named dataset gives, without loading it (the loaders in engine/datasets.py produce these shapes).
_NAMED_SPECS = {
    "shapes": DataSpec("image", 10, channels=1, height=28, width=28),
    "mnist": DataSpec("image", 10, channels=1, height=28, width=28),
    "fashion_mnist": DataSpec("image", 10, channels=1, height=28, width=28),
    "cifar10": DataSpec("image", 10, channels=3, height=32, width=32),
}
_PRECISION_TITLES = {"fp32": "fp32", "fp16": "fp16 (autocast)", "bf16": "bf16 (autocast)"}
_PRECISION_TIPS = {
    "fp32": "Full 32-bit floating point: the reference every device supports.",
    "fp16": "Mixed precision: matrix work in 16-bit floats (torch.autocast), weights kept in fp32.",
    "bf16": "Mixed precision with bfloat16 (torch.autocast): fp32's range with half the bits.",
}
_OPTIMIZER_TITLES = {"sgd": "SGD", "adam": "Adam", "adamw": "AdamW"}
_MODE_TITLES = {"train": "Train", "inference": "Inference"}
_MODE_TIPS = {"train": "Forward pass, backward pass and optimizer step.",
              "inference": "Forward passes only, under torch.inference_mode()."}


# ----------------------------------------------------------------------------------------------- formatting


def human_count(n: int) -> str:
    """A parameter count as people say it: 831,626 / 1.5 M / 134.3 M / 1.2 B."""
    if n >= 1_000_000_000:
        return f"{n / 1e9:,.1f} B"
    if n >= 1_000_000:
        return f"{n / 1e6:,.1f} M"
    return f"{n:,}"


def _short(text: str, limit: int = 120) -> str:
    """One line, cut at `limit` characters: an error message must not flood the sidebar."""
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"


def _times(text: str) -> str:
    """Sizes written with a multiplication sign: 1x28x28 -> 1×28×28."""
    return re.sub(r"(?<=\d)x(?=\d)", "×", text)


def _clean_chip_name(name: str) -> str:
    """'Intel(R) Xeon(R) Processor' -> 'Intel Xeon Processor'."""
    return " ".join(re.sub(r"\((R|TM|C)\)", "", name, flags=re.I).split())


def device_title(device) -> str:
    """Short name of a device: 'CPU', 'Apple GPU (MPS)', 'CUDA 0'."""
    if device.kind == "mps":
        return "Apple GPU (MPS)"
    if device.kind == "cuda":
        _, _, index = device.id.partition(":")
        return f"CUDA {index}" if index else "CUDA"
    return device.id.upper()


def device_label(device, limit: int = 38) -> str:
    """The checkbox text: 'CPU — Intel Xeon', 'CUDA 0 — NVIDIA H100' (cut short in the narrow sidebar)."""
    name = _clean_chip_name(device.name or "")
    text = f"{device_title(device)} — {name}" if name else device_title(device)
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"


def _run_target(device) -> str:
    return "Apple GPU" if device.kind == "mps" else device_title(device)


def dataset_facts(info, spec: DataSpec | None) -> str:
    """'shapes · 6,000 + 1,000 images · 1×28×28 · 10 classes' from a DatasetInfo description and its spec."""
    text = info.description
    if info.name == "synthetic":
        return "synthetic · random data shaped for the model · throughput only, no learning"
    facts = [info.name]
    counts = re.search(r"[\d,]+ \+ [\d,]+ images", text)
    if counts:
        facts.append(counts.group(0))
    shape = re.search(r"\b\d+x\d+x\d+\b", text)
    if shape:
        facts.append(_times(shape.group(0)))
    if spec is not None:
        facts.append(f"{spec.num_classes} classes")
    download = re.search(r"\(([\d.]+ [KMG]B) download\)", text)
    if download:
        facts.append(f"{download.group(1)} download")
    if len(facts) == 1:
        facts.append(text.split(";")[0])
    return " · ".join(facts)


def folder_spec(summary: str, preferred_side: int | None, image_size: int | None) -> DataSpec | None:
    """The spec a validated folder will give, read from its one-line summary; None when it cannot be told."""
    classes = re.search(r"(\d[\d,]*) classes", summary)
    if not classes:
        return None
    channels = 1 if "grayscale" in summary else 3
    side = image_size or preferred_side
    if side:
        width = height = side
    else:
        sizes = re.findall(r"(\d+)x(\d+)", summary)
        if not sizes:
            return None
        width, height = (int(v) for v in sizes[-1])
    return DataSpec("image", int(classes.group(1).replace(",", "")), channels=channels, height=height, width=width)


# ----------------------------------------------------------------------------------------------- small widgets


class LearningRateBox(QDoubleSpinBox):
    """A learning-rate field that shows 0.01 rather than 0.01000 and steps 0.01 → 0.02 → 0.05 → 0.1."""

    _MANTISSAS = (1.0, 2.0, 5.0)

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setDecimals(5)
        self.setRange(0.00001, 10.0)
        self.setCorrectionMode(QAbstractSpinBox.CorrectionMode.CorrectToNearestValue)

    def textFromValue(self, value: float) -> str:  # noqa: N802 (Qt override)
        return f"{value:.5f}".rstrip("0").rstrip(".")

    def valueFromText(self, text: str) -> float:  # noqa: N802
        try:
            return float(text.replace(",", "."))
        except ValueError:
            return self.value()

    def validate(self, text: str, pos: int):  # noqa: D102
        try:
            value = float(text.replace(",", "."))
        except ValueError:
            ok = re.fullmatch(r"[0-9.,eE+-]*", text) is not None
            return (QValidator.State.Intermediate if ok else QValidator.State.Invalid), text, pos
        inside = self.minimum() <= value <= self.maximum()
        return (QValidator.State.Acceptable if inside else QValidator.State.Intermediate), text, pos

    def stepBy(self, steps: int) -> None:  # noqa: N802
        ladder = sorted({m * 10.0 ** e for e in range(-5, 2) for m in self._MANTISSAS})
        ladder = [v for v in ladder if self.minimum() <= v <= self.maximum()]
        value = self.value()
        if steps > 0:
            above = [v for v in ladder if v > value * (1 + 1e-9)]
            index = ladder.index(above[0]) + steps - 1 if above else len(ladder) - 1
        else:
            below = [v for v in ladder if v < value * (1 - 1e-9)]
            index = ladder.index(below[-1]) + steps + 1 if below else 0
        self.setValue(ladder[max(0, min(len(ladder) - 1, index))])


class SectionHeading(QLabel):
    """A small bold heading in the secondary text colour, like a Mac sidebar's group titles."""

    def __init__(self, text: str, parent: QWidget | None = None) -> None:
        super().__init__(text, parent)
        font = QFont(self.font())
        font.setBold(True)
        font.setPointSizeF(max(8.0, font.pointSizeF() - 1))
        self.setFont(font)
        self.setForegroundRole(QPalette.ColorRole.PlaceholderText)


class DeviceRow(QWidget):
    """One device's checkbox; an unavailable device is disabled, says why in its tooltip, and is marked."""

    toggled = Signal(bool)

    def __init__(self, device, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.device = device
        self.checkbox = QCheckBox(device_label(device))
        self.checkbox.toggled.connect(self.toggled)
        layout = QHBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.setSpacing(6)
        layout.addWidget(self.checkbox)
        full = device_label(device, limit=10_000)
        if device.available:
            tip = full
            if device.kind == "cpu" and device.threads:
                tip += f"\n{device.threads} threads"
            if device.memory_total:
                tip += f"\n{device.memory_total / 2**30:,.0f} GB memory"
            self.checkbox.setToolTip(tip)
        else:
            self.checkbox.setEnabled(False)
            self.checkbox.setToolTip(device.reason)
            note = QLabel("(not available)")
            note.setForegroundRole(QPalette.ColorRole.PlaceholderText)
            note.setToolTip(device.reason)
            layout.addWidget(note)
        layout.addStretch(1)

    @property
    def checked(self) -> bool:
        return self.device.available and self.checkbox.isChecked()


# ----------------------------------------------------------------------------------------------- the panel


class SetupPanel(QWidget):
    """The sidebar form that turns the user's choices into one RunConfig per checked device."""

    run_requested = Signal()
    open_folder_requested = Signal()
    changed = Signal()

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self._devices: list = []
        self._device_rows: list[DeviceRow] = []
        self._dataset_infos: dict = {}
        self._model_infos: dict = {}
        self._folder_summaries: dict[str, str] = {}
        self._param_cache: dict[tuple, int | str] = {}
        self._base = RunConfig()  # carries fields the form does not show (seed, threads, tf32, ...)
        self._pending: RunConfig | None = None
        self._loaded = False
        self._running = False
        self._quiet = 0
        self._steps_value = DEFAULT_STEPS
        self._epochs_value = RunConfig().epochs or 2
        self._length_mode = "epochs"
        self._model_index = 0
        self._labels: list[QLabel] = []
        self.setMinimumWidth(300)
        self.setMaximumWidth(360)
        self._build()
        self._update_enabled()
        self._refresh()

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
        self.run_button.clicked.connect(self.run_requested)
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
            self.precision_combo.setItemData(self.precision_combo.count() - 1, _PRECISION_TIPS.get(p, ""),
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
        box.addLayout(form)

        self.resident_check = QCheckBox("Keep data on the device (resident)")
        self.resident_check.setToolTip("Copy the whole dataset to the device once, so no step waits for data.")
        self.channels_last_check = QCheckBox("channels_last")
        self.channels_last_check.setToolTip("Store images as NHWC; often faster for convolutions on GPUs.")
        self.compile_check = QCheckBox("torch.compile")
        self.compile_check.setToolTip("Compile the model first; the compile time shows up in the warm-up.")
        if getattr(sys, "frozen", False):
            self.compile_check.setEnabled(False)
            self.compile_check.setToolTip("torch.compile needs a C++ compiler, which the app does not carry; "
                                          "install MPS Studio with pip (README, Install) to use it.")
        for check in (self.resident_check, self.channels_last_check, self.compile_check):
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

    # ------------------------------------------------------------------------------------------- catalog

    def set_catalog(self, models: list, datasets: list, devices: list) -> None:
        """Fill the form with the engine's models, datasets and devices; enable it and select the defaults."""
        first = not self._loaded
        keep = self._pending or (RunConfig() if first else self._form_config())
        checked = set(self.checked_devices())
        self._quiet += 1
        try:
            self._model_infos = {m.name: m for m in models}
            self._dataset_infos = {d.name: d for d in datasets}
            self._fill_models(models)
            self._fill_datasets(datasets)
            self._fill_devices(devices)
            self._loaded = True
            self._apply(keep, check_all_available=first and self._pending is None)
            if not first:  # a refreshed catalog keeps the user's device choices
                for row in self._device_rows:
                    row.checkbox.setChecked(row.device.available and row.device.id in checked)
                self._update_precisions()
            self._pending = None
            self._pending_devices = None
        finally:
            self._quiet -= 1
        self._update_enabled()
        self._refresh()
        self.changed.emit()

    @staticmethod
    def _fill_named(combo, infos: list) -> None:
        """Items named by `info.name`, each with its description as tooltip."""
        combo.clear()
        for info in infos:
            combo.addItem(info.name, info.name)
            combo.setItemData(combo.count() - 1, info.description, Qt.ItemDataRole.ToolTipRole)

    def _fill_models(self, models: list) -> None:
        combo = self.model_combo
        self._fill_named(combo, models)
        combo.insertSeparator(combo.count())
        combo.addItem("Choose .py File…", _CHOOSE_FILE)
        combo.setItemData(combo.count() - 1, "Use your own model: a .py file that defines "
                          "build_model(num_classes, input_shape) returning a torch.nn.Module. "
                          "Loading a model file runs its code.", Qt.ItemDataRole.ToolTipRole)

    def _fill_datasets(self, datasets: list) -> None:
        self._fill_named(self.dataset_combo, datasets)
        for path, summary in self._folder_summaries.items():
            self._insert_folder(path, summary)

    def _fill_devices(self, devices: list) -> None:
        for row in self._device_rows:
            self._devices_box.removeWidget(row)
            row.deleteLater()
        self._devices = list(devices)
        self._device_rows = []
        for device in devices:
            row = DeviceRow(device)
            row.toggled.connect(self._on_device_toggled)
            self._devices_box.addWidget(row)
            self._device_rows.append(row)

    # ------------------------------------------------------------------------------------------- datasets

    def add_folder_dataset(self, path: str, summary: str) -> None:
        """Add a validated image folder ("📁 name") to the dataset list and select it; a known path is reselected."""
        index = self._folder_index(path)
        if index < 0:
            self._folder_summaries[path] = summary
            index = self._insert_folder(path, summary)
        else:
            path = self.dataset_combo.itemData(index)
            self._folder_summaries[path] = summary
            self.dataset_combo.setItemData(index, self._folder_tip(path, summary), Qt.ItemDataRole.ToolTipRole)
        self.dataset_combo.setCurrentIndex(index)
        self._refresh()

    def _folder_index(self, path: str) -> int:
        wanted = os.path.normpath(os.path.expanduser(path))
        for i in range(self.dataset_combo.count()):
            data = self.dataset_combo.itemData(i)
            if data and data not in self._dataset_infos and os.path.normpath(os.path.expanduser(data)) == wanted:
                return i
        return -1

    @staticmethod
    def _folder_tip(path: str, summary: str) -> str:
        return f"{path}\n{summary}" if summary else path

    def _insert_folder(self, path: str, summary: str) -> int:
        combo = self.dataset_combo
        if combo.count() == len(self._dataset_infos) and self._dataset_infos:
            combo.insertSeparator(combo.count())
        name = Path(path).expanduser().name or path
        combo.addItem(f"{_FOLDER_ICON} {name}", path)
        combo.setItemData(combo.count() - 1, self._folder_tip(path, summary), Qt.ItemDataRole.ToolTipRole)
        return combo.count() - 1

    # ------------------------------------------------------------------------------------------- models

    def _ask_model_file(self) -> str:
        """The file dialog for a user's model; '' when cancelled. (Tests replace this method.)"""
        path, _ = QFileDialog.getOpenFileName(self, "Choose a Model File", str(Path.home()),
                                              "Python files (*.py)")
        return path

    def _add_model_file(self, path: str) -> int:
        combo = self.model_combo
        index = combo.findData(path)
        if index >= 0:
            return index
        from ..engine import models

        index = combo.findData(_CHOOSE_FILE) - 1  # before the separator that precedes "Choose .py File…"
        icon = self.style().standardIcon(QStyle.StandardPixmap.SP_FileIcon)
        combo.insertItem(index, icon, Path(path).name, path)
        combo.setItemData(index, f"{path}\n{models.user_model_warning(path)}", Qt.ItemDataRole.ToolTipRole)
        return index

    def _on_model_index(self, index: int) -> None:
        if self.model_combo.itemData(index) != _CHOOSE_FILE:
            self._model_index = index
            self.model_combo.setToolTip(self.model_combo.itemData(index, Qt.ItemDataRole.ToolTipRole) or "")
            self._emit_changed()
            return
        if self._quiet:
            return
        path = self._ask_model_file()
        target = self._add_model_file(path) if path else self._model_index
        self.model_combo.setCurrentIndex(target)

    def _on_dataset_index(self, index: int) -> None:
        self.dataset_combo.setToolTip(self.dataset_combo.itemData(index, Qt.ItemDataRole.ToolTipRole) or "")
        self._emit_changed()

    # ------------------------------------------------------------------------------------------- devices

    def checked_devices(self) -> list[str]:
        """Ids of the checked, available devices, in the catalog's order."""
        return [row.device.id for row in self._device_rows if row.checked]

    def _checked_device_objects(self) -> list:
        return [row.device for row in self._device_rows if row.checked]

    def _on_device_toggled(self, _checked: bool) -> None:
        self._update_precisions()
        self._update_button()
        self._emit_changed()

    def _update_precisions(self) -> None:
        """Disable precisions a checked device cannot run (the reason becomes the tooltip); fall back to fp32."""
        from ..engine import devices as engine_devices

        checked = self._checked_device_objects()
        model = self.precision_combo.model()
        for i in range(self.precision_combo.count()):
            precision = self.precision_combo.itemData(i)
            reasons: list[str] = []
            for device in checked:
                try:
                    reason = engine_devices.precision_unsupported_reason(device, precision)
                except Exception as exc:  # a device that cannot even be asked cannot run it either
                    reason = f"{precision} could not be checked on {device.id} ({exc})"
                if reason and reason not in reasons:
                    reasons.append(reason)
            model.item(i).setEnabled(not reasons)
            tip = "\n".join(reasons) if reasons else _PRECISION_TIPS.get(precision, "")
            self.precision_combo.setItemData(i, tip, Qt.ItemDataRole.ToolTipRole)
        if not self._precision_enabled(self.precision_combo.currentIndex()):
            self.precision_combo.setCurrentIndex(self.precision_combo.findData("fp32"))
        self._on_precision_index(self.precision_combo.currentIndex(), emit=False)

    def _precision_enabled(self, index: int) -> bool:
        item = self.precision_combo.model().item(index)
        return item is not None and item.isEnabled()

    def _on_precision_index(self, index: int, emit: bool = True) -> None:
        self.precision_combo.setToolTip(self.precision_combo.itemData(index, Qt.ItemDataRole.ToolTipRole) or "")
        if emit:
            self._emit_changed()

    # ------------------------------------------------------------------------------------------- length, advanced

    def _on_length_unit(self, _index: int) -> None:
        mode = self.length_unit.currentData()
        if mode == self._length_mode:
            return
        self._length_mode = mode
        self._quiet += 1
        try:
            self.length_spin.setValue(self._steps_value if mode == "steps" else self._epochs_value)
        finally:
            self._quiet -= 1
        self._emit_changed()

    def _on_length_value(self, value: int) -> None:
        if self._length_mode == "steps":
            self._steps_value = value
        else:
            self._epochs_value = value
        self._emit_changed()

    def set_advanced_open(self, opened: bool) -> None:
        """Show or hide the Advanced options (collapsed by default)."""
        self.advanced_toggle.setArrowType(Qt.ArrowType.DownArrow if opened else Qt.ArrowType.RightArrow)
        self.advanced.setVisible(opened)

    # ------------------------------------------------------------------------------------------- configs

    def configs(self) -> list[RunConfig]:
        """One RunConfig per checked device, identical but for `device` (the engine validates them)."""
        if not self._loaded:
            return []
        base = self._form_config()
        return [base.with_device(device) for device in self.checked_devices()]

    def _form_config(self) -> RunConfig:
        """The form's choices on top of the fields it does not show; `device` is left as it was."""
        model = self.model_combo.currentData()
        if model in (None, _CHOOSE_FILE):
            model = self._base.model
        steps = self.length_spin.value() if self._length_mode == "steps" else None
        epochs = self.length_spin.value() if self._length_mode == "epochs" else None
        return replace(
            self._base,
            model=model,
            dataset=self.dataset_combo.currentData() or self._base.dataset,
            batch_size=self.batch_spin.value(),
            steps=steps,
            epochs=epochs,
            precision=self.precision_combo.currentData() or "fp32",
            lr=float(self.lr_box.value()),
            optimizer=self.optimizer_combo.currentData(),
            warmup_steps=self.warmup_spin.value(),
            workers=self.workers_spin.value(),
            mode=self.mode_combo.currentData(),
            resident=self.resident_check.isChecked(),
            channels_last=self.channels_last_check.isChecked(),
            compile=self.compile_check.isChecked(),
            options=dict(self._base.options),
        )

    def apply_config(self, config: RunConfig, devices: list[str] | None = None) -> None:
        """Set the form from a config (restoring the last setup); `devices`: every device to check (a comparison).

        Before set_catalog it waits for the catalog."""
        self._pending_devices = devices
        if not self._loaded:
            self._pending = config
            return
        self._quiet += 1
        try:
            self._apply(config, check_all_available=False)
        finally:
            self._quiet -= 1
        self._refresh()
        self.changed.emit()

    def _apply(self, config: RunConfig, check_all_available: bool) -> None:
        self._base = replace(config, options=dict(config.options))
        index = self.model_combo.findData(config.model)
        if index < 0 and config.model.lower().endswith(".py"):
            index = self._add_model_file(config.model)
        if index >= 0:
            self.model_combo.setCurrentIndex(index)
        index = self.dataset_combo.findData(config.dataset)
        if index < 0 and config.dataset not in self._dataset_infos:
            index = self._folder_index(config.dataset)
            if index < 0:
                self._folder_summaries[config.dataset] = ""
                index = self._insert_folder(config.dataset, "")
        if index >= 0:
            self.dataset_combo.setCurrentIndex(index)

        known = {row.device.id for row in self._device_rows if row.device.available}
        wanted = set(getattr(self, "_pending_devices", None) or [config.device]) & known
        for row in self._device_rows:
            if check_all_available:
                row.checkbox.setChecked(row.device.available)
            elif wanted:
                row.checkbox.setChecked(row.device.id in wanted)
        if not self.checked_devices():  # the config's device is gone (a restored MPS setup on another machine)
            first_available = next((row for row in self._device_rows if row.device.available), None)
            if first_available is not None:
                first_available.checkbox.setChecked(True)

        self.batch_spin.setValue(config.batch_size)
        if config.steps is not None:
            self._steps_value = config.steps
            self.length_unit.setCurrentIndex(self.length_unit.findData("steps"))
        else:
            self._epochs_value = config.epochs or self._epochs_value
            self.length_unit.setCurrentIndex(self.length_unit.findData("epochs"))
        self.length_spin.setValue(self._steps_value if self._length_mode == "steps" else self._epochs_value)

        self._update_precisions()
        index = self.precision_combo.findData(config.precision)
        if index >= 0 and self._precision_enabled(index):
            self.precision_combo.setCurrentIndex(index)
        self.lr_box.setValue(config.lr)
        self._select(self.optimizer_combo, config.optimizer)
        self.warmup_spin.setValue(config.warmup_steps)
        self.workers_spin.setValue(config.workers)
        self._select(self.mode_combo, config.mode)
        self.resident_check.setChecked(config.resident)
        self.channels_last_check.setChecked(config.channels_last)
        self.compile_check.setChecked(config.compile)
        self._update_button()

    @staticmethod
    def _select(combo: QComboBox, value: str) -> None:
        index = combo.findData(value)
        if index >= 0:
            combo.setCurrentIndex(index)

    # ------------------------------------------------------------------------------------------- state

    def set_running(self, running: bool) -> None:
        """Disable editing while a run is in progress; the window's Stop button is elsewhere."""
        self._running = running
        self._update_enabled()
        self._update_button()

    def _update_enabled(self) -> None:
        editable = self._loaded and not self._running
        self._form.setEnabled(editable)
        self._update_button()

    def _update_button(self) -> None:
        checked = self._checked_device_objects()
        button = self.run_button
        if self._running:
            button.setText("Running…")
        elif len(checked) > 1:
            button.setText(f"Compare {len(checked)} devices")
        elif checked:
            button.setText(f"Run on {_run_target(checked[0])}")
        else:
            button.setText("Run")
        button.setEnabled(self._loaded and not self._running and bool(checked))
        if not self._loaded:
            button.setToolTip(LOADING_TEXT)
        elif not checked:
            button.setToolTip(NO_DEVICE_TIP)
        else:
            button.setToolTip(RUN_TIP)

    def _emit_changed(self, *_args) -> None:
        if self._quiet:
            return
        self._refresh()
        self.changed.emit()

    def _refresh(self) -> None:
        self.summary.setText(self.summary_text())

    # ------------------------------------------------------------------------------------------- summary

    def summary_text(self) -> str:
        """One line on the dataset and the model, e.g. 'shapes · 6,000 + 1,000 images · … — mlp · 1.5 M parameters'."""
        if not self._loaded:
            return LOADING_TEXT
        model = self.model_combo.currentData()
        dataset = self.dataset_combo.currentData()
        if model in (None, _CHOOSE_FILE) or dataset is None:
            return ""
        spec, facts = self._dataset_spec_and_facts(model, dataset)
        model_name = self._model_title(model)
        params = self._parameters(model, spec)
        if isinstance(params, int):
            text = f"{facts} — {model_name} · {human_count(params)} parameters"
        elif params:
            text = f"{facts} — {model_name}: {params}"
        else:
            text = f"{facts} — {model_name}"
        if model not in self._model_infos:
            text += f"\n{MODEL_FILE_WARNING}"
        return text

    def _model_title(self, model: str) -> str:
        return model if model in self._model_infos else Path(model).name

    def _dataset_spec_and_facts(self, model: str, dataset: str) -> tuple[DataSpec | None, str]:
        info = self._dataset_infos.get(dataset)
        if info is not None:
            if dataset == "synthetic":
                return self._model_default_spec(model), dataset_facts(info, None)
            spec = _NAMED_SPECS.get(dataset)
            return spec, dataset_facts(info, spec)
        summary = self._folder_summaries.get(dataset, "")
        name = Path(dataset).expanduser().name or dataset
        facts = f"{name} · {_times(summary)}" if summary else name
        preferred = getattr(self._model_infos.get(model), "preferred_image_size", None)
        return folder_spec(summary, preferred, self._base.image_size), facts

    def _model_default_spec(self, model: str) -> DataSpec | None:
        info = self._model_infos.get(model)
        if info is not None:
            return info.default_spec
        try:
            from ..engine import models

            return models.get_model_info(model).default_spec
        except Exception:
            return None

    def _parameters(self, model: str, spec: DataSpec | None) -> int | str:
        """The model's parameter count for the data (cached); the error's sentence if it cannot be built."""
        if spec is None:
            return ""
        key = (model, spec)
        if key not in self._param_cache:
            from ..engine import models
            from ..engine.errors import UserError

            try:
                self._param_cache[key] = models.parameter_count(model, models.input_spec_for(model, spec))
            except UserError as exc:
                self._param_cache[key] = str(exc)
            except Exception as exc:  # a user's file can raise anything; the sentence still belongs here
                self._param_cache[key] = f"the model could not be built ({_short(f'{type(exc).__name__}: {exc}')})"
        return self._param_cache[key]
