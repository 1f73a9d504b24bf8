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

from PySide6.QtCore import QObject, Qt, Signal
from PySide6.QtWidgets import QCheckBox, QComboBox, QHBoxLayout, QLabel, QLayout, QVBoxLayout, QWidget

from ...engine.basics.frameworks import INSTALL_MLX
from ..style import labelled_row


class PythonChoice(QObject):
    """The PyTorch checkboxes under Devices, shown when Preferences names another environment. Its widgets go into
    the form's layout; `changed` when the user checks one, `listed` once the environments are shown anew."""

    changed = Signal()
    listed = Signal()

    def __init__(self, layout: QVBoxLayout, heading: QWidget, parent: QObject | None = None) -> None:
        """`heading`: the section heading widget (hidden until another environment is named)."""
        super().__init__(parent)
        self.checks: list[tuple[QCheckBox, str | None]] = []
        self.title = heading
        self.title.setToolTip("Run the checked devices in each checked Python environment "
                              "(Preferences → Other PyTorch)")
        self.title.hide()
        self.box = QVBoxLayout()
        self.box.setSpacing(4)
        layout.addWidget(self.title)
        layout.addLayout(self.box)

    def set_environments(self, environments: list[dict], own: str) -> None:
        """`environments`: Preferences' [{"path", "label"}]; `own`: this app's torch ("torch 2.14.1")."""
        was = {path for check, path in self.checks if check.isChecked()}
        for check, _ in self.checks:
            self.box.removeWidget(check)
            check.hide()
            check.deleteLater()
        self.checks = []
        if not environments:
            self.title.hide()
            self.listed.emit()
            return
        self.title.show()
        self.title.setToolTip("Every checked device runs in every checked PyTorch; the runs are compared by "
                              "their environments (Compare → Environments).")
        for label, path in [(f"This app's {own}", None), *((e["label"], e["path"]) for e in environments)]:
            short = label.replace(" · Python ", " (Python ").split(" (")[0] if path else label
            name = label.rsplit("(", 1)[-1].rstrip(")") if path and "(" in label else ""
            check = QCheckBox(f"{short} ({name})" if name else short)
            check.setToolTip(f"{label}\n{path}" if path else "The PyTorch MPS Studio comes with.")
            check.setChecked(path in was or (path is None and not was))
            check.toggled.connect(lambda _on: self.changed.emit())
            self.box.addWidget(check)
            self.checks.append((check, path))
        self.listed.emit()

    def checked(self) -> list[str | None]:
        """The interpreters to run in (None: this app's own); this app's alone when no other is named."""
        chosen = [path for check, path in self.checks if check.isChecked()]
        return chosen if self.checks else [None]


def scaling_counts(n: int) -> list[int]:
    """1, 2, 4, ... up to n, and n itself: the counts a scaling runs."""
    counts, k = [], 1
    while k < n:
        counts.append(k)
        k *= 2
    return counts + [n]


class GpuChoice(QObject):
    """GPUs: how many of this machine's CUDA GPUs a CUDA run takes (the field exists only where there are several).
    `changed` when the user picks a count."""

    changed = Signal()

    def __init__(self, layout: QLayout, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self.combo = QComboBox()
        self.combo.setToolTip("Train on several GPUs at once (one rank each, the model in DistributedDataParallel, "
                              "batch size per GPU), or run each count in turn to see how it scales.")
        self.combo.activated.connect(lambda _i: self.changed.emit())
        self.row = labelled_row("CUDA GPUs:", self.combo)
        self.row.hide()
        layout.addWidget(self.row)

    def set_count(self, n: int) -> None:
        """The machine's CUDA GPUs: the field's choices (hidden with fewer than two)."""
        combo = self.combo
        keep = combo.currentData()
        combo.clear()
        if n < 2:
            self.row.hide()
            return
        combo.addItem("1 (one GPU per run)", [1])
        for k in range(2, n + 1):
            combo.addItem(f"{k} at once (DDP)", [k])
        counts = scaling_counts(n)
        combo.addItem(f"Scaling: {', '.join(map(str, counts))}", counts)
        combo.setItemData(combo.count() - 1, "Run the CUDA setup on each count in turn and see its speedup, "
                          "efficiency and the all-reduce's share (Compare → GPUs).", Qt.ItemDataRole.ToolTipRole)
        index = combo.findData(keep) if keep else 0
        combo.setCurrentIndex(max(0, index))
        self.row.show()

    def counts(self) -> list[int]:
        """The counts chosen ([1]: one GPU per run; [] where the field is hidden)."""
        if self.row.isHidden():
            return []
        return list(self.combo.currentData() or [])


MLX_TIP = ("Also train the same model in MLX (Apple's array framework), its weights PyTorch's, checked for parity "
           "before it is timed, and compare the two (mlp, mnist_cnn, resnet18, transformer).")


class FrameworkChoice(QObject):
    """The PyTorch and MLX checkboxes; `set_mlx` gets the engine's reasons per kind of device ("" where MLX runs).
    `changed` when either is checked or unchecked."""

    changed = Signal()

    def __init__(self, layout: QVBoxLayout, parent: QObject | None = None) -> None:
        super().__init__(parent)
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
            check.toggled.connect(lambda _on: self.changed.emit())
        row.addWidget(label)
        row.addWidget(self.torch_check)
        row.addWidget(self.mlx_check)
        row.addStretch(1)
        layout.addLayout(row)
        self.status: dict[str, str] = {}

    def set_mlx(self, status: dict) -> None:
        """{kind: reason} from the catalog ("" where MLX runs on that kind of device)."""
        self.status = dict(status or {})
        runs = [kind for kind, why in self.status.items() if not why]
        self.mlx_check.setEnabled(bool(runs))
        if runs:
            where = " and ".join("its GPU" if k != "cpu" else "its CPU" for k in runs)
            self.mlx_check.setToolTip(f"{MLX_TIP} Here MLX runs on {where}.")
        else:
            self.mlx_check.setChecked(False)
            self.mlx_check.setToolTip(f"MLX cannot run here: {self.status.get('cpu') or 'not checked'}.")

    def checked(self) -> list[str]:
        return [name for name, check in (("torch", self.torch_check), ("mlx", self.mlx_check))
                if check.isChecked() and check.isEnabled()]

    def runs_on(self, device: str) -> bool:
        return self.status.get(device.split(":")[0], "unknown") == ""
