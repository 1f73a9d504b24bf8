"""The Dataset section's input rows: what one sample is.

- Synthetic data: "Input" (C × H × W for images, L for tokens) and "Classes"; left empty, the model's own
  (a built-in's, or what a user's file declares: INPUT_SHAPE, NUM_CLASSES), shown as the placeholder.
- A folder of images: "Image size", the side its images are decoded at (the model's preferred size when left
  at "model's").
- A named dataset has its own shape: no rows.

They become RunConfig.input_shape, num_classes and image_size; what the engine makes of them
(run.setup.synthetic_input) is what the summary shows. Text that is not a shape keeps Run disabled, saying why.
"""

from __future__ import annotations

from PySide6.QtCore import QObject, Qt, Signal
from PySide6.QtWidgets import QFormLayout, QLineEdit, QVBoxLayout, QWidget

from ...engine.basics.config import MAX_CLASSES, MAX_IMAGE_SIZE, MIN_IMAGE_SIZE, parse_input_shape
from ...engine.basics.errors import UserError
from .rules import CHOOSE_FILE
from .widgets import FormRows, spin


SYNTHETIC = "synthetic"
_MODELS = "model's"
INPUT_TIP = ("What one synthetic sample is: C × H × W for images (e.g. 3 × 224 × 224) or L for a sequence of "
             "tokens (e.g. 128). Empty: the model's own input.")
CLASSES_TIP = "How many classes the synthetic labels (and the model's output) have."
IMAGE_SIZE_TIP = "The side, in pixels, the folder's images are decoded and resized to."


def _shape_text(spec) -> str:
    if spec is None:
        return ""
    if spec.kind == "image":
        return f"{spec.channels} × {spec.height} × {spec.width}"
    return f"{spec.seq_len} tokens"


def input_kind(dataset, model, dataset_infos: dict, model_infos: dict) -> str:
    """'synthetic', 'folder' or '' (a named dataset, or a model file that makes its own batches)."""
    if dataset is None:
        return ""
    if str(dataset).lower() == SYNTHETIC:
        return "" if makes_own_batches(model, model_infos) else SYNTHETIC
    from ...engine.basics.spec import is_text_dataset

    if is_text_dataset(str(dataset)):  # a language model's text: its sequences are the engine's (its default length)
        return ""
    return "folder" if dataset not in dataset_infos else ""


def makes_own_batches(model, model_infos: dict) -> bool:
    """A user's file with make_batch: its batches are its own (read from the file, never run here)."""
    if model in (None, CHOOSE_FILE) or model in model_infos:
        return False
    try:
        from ...engine.models import registry as models

        declared = models.get_model_info(model).declared
    except Exception:
        return False
    return bool(declared is not None and declared.make_batch)


class InputRows(QObject):
    """Input, Classes and Image size: shown for the data they apply to (`kind`, from input_kind), with the model's
    own as the default. Its rows are made with the form's others (`rows`: their labels aligned); `changed` on an edit."""

    changed = Signal()

    def __init__(self, layout: QVBoxLayout, form: FormRows, parent: QWidget) -> None:
        super().__init__(parent)
        self.box = QWidget()
        rows: QFormLayout = form.new_form()
        self.box.setLayout(rows)
        self.input_edit = QLineEdit()
        self.input_edit.setToolTip(INPUT_TIP)
        self.input_edit.setAlignment(Qt.AlignmentFlag.AlignRight)
        self.input_edit.setClearButtonEnabled(True)
        self.input_edit.textChanged.connect(lambda _text: self.changed.emit())
        form.row(rows, "Input", self.input_edit)
        self.classes_spin = spin(1, MAX_CLASSES, 1, CLASSES_TIP)  # 1: the model's own (one class is none)
        self.classes_spin.valueChanged.connect(lambda _value: self.changed.emit())
        form.row(rows, "Classes", self.classes_spin)
        self.image_size_spin = spin(MIN_IMAGE_SIZE - 1, MAX_IMAGE_SIZE, MIN_IMAGE_SIZE - 1, IMAGE_SIZE_TIP)
        self.image_size_spin.setSuffix(" px")
        self.image_size_spin.valueChanged.connect(lambda _value: self.changed.emit())
        form.row(rows, "Image size", self.image_size_spin)
        layout.addWidget(self.box)

    def show_for(self, kind: str, own, preferred: int | None) -> None:
        """Show the rows `kind` of data takes; `own`: the model's own input (a DataSpec, or None), `preferred`: the
        image size it prefers."""
        rows = self.box.layout()
        assert isinstance(rows, QFormLayout)
        rows.setRowVisible(self.input_edit, kind == SYNTHETIC)
        rows.setRowVisible(self.classes_spin, kind == SYNTHETIC)
        rows.setRowVisible(self.image_size_spin, kind == "folder")
        self.box.setVisible(bool(kind))
        self.input_edit.setPlaceholderText(f"{_shape_text(own)} ({_MODELS})" if own is not None else _MODELS)
        self.classes_spin.setSpecialValueText(f"{own.num_classes} ({_MODELS})" if own is not None else _MODELS)
        self.image_size_spin.setSpecialValueText(f"{preferred} px ({_MODELS})" if preferred else "folder's")

    def fields(self, kind: str) -> dict:
        """input_shape, num_classes and image_size for the form's config; a shape that does not parse is left out
        (problem() says why, and Run stays disabled)."""
        if kind == SYNTHETIC:
            try:
                shape = parse_input_shape(self.input_edit.text()) if self.input_edit.text().strip() else None
            except UserError:
                shape = None
            classes = self.classes_spin.value()
            return {"input_shape": shape, "num_classes": classes if classes >= 2 else None, "image_size": None}
        if kind == "folder":
            size = self.image_size_spin.value()
            return {"input_shape": None, "num_classes": None, "image_size": size if size >= MIN_IMAGE_SIZE else None}
        return {"input_shape": None, "num_classes": None, "image_size": None}

    def problem(self, kind: str) -> str:
        """One sentence when the Input text is not a shape; '' otherwise."""
        text = self.input_edit.text().strip()
        if kind != SYNTHETIC or not text:
            return ""
        try:
            parse_input_shape(text)
        except UserError as exc:
            return str(exc)
        return ""

    def apply(self, config, own) -> None:
        """A config's input put back; `own`: the model's own input (for --image-size on synthetic data)."""
        shape = config.input_shape
        if shape is None and config.image_size and str(config.dataset).lower() == SYNTHETIC:
            if own is not None and own.kind == "image":  # the model's C × size²
                shape = [own.channels, config.image_size, config.image_size]
        self.input_edit.setText(" × ".join(str(v) for v in shape) if shape else "")
        self.classes_spin.setValue(config.num_classes or 1)
        self.image_size_spin.setValue(config.image_size or MIN_IMAGE_SIZE - 1)
