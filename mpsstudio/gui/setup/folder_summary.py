"""What a dropped or opened folder holds, before anything runs: images per class with a few thumbnails, the
training/validation split a run will use, and the image size the chosen model will really get."""

from __future__ import annotations

from pathlib import Path

from PySide6.QtCore import QSize, Qt
from PySide6.QtGui import QImageReader, QPixmap
from PySide6.QtWidgets import QDialog, QHBoxLayout, QHeaderView, QLabel, QTableWidgetItem, QVBoxLayout, QWidget

from ...engine.data.folder import FolderReport, plan
from ...engine.basics.formatting import plural, printable
from ..style import close_row, facts_table

THUMB = 48  # pixels per side of a thumbnail
MAX_THUMB_BYTES = 32 * 1024**2  # a bigger file is not decoded for a thumbnail


def thumbnail(path: Path) -> QPixmap | None:
    """A small picture of an image file, scaled while decoding; None for anything that does not decode."""
    try:
        if path.stat().st_size > MAX_THUMB_BYTES:
            return None
    except OSError:
        return None
    reader = QImageReader(str(path))
    reader.setAutoTransform(True)
    size = reader.size()
    if size.isValid() and size.width() > 0 and size.height() > 0:
        reader.setScaledSize(size.scaled(QSize(THUMB, THUMB), Qt.AspectRatioMode.KeepAspectRatio))
    image = reader.read()
    if image.isNull():
        return None
    return QPixmap.fromImage(image.scaled(THUMB, THUMB, Qt.AspectRatioMode.KeepAspectRatio,
                                          Qt.TransformationMode.SmoothTransformation))


class FolderSummary(QDialog):
    """A window (not modal) describing one checked folder; `model_size` is what the chosen model receives,
    (width, height), from the engine (models.input_spec_for), or None when it cannot be known here."""

    def __init__(self, report: FolderReport, model: str, model_size: tuple[int, int] | None, seed: int = 0,
                 parent=None):
        super().__init__(parent)
        name = report.root.name or str(report.root)
        self.setWindowTitle(f"Dataset: {printable(name)}")
        self.setModal(False)
        self.plan = plan(report, seed=seed)
        colour = "grayscale" if report.channels == 1 else "RGB"
        common = report.sizes[0] if report.sizes else report.target_size
        size_line = f"Most images are {common[0]}×{common[1]}"
        if model_size is not None:
            size_line += f"; <b>{printable(Path(model).name)} gets every image as {model_size[0]}×{model_size[1]} {colour}</b>"
        else:
            size_line += f"; a model file's input size is known once it runs ({colour})"
        p = self.plan
        lines = [f"<b>{plural(len(report.classes), 'class', 'classes')}, {report.total:,} images</b> in "
                 f"{printable(str(report.root))}",
                 f"Split for a run with seed {p.seed}: {p.train:,} training + {p.val:,} validation images "
                 f"({p.val_fraction:.0%} of each class, the same every time).",
                 size_line + "."]
        if report.skipped_note:
            lines.append(printable(report.skipped_note[0].upper() + report.skipped_note[1:]) + ".")
        if report.loose_images:
            lines.append(f"{plural(report.loose_images, 'image')} directly in the folder (not in a class folder) "
                         "are left out.")
        self.text = QLabel("<br>".join(lines))
        self.text.setWordWrap(True)
        self.text.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.table = facts_table(("Class", "Images", "Training", "Validation", "Samples"), len(p.classes))
        header = self.table.horizontalHeader()
        for col in range(4):
            header.setSectionResizeMode(col, QHeaderView.ResizeMode.ResizeToContents)
        header.setStretchLastSection(True)
        self.table.verticalHeader().setDefaultSectionSize(THUMB + 8)
        for i, (cls, total, train, val) in enumerate(p.classes):
            for col, value in enumerate((printable(cls), f"{total:,}", f"{train:,}", f"{val:,}")):
                item = QTableWidgetItem(value)
                if col:
                    item.setTextAlignment(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
                self.table.setItem(i, col, item)
            self.table.setCellWidget(i, 4, self._thumbs(p.samples.get(cls, [])))
        layout = QVBoxLayout(self)
        layout.addWidget(self.text)
        layout.addWidget(self.table, 1)
        layout.addLayout(close_row(self))
        self.resize(720, min(640, 220 + (THUMB + 8) * len(p.classes)))

    def _thumbs(self, paths: list[Path]) -> QWidget:
        box = QWidget()
        row = QHBoxLayout(box)
        row.setContentsMargins(4, 2, 4, 2)
        row.setSpacing(4)
        self.thumbs_shown = getattr(self, "thumbs_shown", 0)
        for path in paths:
            pixmap = thumbnail(path)
            if pixmap is None:
                continue
            label = QLabel()
            label.setPixmap(pixmap)
            label.setToolTip(printable(path.name))
            row.addWidget(label)
            self.thumbs_shown += 1
        row.addStretch(1)
        return box
