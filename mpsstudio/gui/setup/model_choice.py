"""The Model section: the catalogue's models, the user's model files and Hugging Face folders, "Choose .py File…" and
"Your Training Script…" (the script's own dialog), and the Check Model File button."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from PySide6.QtCore import QObject, Qt, Signal
from PySide6.QtWidgets import QComboBox, QFileDialog, QPushButton, QStyle, QVBoxLayout, QWidget

from .rules import CHOOSE_FILE, RUN_SCRIPT
from .summary import SetupFacts
from .widgets import narrow, section
from ..style import keys


class ModelChoice(QObject):
    """The model the form trains. `changed` when it changes; `script_requested` for "Your Training Script…" (the model
    kept); `file_chosen` when the user picked a model file just now (restoring a setup never says it); `check_requested`
    for the Check Model File button. `quiet()`: the form is being set, not edited (nothing is asked then)."""

    changed = Signal()
    script_requested = Signal()
    file_chosen = Signal(str)
    check_requested = Signal()

    def __init__(self, layout: QVBoxLayout, facts: SetupFacts, quiet: Callable[[], bool], parent: QWidget) -> None:
        super().__init__(parent)
        self._facts = facts
        self._quiet = quiet
        self._index = 0  # the model shown: the entry "Choose .py File…" falls back to
        section(layout, "Model", first=True)
        self.combo = narrow(QComboBox())
        self.combo.currentIndexChanged.connect(self._on_index)
        layout.addWidget(self.combo)
        self.check_button = QPushButton("Check Model File")
        self.check_button.setToolTip("Build the model from its file in a separate process (after asking you "
                                     "once) to count its parameters and check its output.")
        self.check_button.setVisible(False)
        self.check_button.clicked.connect(self.check_requested)
        layout.addWidget(self.check_button, 0, Qt.AlignmentFlag.AlignLeft)

    def ask_file(self) -> str:
        """The file dialog for a user's model; '' when cancelled. (Tests replace this method.)"""
        path, _ = QFileDialog.getOpenFileName(self.combo, "Choose a Model File", str(Path.home()),
                                              "Python files (*.py)")
        return path

    def current(self):
        """The chosen model's name or path; None before the catalogue, CHOOSE_FILE while a file is being asked for."""
        return self.combo.currentData()

    def fill(self, models: list) -> None:
        """The catalogue's models, each with its description as tooltip, then the two entries for the user's own."""
        combo = self.combo
        combo.clear()
        for info in models:
            combo.addItem(info.name, info.name)
            combo.setItemData(combo.count() - 1, info.description, Qt.ItemDataRole.ToolTipRole)
        combo.insertSeparator(combo.count())
        combo.addItem("Choose .py File…", CHOOSE_FILE)
        combo.setItemData(combo.count() - 1, "Use your own model: a .py file that defines "
                          "build_model(num_classes, input_shape) returning a torch.nn.Module. "
                          "Loading a model file runs its code.", Qt.ItemDataRole.ToolTipRole)
        combo.addItem("Your Training Script…", RUN_SCRIPT)
        combo.setItemData(combo.count() - 1, "Measure your own training script (its data, loss and loop) on the "
                          "checked devices: Run > Run Your Training Script… "
                          f"({keys('Ctrl+Shift+R')}).", Qt.ItemDataRole.ToolTipRole)

    def select(self, model: str) -> None:
        """Show `model` (a model file not in the list yet is added); an unknown name leaves the choice as it is."""
        index = self.combo.findData(model)
        if index < 0 and model.lower().endswith(".py"):
            index = self.add_file(model)
        if index >= 0:
            self.combo.setCurrentIndex(index)

    def add_file(self, path: str) -> int:
        """A user's model file in the list (its icon, the warning that loading it runs its code); its index."""
        index = self.combo.findData(path)
        if index >= 0:
            return index
        from ...engine.models import registry as models

        return self._insert(path, QStyle.StandardPixmap.SP_FileIcon, models.user_model_warning(path))

    def use_folder(self, path: str, description: str) -> None:
        """A Hugging Face model folder as the model (a folder icon beside its name; its description the tooltip)."""
        index = self.combo.findData(path)
        if index < 0:
            index = self._insert(path, QStyle.StandardPixmap.SP_DirIcon, description)
        self.combo.setCurrentIndex(index)

    def _insert(self, path: str, icon: QStyle.StandardPixmap, tip: str) -> int:
        index = self.combo.findData(CHOOSE_FILE) - 1  # before the separator that precedes "Choose .py File…"
        self.combo.insertItem(index, self.combo.style().standardIcon(icon), Path(path).name, path)
        self.combo.setItemData(index, f"{path}\n{tip}", Qt.ItemDataRole.ToolTipRole)
        return index

    def model_file(self) -> str | None:
        """The chosen user's model file; None for a built-in or a model folder (data only: nothing to run to check)."""
        model = self.current()
        if model in (None, CHOOSE_FILE, RUN_SCRIPT) or model in self._facts.model_infos or not str(model).endswith(".py"):
            return None
        return model

    def _on_index(self, index: int) -> None:
        data = self.combo.itemData(index)
        if data == RUN_SCRIPT:  # not a model: the script's own dialog, the model kept
            self.combo.setCurrentIndex(self._index)
            if not self._quiet():
                self.script_requested.emit()
            return
        if data != CHOOSE_FILE:
            self._index = index
            self.combo.setToolTip(self.combo.itemData(index, Qt.ItemDataRole.ToolTipRole) or "")
            self.check_button.setVisible(self.model_file() is not None)
            self.changed.emit()
            return
        if self._quiet():
            return
        path = self.ask_file()
        self.combo.setCurrentIndex(self.add_file(path) if path else self._index)
        if path:
            self.file_chosen.emit(path)
