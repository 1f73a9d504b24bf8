"""Preferences (a small JSON file in the user config folder) and the Preferences window (⌘,)."""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from PySide6.QtCore import QUrl
from PySide6.QtGui import QDesktopServices, QPalette
from PySide6.QtWidgets import (
    QComboBox, QDialog, QDialogButtonBox, QDoubleSpinBox, QFileDialog, QFormLayout, QHBoxLayout, QLabel, QListWidget,
    QListWidgetItem, QMessageBox, QPushButton, QSpinBox, QVBoxLayout, QWidget,
)

from ..engine.basics.files import write_atomic
from ..engine.basics.formatting import error_line
from ..engine.basics.paths import config_dir, log_dir
from .plots.redraw import REFRESH_CHOICES

if TYPE_CHECKING:
    from .jobs import Job


@dataclass
class Preferences:
    """Settings that change measurements; they are copied into every run's config, so results record them."""

    cpu_threads: int = 0  # 0: PyTorch's default
    window_s: float = 0.1  # length of one measurement window
    plot_refresh: str = "auto"  # live plots: "auto" (10 Hz; every 2 s while a CPU run uses every core), "10", "2"
    # other Python environments to run in ({"path", "label"}, checked when added: engine process/interpreter.py)
    pythons: list = field(default_factory=list)
    team_server: str = ""  # the team's MLflow tracking server (engine team/server.check_url), "" for none

    @classmethod
    def load(cls) -> "Preferences":
        try:
            data = json.loads((config_dir() / "preferences.json").read_text())
            prefs = cls(cpu_threads=int(data.get("cpu_threads", 0)), window_s=float(data.get("window_s", 0.1)),
                        plot_refresh=str(data.get("plot_refresh", "auto")), pythons=_pythons(data.get("pythons")),
                        team_server=_team_server(data.get("team_server")))
        except (OSError, ValueError, TypeError, AttributeError):
            return cls()
        if prefs.plot_refresh not in REFRESH_CHOICES:
            prefs.plot_refresh = "auto"
        prefs.cpu_threads = max(0, prefs.cpu_threads)
        prefs.window_s = min(2.0, max(0.02, prefs.window_s))
        return prefs

    def save(self) -> None:
        folder = config_dir()
        folder.mkdir(parents=True, exist_ok=True)
        write_atomic(folder / "preferences.json", json.dumps(asdict(self), indent=1))

    def settings(self) -> dict:
        """The run settings these preferences set (a RunRequest's changes): the CPU's threads, the window length."""
        return {"threads": self.cpu_threads or None, "window_s": self.window_s}


