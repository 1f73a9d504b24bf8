"""The window's dialogs and exports."""

from __future__ import annotations

from typing import TYPE_CHECKING

import sys
from pathlib import Path

from PySide6.QtCore import QObject, QSize, Qt
from PySide6.QtWidgets import QMessageBox

from ...engine.basics.errors import UserError
from ..plots import LivePlots

if TYPE_CHECKING:
    from ..setup_window import SetupWindow
    from .main_window import MainWindow


class Dialogs(QObject):
    """Export Comparison (the results panel and the comparison's own stored curves as PNGs), About, Preferences and
    PyTorch Setup."""

    def __init__(self, w: MainWindow):  # the window that holds it
        super().__init__(w)
        self.w = w
        self.setup_window: SetupWindow | None = None  # Help → PyTorch Setup, made when first asked for

    def export_comparison(self, path: str) -> tuple[str, str] | None:
        """The results panel with its chart, and the plots beside it (PATH-plots.png); titles make each readable."""
        from ..export import render_png

        w = self.w
        try:
            results_png = w.results.export_comparison_png(path)
            stem = Path(results_png)
            plots_png = str(stem.with_name(stem.stem + "-plots.png"))
            title, subtitle = w.results.comparison_title()
            comparison = w.results.current_comparison()
            assert comparison is not None  # export_comparison_png raised UserError without one
            plots = LivePlots()  # the comparison's own stored curves, whatever the window shows now
            plots.setAttribute(Qt.WidgetAttribute.WA_DontShowOnScreen)
            plots.resize(w.plots.size() if w.plots.width() > 400 else QSize(1100, 640))
            plots.show()
            try:
                plots.set_x_axis(w.plots.x_axis())
                plots.set_smoothing(w.plots.smoothing())
                plots.show_runs(w.results.whole_runs([r.id for r in comparison.runs]))
                render_png(plots, plots_png, f"Curves · {title}", subtitle)
            finally:
                plots.close()
                plots.deleteLater()
        except UserError as exc:
            w.say(str(exc))
            return None
        w.say(f"Saved {Path(results_png).name} and {Path(plots_png).name}.")
        return results_png, plots_png

    def show_about(self) -> None:
        from PySide6.QtCore import QUrl
        from PySide6.QtGui import QDesktopServices

        from ... import __version__
        from ...engine.basics.paths import log_dir

        w = self.w
        torch_version = sys.modules["torch"].__version__ if "torch" in sys.modules else "loading…"
        box = QMessageBox(w)
        box.setWindowTitle("About MPS Studio")
        box.setIconPixmap(w.windowIcon().pixmap(64, 64))
        box.setText(f"<h3>MPS Studio {__version__}</h3>")
        box.setInformativeText(
            f"<p>How fast does PyTorch train on your Mac's GPU (MPS) compared with its CPU? "
            f"Warm-up timed apart, the device synchronized before every clock read, medians over windows.</p>"
            f"<p>PyTorch {torch_version}<br>Each run in its own process; CPU fallback for MPS: a per-run "
            f"option (Advanced), on by default<br>History: {w.store.path}<br>"
            f"Logs and crash reports: {log_dir()}</p>")
        logs = box.addButton("Show Logs", QMessageBox.ButtonRole.ActionRole)
        box.addButton(QMessageBox.StandardButton.Close)
        box.exec()
        if box.clickedButton() is logs:
            log_dir().mkdir(parents=True, exist_ok=True)
            QDesktopServices.openUrl(QUrl.fromLocalFile(str(log_dir())))

    def show_preferences(self) -> None:
        from ..preferences import PreferencesDialog

        w = self.w
        if PreferencesDialog(w.store.path, w).exec():
            self.refresh_environments()

    def refresh_environments(self) -> None:
        """The setup's PyTorch checkboxes from Preferences (this app's own, and the other environments named)."""
        import sys

        from ..preferences import Preferences

        torch = sys.modules.get("torch")
        own = f"torch {torch.__version__}" if torch is not None else "PyTorch"
        self.w.setup.pythons.set_environments(Preferences.load().pythons, own)

    def show_doctor(self) -> None:
        """Help → PyTorch Setup: a window of its own (not modal), refreshed when the devices are checked again."""
        from ..setup_window import SetupWindow

        w = self.w
        window = self.setup_window
        if window is None:
            window = self.setup_window = SetupWindow(w)
            window.check_again.connect(w.check_devices_again)
        window.show_rows((w.state.catalog or {}).get("setup") if w.state.catalog else None)
        window.show()
        window.raise_()
        window.activateWindow()
