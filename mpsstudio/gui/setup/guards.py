"""The guard under the summary: what would make this setup fail or measure too little (the engine's run.guards),
with a button that applies the fix. A guard that the run would refuse keeps Run off, saying why."""

from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QHBoxLayout, QLabel, QPushButton, QVBoxLayout, QWidget


class GuardsMixin:
    """The first guard of the form's setup, shown with its fix; `guard()` for the Run button."""

    def _add_guard_row(self, layout: QVBoxLayout) -> None:
        self.guard_box = QWidget()
        row = QHBoxLayout(self.guard_box)
        row.setContentsMargins(0, 0, 0, 0)
        row.setSpacing(8)
        self.guard_label = QLabel()
        self.guard_label.setWordWrap(True)
        self.guard_label.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.guard_button = QPushButton()
        self.guard_button.clicked.connect(self._apply_guard)
        row.addWidget(self.guard_label, 1)
        row.addWidget(self.guard_button, 0, Qt.AlignmentFlag.AlignTop)
        self.guard_box.setVisible(False)
        layout.addWidget(self.guard_box)

    def guard(self):
        """The engine's first guard for the form's setup, or None (nothing loaded, nothing wrong)."""
        if not self._loaded or self.input_problem():
            return None
        configs = self.configs()
        if not configs:
            return None
        from ...engine.run import guards

        config = configs[0]
        dataset = config.dataset
        try:
            train = guards.train_samples(config, self._dataset_infos.get(dataset), self._folder_reports.get(dataset))
            found = guards.guards(config, train, self._dataset_title(dataset))
        except Exception:  # a model or folder that cannot be read yet: the summary says so
            return None
        return found[0] if found else None

    def _dataset_title(self, dataset: str) -> str:
        info = self._dataset_infos.get(dataset)
        if info is not None:
            return info.name
        from pathlib import Path

        return Path(dataset).expanduser().name or dataset

    def _update_guard(self) -> None:
        found = self.guard()
        self.guard_box.setVisible(found is not None)
        if found is not None:
            self.guard_label.setText(("⚠︎ " if found.blocking else "") + found.sentence)
            self.guard_button.setText(found.button)
            self.guard_button.setToolTip(f"Set {', '.join(f'{k.replace(chr(95), chr(32))} to {v:,}' for k, v in found.fix.items())}.")

    def _apply_guard(self) -> None:
        found = self.guard()
        if found is None:
            return
        self.apply_config(self._form_request().changed(**found.fix).settings, devices=self.checked_devices())

    def train_samples(self) -> int | None:
        """The training samples the form's setup gets (the engine's run.guards.train_samples), None when unknown."""
        configs = self.configs()
        if not configs:
            return None
        from ...engine.run import guards

        dataset = configs[0].dataset
        try:
            return guards.train_samples(configs[0], self._dataset_infos.get(dataset), self._folder_reports.get(dataset))
        except Exception:
            return None