class PreferencesDialog(QDialog):
    def __init__(self, store_path: Path, parent=None):
        super().__init__(parent)
        self.setWindowTitle("Preferences")
        self.prefs = Preferences.load()
        form = QFormLayout()
        self.threads = QSpinBox()
        self.threads.setRange(0, os.cpu_count() or 64)
        self.threads.setSpecialValueText("Automatic")
        self.threads.setValue(self.prefs.cpu_threads)
        self.threads.setToolTip("Threads PyTorch uses on the CPU; recorded with every run.")
        form.addRow("CPU threads:", self.threads)
        self.window_length = QDoubleSpinBox()  # not self.window: QWidget.window() is a method
        self.window_length.setRange(0.02, 2.0)
        self.window_length.setSingleStep(0.05)
        self.window_length.setDecimals(2)
        self.window_length.setSuffix(" s")
        self.window_length.setValue(self.prefs.window_s)
        self.window_length.setToolTip("How much work one measurement window holds: the device is synchronized and "
                               "losses fetched once per window.")
        form.addRow("Measurement window:", self.window_length)
        self.refresh = QComboBox()
        for label, value in (("Automatic: 10 Hz; every 2 s while a CPU run uses every core", "auto"),
                             ("Always 10 Hz", "10"), ("Always 2 Hz", "2")):
            self.refresh.addItem(label, value)
        self.refresh.setCurrentIndex(max(0, self.refresh.findData(self.prefs.plot_refresh)))
        self.refresh.setToolTip("How often the live plots redraw during a run. Drawing takes CPU time, which a CPU run "
                                "that uses every core loses (measured on a 2-core machine: 14 % at 10 Hz, 5 % at 2 Hz, "
                                "none measurable every 2 s); a GPU run, or a CPU run that leaves a core free, loses "
                                "none measurable at 10 Hz (docs/benchmarks.md).")
        form.addRow("Live plot refresh:", self.refresh)
        form.addRow("Other PyTorch:", self._pythons_row())
        from .team_settings import ServerRow

        self.team_server = ServerRow(self.prefs.team_server)
        form.addRow("Team server:", self.team_server)
        from ..engine.basics.paths import cache_dir

        for label, folder in (("Run history:", Path(store_path).parent), ("Dataset cache:", cache_dir() / "datasets"),
                              ("Logs:", log_dir())):
            form.addRow(label, _folder_row(folder))
        buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Ok | QDialogButtonBox.StandardButton.Cancel)
        buttons.accepted.connect(self.accept)
        buttons.rejected.connect(self.reject)
        layout = QVBoxLayout(self)
        layout.addLayout(form)
        layout.addWidget(buttons)

    def accept(self) -> None:
        self.prefs.cpu_threads = self.threads.value()
        self.prefs.window_s = self.window_length.value()
        self.prefs.plot_refresh = self.refresh.currentData()
        self.prefs.pythons = [self.pythons.item(i).data(PYTHON_ROLE) for i in range(self.pythons.count())]
        from ..engine.basics.errors import UserError

        try:  # the address into the preferences; a token typed into the keychain, never into a file
            self.prefs.team_server = self.team_server.address()
            self.team_server.keep()
        except UserError as exc:
            QMessageBox.warning(self, "Team Server", str(exc))
            return
        try:
            self.prefs.save()
        except OSError as exc:
            QMessageBox.warning(self, "Preferences Not Saved",
                                f"The preferences could not be saved in {config_dir()} ({error_line(exc)}); "
                                "check that this folder can be written, or press Cancel to keep the old ones.")
            return
        super().accept()


    def _pythons_row(self) -> QWidget:
        """Other Python environments (a venv's or conda env's python with its own torch): each checked when added,
        then a checkbox under Devices in the setup."""
        box = QWidget()
        column = QVBoxLayout(box)
        column.setContentsMargins(0, 0, 0, 0)
        self.pythons = QListWidget()
        self.pythons.setMaximumHeight(90)
        self.pythons.setToolTip("Each becomes a checkbox under Devices: the checked devices run in every checked "
                                "PyTorch, and the runs are compared by their environments.")
        for env in self.prefs.pythons:
            self._add_item(env)
        self.python_note = QLabel("Add a venv's or conda env's python to run your setup with its torch too.")
        self.python_note.setWordWrap(True)
        self.python_note.setForegroundRole(QPalette.ColorRole.PlaceholderText)
        row = QHBoxLayout()
        add = self.add_button = QPushButton("Add…")
        add.clicked.connect(self._choose_python)
        remove = QPushButton("Remove")
        remove.clicked.connect(lambda: self.pythons.takeItem(self.pythons.currentRow()))
        row.addWidget(add)
        row.addWidget(remove)
        row.addStretch(1)
        column.addWidget(self.pythons)
        column.addWidget(self.python_note)
        column.addLayout(row)
        self._checker: Job | None = None
        return box

    def _add_item(self, env: dict) -> None:
        item = QListWidgetItem(env["label"])
        item.setToolTip(env["path"])
        item.setData(PYTHON_ROLE, env)
        self.pythons.addItem(item)

    def _choose_python(self) -> None:
        path, _ = QFileDialog.getOpenFileName(self, "Choose a Python (a venv's bin/python)", str(Path.home()))
        if path:
            self.add_python(path)

    def add_python(self, path: str) -> None:
        """Check the interpreter off the window's thread, then list it (or say why not)."""
        import sys

        from .jobs import interpreter_job

        known = [self.pythons.item(i).data(PYTHON_ROLE)["path"] for i in range(self.pythons.count())]
        target = os.path.abspath(os.path.expanduser(path))
        if target in known:
            self._say(f"{target} is listed already.", error=False)
            return
        own = os.path.dirname(os.path.abspath(sys.executable))  # its bin folder (a venv's python links elsewhere)
        if os.path.dirname(target) == own:
            self._say("That is MPS Studio's own Python, always offered as This app's PyTorch; choose another "
                      "environment's python.", error=True)
            return
        self._say(f"Checking {path}… (it starts that Python and imports its torch)", error=False)
        self.add_button.setEnabled(False)
        self._checker = interpreter_job(path, self)
        self._checker.done.connect(self._python_checked)
        self._checker.rejected.connect(self._python_refused)
        self._checker.finished.connect(self._python_check_ended)
        self._checker.start()

    def _say(self, text: str, error: bool) -> None:
        self.python_note.setText(text)
        self.python_note.setForegroundRole(QPalette.ColorRole.Text if error else QPalette.ColorRole.PlaceholderText)

    def _python_refused(self, why: str) -> None:
        self._say(why.replace("`", ""), error=True)

    def _python_check_ended(self) -> None:
        self.add_button.setEnabled(True)

    def _python_checked(self, answer: tuple) -> None:
        path, label = answer
        known = [self.pythons.item(i).data(PYTHON_ROLE)["path"] for i in range(self.pythons.count())]
        if path in known:
            self._say(f"{label} is listed already.", error=False)
            return
        self._add_item({"path": path, "label": label})
        self._say(f"Added: {label}. Check it under Devices to run in it.", error=False)


PYTHON_ROLE = 0x0100 + 7  # Qt.UserRole + 7: an item's {"path", "label"}


def _team_server(value) -> str:
    """The saved server's address as check_url keeps it; "" for none or one it refuses (a file edited by hand)."""
    from ..engine.basics.errors import UserError
    from ..engine.team.server import check_url

    try:
        return check_url(value) if isinstance(value, str) and value.strip() else ""
    except UserError:
        return ""


def _pythons(value) -> list:
    """Preferences' environments, as far as they are well formed (a hand-edited file loses only its bad entries)."""
    if not isinstance(value, list):
        return []
    return [{"path": e["path"], "label": e["label"]} for e in value
            if isinstance(e, dict) and isinstance(e.get("path"), str) and isinstance(e.get("label"), str)][:20]


def _folder_row(folder: Path) -> QWidget:
    row = QWidget()
    layout = QHBoxLayout(row)
    layout.setContentsMargins(0, 0, 0, 0)
    label = QLabel(str(folder))
    label.setToolTip(str(folder))
    button = QPushButton("Show")
    button.setToolTip("Open this folder in the file manager")
    button.clicked.connect(lambda: QDesktopServices.openUrl(QUrl.fromLocalFile(str(folder))))
    layout.addWidget(label, 1)
    layout.addWidget(button)
    return row
