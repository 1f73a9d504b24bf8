"""The Dataset row: the catalogue's datasets and the folders the user added (the platform's folder icon, the engine's
report as tooltip), and Open Folder…."""

from __future__ import annotations

import os
from pathlib import Path

from PySide6.QtCore import QObject, Qt, Signal
from PySide6.QtWidgets import QComboBox, QHBoxLayout, QPushButton, QStyle, QVBoxLayout, QWidget

from .summary import SetupFacts
from .widgets import narrow, section


class DatasetChoice(QObject):
    """The dataset the form trains on; `changed` when it changes, `open_folder_requested` for Open Folder…. The folders
    and their reports are the facts' (`SetupFacts.folder_reports`): a refreshed catalogue keeps them."""

    changed = Signal()
    open_folder_requested = Signal()

    def __init__(self, layout: QVBoxLayout, facts: SetupFacts, parent: QWidget) -> None:
        super().__init__(parent)
        self._facts = facts
        section(layout, "Dataset")
        row = QHBoxLayout()
        row.setSpacing(6)
        self.combo = narrow(QComboBox())
        self.combo.currentIndexChanged.connect(self._on_index)
        self.open_folder_button = QPushButton("Open Folder…")
        self.open_folder_button.setToolTip(
            "Use your own images: a folder with one subfolder of images per class (you can also drop it here).")
        self.open_folder_button.clicked.connect(self.open_folder_requested)
        row.addWidget(self.combo, 1)
        row.addWidget(self.open_folder_button)
        layout.addLayout(row)

    def current(self):
        """The chosen dataset's name or folder path; None before the catalogue."""
        return self.combo.currentData()

    def fill(self, datasets: list) -> None:
        """The catalogue's datasets (their descriptions as tooltips), then the folders already added."""
        self.combo.clear()
        for info in datasets:
            self.combo.addItem(info.name, info.name)
            self.combo.setItemData(self.combo.count() - 1, info.description, Qt.ItemDataRole.ToolTipRole)
        for path, report in self._facts.folder_reports.items():
            self._insert_folder(path, report)
        for path, text in self._facts.text_summaries.items():
            self._insert_folder(path, None, text)

    def select(self, dataset: str) -> None:
        """Show `dataset`; a folder not in the list yet is added (unchecked: no report)."""
        index = self.combo.findData(dataset)
        if index < 0 and dataset not in self._facts.dataset_infos:
            index = self._folder_index(dataset)
            if index < 0:
                self._facts.folder_reports[dataset] = None
                index = self._insert_folder(dataset, None)
        if index >= 0:
            self.combo.setCurrentIndex(index)

    def select_synthetic(self) -> None:
        index = self.combo.findData("synthetic")
        if index >= 0:
            self.combo.setCurrentIndex(index)

    def add_folder(self, path: str, report) -> None:
        """A folder the engine checked (its FolderReport), selected; a known path is reselected with the new report."""
        index = self._folder_index(path)
        if index < 0:
            self._facts.folder_reports[path] = report
            index = self._insert_folder(path, report)
        else:
            path = self.combo.itemData(index)
            self._facts.folder_reports[path] = report
            self.combo.setItemData(index, _folder_tip(path, report), Qt.ItemDataRole.ToolTipRole)
        self.combo.setCurrentIndex(index)

    def add_text(self, path: str, text: dict) -> None:
        """A text dataset the engine tokenized for the model folder (run.setup.text_summary), selected."""
        index = self._folder_index(path)
        self._facts.text_summaries[path] = text
        if index < 0:
            index = self._insert_folder(path, None, text)
        else:
            self.combo.setItemData(index, _text_tip(path, text), Qt.ItemDataRole.ToolTipRole)
        self.combo.setCurrentIndex(index)

    def _folder_index(self, path: str) -> int:
        wanted = os.path.normpath(os.path.expanduser(path))
        for i in range(self.combo.count()):
            data = self.combo.itemData(i)
            if data and data not in self._facts.dataset_infos and os.path.normpath(os.path.expanduser(data)) == wanted:
                return i
        return -1

    def _insert_folder(self, path: str, report, text: dict | None = None) -> int:
        combo = self.combo
        if combo.count() == len(self._facts.dataset_infos) and self._facts.dataset_infos:
            combo.insertSeparator(combo.count())
        name = Path(path).expanduser().name or path
        # the platform's folder (or file) icon, not an emoji: a font without one draws a missing-glyph box
        pixmap = QStyle.StandardPixmap.SP_FileIcon if text is not None and Path(path).is_file() else \
            QStyle.StandardPixmap.SP_DirIcon
        combo.addItem(combo.style().standardIcon(pixmap), name, path)
        tip = _text_tip(path, text) if text is not None else _folder_tip(path, report)
        combo.setItemData(combo.count() - 1, tip, Qt.ItemDataRole.ToolTipRole)
        return combo.count() - 1

    def _on_index(self, index: int) -> None:
        self.combo.setToolTip(self.combo.itemData(index, Qt.ItemDataRole.ToolTipRole) or "")
        self.changed.emit()


def _folder_tip(path: str, report) -> str:
    return f"{path}\n{report.summary()}" if report is not None else path


def _text_tip(path: str, text: dict) -> str:
    """A text dataset's tooltip: its path, the engine's sentence and notes, and its first example."""
    notes = "\n".join(f"· {n}" for n in text.get("notes") or [])
    return f"{path}\n{text['sentence']}.\n{notes}\n\nFirst example:\n{text.get('preview') or ''}"

