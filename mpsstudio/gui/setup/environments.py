"""The sidebar's PyTorch choice: this app's own, and the other Python environments Preferences names (each with
its own torch; engine process/interpreter.py checked them there). Each checked one runs every checked device, so
"torch 2.14 against 2.15 on my model" is two checkboxes; the runs are compared by their environments."""

from __future__ import annotations

from PySide6.QtWidgets import QCheckBox, QVBoxLayout


class EnvironmentsMixin:
    """The PyTorch checkboxes under Devices, shown when Preferences names another environment."""

    def set_environments(self, environments: list[dict], own: str) -> None:
        """`environments`: Preferences' [{"path", "label"}]; `own`: this app's torch ("torch 2.14.1")."""
        for check, _ in getattr(self, "_env_checks", []):
            self._env_box.removeWidget(check)
            check.hide()
            check.deleteLater()
        was = {path for check, path in getattr(self, "_env_checks", []) if check.isChecked()}
        self._env_checks: list[tuple[QCheckBox, str | None]] = []
        if not environments:
            self._env_title.hide()
            self._update_button()
            return
        self._env_title.show()
        self._env_title.setToolTip("Every checked device runs in every checked PyTorch; the runs are compared by "
                                   "their environments (Compare → Environments).")
        for label, path in [(f"This app's {own}", None), *((e["label"], e["path"]) for e in environments)]:
            short = label.replace(" · Python ", " (Python ").split(" (")[0] if path else label
            name = label.rsplit("(", 1)[-1].rstrip(")") if path and "(" in label else ""
            check = QCheckBox(f"{short} ({name})" if name else short)
            check.setToolTip(f"{label}\n{path}" if path else "The PyTorch MPS Studio comes with.")
            check.setChecked(path in was or (path is None and not was))
            check.toggled.connect(lambda _on: (self._refresh(), self._update_button()))
            self._env_box.addWidget(check)
            self._env_checks.append((check, path))
        self._update_button()

    def checked_pythons(self) -> list[str | None]:
        """The interpreters to run in (None: this app's own); this app's alone when no other is named."""
        checks = getattr(self, "_env_checks", [])
        chosen = [path for check, path in checks if check.isChecked()]
        return chosen if checks else [None]

    def _add_environments(self, layout, heading) -> None:
        """`heading`: the section heading widget (hidden until another environment is named)."""
        self._env_title = heading
        self._env_title.setToolTip("Run the checked devices in each checked Python environment "
                                   "(Preferences → Other PyTorch)")
        self._env_title.hide()
        self._env_box = QVBoxLayout()
        self._env_box.setSpacing(4)
        layout.addWidget(self._env_title)
        layout.addLayout(self._env_box)
