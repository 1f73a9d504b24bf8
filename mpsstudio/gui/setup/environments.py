"""The sidebar's PyTorch choice: this app's own, and the other Python environments Preferences names (each with
its own torch; engine process/interpreter.py checked them there). Each checked one runs every checked device, so
"torch 2.14 against 2.15 on my model" is two checkboxes; the runs are compared by their environments.

And the GPUs field, shown where the machine has several CUDA GPUs: a CUDA run on N of them at once (torchrun's ranks,
the model in DistributedDataParallel: engine run/distributed.py), or each count in turn for the scaling.

And the framework choice under Devices: PyTorch, MLX or both. Each checked framework runs every checked device it can
(MLX: its CPU, and its GPU where the engine found one: Metal on a Mac); the runs of the two are compared as a setting
(Compare → Settings: framework), MLX's only once parity with PyTorch passed. MLX is optional: where the engine cannot
run it (not installed, no Metal GPU), its checkbox is off with the reason as its tooltip."""

from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QCheckBox, QComboBox, QHBoxLayout, QLabel, QVBoxLayout, QWidget

from ...engine.basics.frameworks import INSTALL_MLX


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


def scaling_counts(n: int) -> list[int]:
    """1, 2, 4, ... up to n, and n itself: the counts a scaling runs."""
    counts, k = [], 1
    while k < n:
        counts.append(k)
        k *= 2
    return counts + [n]


class GpusMixin:
    """GPUs: how many of this machine's CUDA GPUs a CUDA run takes (the field exists only where there are several)."""

    def _add_gpus(self, layout) -> None:
        self.gpus_combo = QComboBox()
        self.gpus_combo.setToolTip("Train on several GPUs at once (one rank each, the model in DistributedDataParallel, "
                                   "batch size per GPU), or run each count in turn to see how it scales.")
        self.gpus_combo.activated.connect(lambda _i: (self._refresh(), self._update_button(), self._emit_changed()))
        row = QHBoxLayout()
        row.setContentsMargins(0, 0, 0, 0)
        row.addWidget(QLabel("CUDA GPUs:"))
        row.addWidget(self.gpus_combo, 1)
        self.gpus_row = QWidget()
        self.gpus_row.setLayout(row)
        self.gpus_row.hide()
        layout.addWidget(self.gpus_row)

    def set_gpu_count(self, n: int) -> None:
        """The machine's CUDA GPUs: the field's choices (hidden with fewer than two)."""
        keep = self.gpus_combo.currentData()
        self.gpus_combo.clear()
        if n < 2:
            self.gpus_row.hide()
            return
        self.gpus_combo.addItem("1 (one GPU per run)", [1])
        for k in range(2, n + 1):
            self.gpus_combo.addItem(f"{k} at once (DDP)", [k])
        counts = scaling_counts(n)
        self.gpus_combo.addItem(f"Scaling: {', '.join(map(str, counts))}", counts)
        self.gpus_combo.setItemData(self.gpus_combo.count() - 1, "Run the CUDA setup on each count in turn and see "
                                    "its speedup, efficiency and the all-reduce's share (Compare → GPUs).",
                                    Qt.ItemDataRole.ToolTipRole)
        index = self.gpus_combo.findData(keep) if keep else 0
        self.gpus_combo.setCurrentIndex(max(0, index))
        self.gpus_row.show()

    def gpu_counts(self) -> list[int]:
        """The counts chosen ([1]: one GPU per run; [] where the field is hidden)."""
        if self.gpus_row.isHidden():
            return []
        return list(self.gpus_combo.currentData() or [])


MLX_TIP = ("Also train the same model in MLX (Apple's array framework), its weights PyTorch's, checked for parity "
           "before it is timed, and compare the two (mlp, mnist_cnn, resnet18, transformer).")


class FrameworksMixin:
    """The PyTorch and MLX checkboxes; `set_mlx` gets the engine's reasons per kind of device ("" where MLX runs)."""

    def _add_frameworks(self, layout) -> None:
        row = QHBoxLayout()
        row.setSpacing(10)
        label = QLabel("Framework")
        label.setObjectName("muted")
        self.torch_check = QCheckBox("PyTorch")
        self.torch_check.setChecked(True)
        self.torch_check.setToolTip("Train in PyTorch on each checked device.")
        self.mlx_check = QCheckBox("MLX")
        self.mlx_check.setEnabled(False)
        self.mlx_check.setToolTip(f"MLX is not known yet (its check comes with the devices); {INSTALL_MLX}.")
        for check in (self.torch_check, self.mlx_check):
            check.toggled.connect(lambda _on: (self._refresh(), self._update_button(), self._emit_changed()))
        row.addWidget(label)
        row.addWidget(self.torch_check)
        row.addWidget(self.mlx_check)
        row.addStretch(1)
        layout.addLayout(row)
        self._mlx_status: dict = {}

    def set_mlx(self, status: dict) -> None:
        """{kind: reason} from the catalog ("" where MLX runs on that kind of device)."""
        self._mlx_status = dict(status or {})
        runs = [kind for kind, why in self._mlx_status.items() if not why]
        self.mlx_check.setEnabled(bool(runs))
        if runs:
            where = " and ".join("its GPU" if k != "cpu" else "its CPU" for k in runs)
            self.mlx_check.setToolTip(f"{MLX_TIP} Here MLX runs on {where}.")
        else:
            self.mlx_check.setChecked(False)
            self.mlx_check.setToolTip(f"MLX cannot run here: {self._mlx_status.get('cpu') or 'not checked'}.")

    def checked_frameworks(self) -> list[str]:
        return [name for name, check in (("torch", self.torch_check), ("mlx", self.mlx_check))
                if check.isChecked() and check.isEnabled()]

    def mlx_runs_on(self, device: str) -> bool:
        return self._mlx_status.get(device.split(":")[0], "unknown") == ""
