"""How the form's choices depend on each other."""

from __future__ import annotations

from pathlib import Path

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QFileDialog, QStyle

from ...engine.basics.spec import DataSpec
from . import rules
from .rules import CHOOSE_FILE, RUN_SCRIPT


class ChoicesMixin:
    """What the user's choices allow: a model file (asked for, checked after consent), the precisions every checked device runs, steps or epochs, the Advanced section."""

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
        from ...engine.models import registry as models

        index = combo.findData(CHOOSE_FILE) - 1  # before the separator that precedes "Choose .py File…"
        icon = self.style().standardIcon(QStyle.StandardPixmap.SP_FileIcon)
        combo.insertItem(index, icon, Path(path).name, path)
        combo.setItemData(index, f"{path}\n{models.user_model_warning(path)}", Qt.ItemDataRole.ToolTipRole)
        return index

    def use_model_folder(self, path: str, description: str) -> None:
        """A Hugging Face model folder as the model (a folder icon beside its name; its description the tooltip), on
        synthetic data: its batches are made for its task."""
        combo = self.model_combo
        index = combo.findData(path)
        if index < 0:
            index = combo.findData(CHOOSE_FILE) - 1
            icon = self.style().standardIcon(QStyle.StandardPixmap.SP_DirIcon)
            combo.insertItem(index, icon, Path(path).name, path)
            combo.setItemData(index, f"{path}\n{description}", Qt.ItemDataRole.ToolTipRole)
        combo.setCurrentIndex(index)
        synthetic = self.dataset_combo.findData("synthetic")
        if synthetic >= 0:
            self.dataset_combo.setCurrentIndex(synthetic)

    def _on_model_index(self, index: int) -> None:
        if self.model_combo.itemData(index) == RUN_SCRIPT:  # not a model: the script's own dialog, the model kept
            self.model_combo.setCurrentIndex(self._model_index)
            if not self._quiet:
                self.script_requested.emit()
            return
        if self.model_combo.itemData(index) != CHOOSE_FILE:
            self._model_index = index
            self.model_combo.setToolTip(self.model_combo.itemData(index, Qt.ItemDataRole.ToolTipRole) or "")
            self.check_model_button.setVisible(self._model_file() is not None)
            self._emit_changed()
            return
        if self._quiet:
            return
        path = self._ask_model_file()
        target = self._add_model_file(path) if path else self._model_index
        self.model_combo.setCurrentIndex(target)
        if path:
            self.check_model_file()  # chosen just now: ask to run it (restoring a setup never does)

    def _model_file(self) -> str | None:
        model = self.model_combo.currentData()
        if model in (None, CHOOSE_FILE, RUN_SCRIPT) or model in self.facts.model_infos or not str(model).endswith(".py"):
            return None  # a built-in, or a model folder (data only: nothing to run to check it)
        return model

    def check_model_file(self) -> bool | str:
        """Build the chosen model file in a separate process, after asking once per file content."""
        path = self._model_file()
        dataset = self.dataset_combo.currentData()
        if path is None or dataset is None:
            return False
        spec = self._dataset_spec_and_facts(path, dataset)[0]
        if spec is None:
            return False
        return self.model_files.check(path, self._file_model_spec(path, spec))

    def confirm_model_file(self) -> bool | str:
        """Before a run: True when no model file is chosen or the user agrees to run its code (see
        ModelFileGuard.confirm)."""
        path = self._model_file()
        return True if path is None else self.model_files.confirm(path)

    @staticmethod
    def _file_model_spec(path: str, spec: DataSpec) -> DataSpec:
        from ...engine.models import registry as models

        return models.input_spec_for(path, spec)  # checks the path only: runs nothing

    def _on_dataset_index(self, index: int) -> None:
        self.dataset_combo.setToolTip(self.dataset_combo.itemData(index, Qt.ItemDataRole.ToolTipRole) or "")
        self._emit_changed()

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
        checked = self._checked_device_objects()
        model = self.precision_combo.model()
        for i in range(self.precision_combo.count()):
            enabled, tip = rules.precision_state(checked, self.precision_combo.itemData(i))
            model.item(i).setEnabled(enabled)
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

    def _on_length_unit(self, _index: int) -> None:
        if not self._length.switch(self.length_unit.currentData()):
            return
        self._quiet += 1
        try:
            self.length_spin.setValue(self._length.shown())
        finally:
            self._quiet -= 1
        self._update_epoch_options()
        self._emit_changed()

    def _update_epoch_options(self) -> None:
        """Early stopping and the best epoch work per epoch: greyed out, saying why, for a steps run."""
        by_epoch = self._length.by_epoch
        tips = self.__dict__.setdefault("_epoch_tips", {})
        for w in (self.patience_spin, self.monitor_combo, self.monitor_mode_combo, self.keep_best_check):
            tip = tips.setdefault(id(w), w.toolTip())
            w.setEnabled(by_epoch)
            w.setToolTip(tip)
            if not by_epoch:
                w.setToolTip("Early stopping and the best epoch watch the validation split after each epoch; set "
                             "the length in epochs to use them.")

    def _on_length_value(self, value: int) -> None:
        self._length.set(value)
        self._emit_changed()

    def set_advanced_open(self, opened: bool) -> None:
        """Show or hide the Advanced options (collapsed by default)."""
        self.advanced_section.set_open(opened)
