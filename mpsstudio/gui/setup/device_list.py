"""The Devices section's checkboxes: one row per device the catalogue found, an unavailable one saying why."""

from __future__ import annotations

from collections.abc import Iterable

from PySide6.QtCore import QObject, Signal
from PySide6.QtWidgets import QVBoxLayout, QWidget

from .widgets import DeviceRow, section


class DeviceList(QObject):
    """The devices the form runs on; `toggled` when one is checked or unchecked."""

    toggled = Signal()

    def __init__(self, layout: QVBoxLayout, parent: QWidget) -> None:
        super().__init__(parent)
        section(layout, "Devices")
        self.rows: list[DeviceRow] = []
        self._box = QVBoxLayout()
        self._box.setSpacing(4)
        layout.addLayout(self._box)

    def fill(self, devices: list) -> None:
        """The catalogue's devices (machine.probe's Device), replacing the rows shown."""
        for row in self.rows:
            self._box.removeWidget(row)
            row.hide()  # gone now, not when the event loop gets to deleting it
            row.deleteLater()
        self.rows = []
        for device in devices:
            row = DeviceRow(device)
            row.toggled.connect(lambda _checked: self.toggled.emit())
            self._box.addWidget(row)
            self.rows.append(row)

    def devices(self) -> tuple:
        """Every device shown, available or not."""
        return tuple(row.device for row in self.rows)

    def checked(self) -> list:
        """The checked, available devices, in the catalogue's order."""
        return [row.device for row in self.rows if row.checked]

    def checked_ids(self) -> list[str]:
        return [device.id for device in self.checked()]

    def check(self, ids: Iterable[str] | None = None) -> None:
        """Check the available devices among `ids` and uncheck the rest; None: every available device."""
        wanted = None if ids is None else set(ids)
        for row in self.rows:
            row.checkbox.setChecked(row.device.available and (wanted is None or row.device.id in wanted))

    def check_one_at_least(self) -> None:
        """Where nothing is checked (a restored setup's device is gone), the first available device."""
        if not self.checked():
            first = next((row for row in self.rows if row.device.available), None)
            if first is not None:
                first.checkbox.setChecked(True)
