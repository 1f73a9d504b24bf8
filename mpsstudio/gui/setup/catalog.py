"""Filling the setup form from the engine's catalogue; folders added as datasets."""

from __future__ import annotations

import os
from pathlib import Path

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QStyle

from ...engine.basics.request import RunRequest
from .rules import CHOOSE_FILE, RUN_SCRIPT
from .widgets import DeviceRow
from ..style import keys


class CatalogMixin:
    """The catalogue in the form: models, datasets (with the folders the user added) and devices, each unavailable device saying why."""

    def set_catalog(self, models: list, datasets: list, devices: list) -> None:
        """Fill the form with the engine's models, datasets and devices; enable it and select the defaults."""
        first = not self._loaded
        keep = self._pending or (RunRequest().settings if first else self._form_config())
        checked = set(self.checked_devices())
        self._quiet += 1
        try:
            self.facts.model_infos = {m.name: m for m in models}
            self.facts.dataset_infos = {d.name: d for d in datasets}
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
        combo.addItem("Choose .py File…", CHOOSE_FILE)
        combo.setItemData(combo.count() - 1, "Use your own model: a .py file that defines "
                          "build_model(num_classes, input_shape) returning a torch.nn.Module. "
                          "Loading a model file runs its code.", Qt.ItemDataRole.ToolTipRole)
        combo.addItem("Your Training Script…", RUN_SCRIPT)
        combo.setItemData(combo.count() - 1, "Measure your own training script (its data, loss and loop) on the "
                          "checked devices: Run > Run Your Training Script… "
                          f"({keys('Ctrl+Shift+R')}).", Qt.ItemDataRole.ToolTipRole)

    def _fill_datasets(self, datasets: list) -> None:
        self._fill_named(self.dataset_combo, datasets)
        for path, report in self.facts.folder_reports.items():
            self._insert_folder(path, report)

    def _fill_devices(self, devices: list) -> None:
        for row in self._device_rows:
            self._devices_box.removeWidget(row)
            row.hide()  # gone now, not when the event loop gets to deleting it
            row.deleteLater()
        self._device_rows = []
        for device in devices:
            row = DeviceRow(device)
            row.toggled.connect(self._on_device_toggled)
            self._devices_box.addWidget(row)
            self._device_rows.append(row)
        self.set_gpu_count(sum(1 for d in devices if d.kind == "cuda" and d.available))

    def add_folder_dataset(self, path: str, report) -> None:
        """Add a folder the engine checked (its FolderReport) to the dataset list as its name beside the platform's folder icon and select it;
        a known path is reselected."""
        index = self._folder_index(path)
        if index < 0:
            self.facts.folder_reports[path] = report
            index = self._insert_folder(path, report)
        else:
            path = self.dataset_combo.itemData(index)
            self.facts.folder_reports[path] = report
            self.dataset_combo.setItemData(index, self._folder_tip(path, report), Qt.ItemDataRole.ToolTipRole)
        self.dataset_combo.setCurrentIndex(index)
        self._refresh()

    def _folder_index(self, path: str) -> int:
        wanted = os.path.normpath(os.path.expanduser(path))
        for i in range(self.dataset_combo.count()):
            data = self.dataset_combo.itemData(i)
            if data and data not in self.facts.dataset_infos and os.path.normpath(os.path.expanduser(data)) == wanted:
                return i
        return -1

    @staticmethod
    def _folder_tip(path: str, report) -> str:
        return f"{path}\n{report.summary()}" if report is not None else path

    def _insert_folder(self, path: str, report) -> int:
        combo = self.dataset_combo
        if combo.count() == len(self.facts.dataset_infos) and self.facts.dataset_infos:
            combo.insertSeparator(combo.count())
        name = Path(path).expanduser().name or path
        # the platform's folder icon, not an emoji: a font without one draws a missing-glyph box
        icon = combo.style().standardIcon(QStyle.StandardPixmap.SP_DirIcon)
        combo.addItem(icon, name, path)
        combo.setItemData(combo.count() - 1, self._folder_tip(path, report), Qt.ItemDataRole.ToolTipRole)
        return combo.count() - 1
