"""The main window: setup sidebar, live plots, results. A thin view over the engine: runs go through a Run job ->
engine.process.run_isolated (a process per run); nothing is measured or estimated here (progress and time left come
with the engine's events).

The window holds one state (gui/state.py: what it is doing and what may happen next, no Qt) and parts by
responsibility, each a QObject of its own module: the chrome (layout, status bar, badges), the menus, the catalogue,
Run and Stop, the run in progress drawn live, the launch benchmark and the user's script, the tools, trained
models, folders, dialogs and the history. The menus observe the state; the parts change it. The window's own methods
are its commands (what menus, signals and tests call) and its questions (dialogs a test answers instead).
"""

from __future__ import annotations

from PySide6.QtCore import QCoreApplication, QEvent
from PySide6.QtWidgets import QMainWindow

from ...engine.basics.config import RunConfig
from ...engine.basics.errors import UserError
from ...engine.history.store import RunStore
from ...engine.process import Spare
from ..banner import Banner
from ..output_view import OutputView
from ..plots import LivePlots
from ..results.panel import ResultsPanel
from ..settings import settings
from ..setup.panel import SetupPanel
from ..state import WindowState
from ..tools.panel import ToolsPanel
from .catalog import CatalogControl
from .dialogs import Dialogs
from .folders import Folders
from .history import HistoryView
from .launch import Launch
from .layout import Chrome
from .live_view import LiveView
from .menus import Menus
from .run_control import RunControl
from .tools import ToolControl
from .trained import TrainedModels

MAX_OVERLAY = 8  # stored runs drawn at once when several are selected (one colour each)
CLOSE_GRACE_S = 1.0  # closing mid-run: the run's time to stop itself before its process is ended (< 2 s in all)


class MainWindow(QMainWindow):
    """MPS Studio's window. `demo=True` runs the default comparison once the catalogue is loaded."""

    def __init__(self, *, demo: bool = False, demo_screenshot: str | None = None, store: RunStore | None = None,
                 keep_spare: bool = True):
        super().__init__()
        self.keep_spare = keep_spare  # a run process with torch imported, waiting for the next Run
        self.spare = Spare()
        self.setWindowTitle("MPS Studio")
        self.setAcceptDrops(True)
        self.demo, self.demo_screenshot = demo, demo_screenshot
        self.exit_code = 0
        self.state = WindowState()

        store_problem = None
        if store is None:
            store, store_problem = open_history()
        self.store = store
        self.history = HistoryView(self)
        interrupted = self.history.keep_interrupted()  # before the table reads the history
        self.setup = SetupPanel()
        self.plots = LivePlots()
        self.results = ResultsPanel(self.store, export_comparison=self.export_comparison)  # one export, two PNGs
        self.tools = ToolsPanel(self.store)
        self.output = OutputView()
        self.banner = Banner()
        self.chrome = Chrome(self)
        self.menus = Menus(self)
        self.catalog_control = CatalogControl(self)
        self.runs = RunControl(self)
        self.live = LiveView(self)
        self.launch = Launch(self)
        self.tool_control = ToolControl(self)
        self.trained_models = TrainedModels(self)
        self.folders = Folders(self)
        self.dialogs = Dialogs(self)
        self.chrome.build()
        chrome = self.chrome  # the window's widgets its layout made
        self.tabs, self.right_split, self.main_split = chrome.tabs, chrome.right_split, chrome.main_split
        self.run_label, self.rate_label, self.progress = chrome.run_label, chrome.rate_label, chrome.progress
        self.menus.build()
        self.state.subscribe(self.menus.show_state)
        self._connect()
        self._restore_settings()
        if store_problem is not None:
            self.history.show_problem(store_problem)
        elif self.store.read_only:
            self.banner.show_message(f"The run history at {self.store.path} is read-only: earlier runs are shown, "
                                     "new runs will not be kept.", warning=True)
        self.history.show_notices(interrupted)

    def _connect(self) -> None:
        self.setup.run_requested.connect(self.start_run)
        self.setup.stop_requested.connect(self.stop_run)
        self.setup.open_folder_requested.connect(self.open_folder)
        self.setup.script_requested.connect(self.run_script_dialog)
        self.results.message.connect(self.say)
        self.results.selection_changed.connect(self.show_selected_runs)
        self.results.save_model_requested.connect(self.save_trained_model)
        self.plots.emptied.connect(self.chrome.plots_emptied)
        self.chrome.plots_emptied(self.plots.is_empty())  # the state they started in (emitted before this connection)
        self.setup.changed.connect(self.runs.fill_spare)  # another first device or fallback: another spare
        self.tools.sweep_requested.connect(self.sweep_sizes_of)
        self.tools.message.connect(self.say)
        self.tools.apply_requested.connect(self.apply_tuned_settings)
        self.tools.push_requested.connect(self.results.team.push_these)
        self.results.team.pulled.connect(lambda: self.tools.reload())

    # -- commands (menus, signals, tests) --------------------------------------------------------------------------
    def start_loading(self) -> None:
        """Import torch and list models, datasets and devices off the GUI thread."""
        self.catalog_control.start_loading()

    def check_devices_again(self) -> None:
        self.catalog_control.check_again()

    def start_run(self) -> None:
        self.runs.start()

    def stop_run(self) -> None:
        self.runs.stop()

    def run_script_dialog(self) -> None:
        self.launch.run_script()

    def launch_benchmark(self) -> None:
        self.launch.launch_benchmark()

    def open_tool_sheet(self, kind: str) -> None:
        self.tool_control.open_sheet(kind)

    def start_tool(self, kind: str, config: RunConfig | None = None, batch_sizes: list[int] | None = None,
                   payload: dict | None = None, automatic: bool = False, devices: list[str] | None = None) -> None:
        self.tool_control.start(kind, config, batch_sizes=batch_sizes, payload=payload, automatic=automatic,
                                devices=devices)

    def sweep_sizes_of(self, result: dict) -> None:
        self.tool_control.sweep_sizes_of(result)

    def apply_tuned_settings(self, result: dict, row) -> None:  # row: a tune's TuneRow
        self.tool_control.apply_tuned(result, row)

    def export_model(self, **kwargs) -> None:
        self.tool_control.export_model(**kwargs)

    def save_trained_model(self, path: str | None = None, fmt: str | None = None) -> str | None:
        return self.trained_models.save(path, fmt)

    def export_comparison(self, path: str) -> tuple[str, str] | None:
        return self.dialogs.export_comparison(path)

    def open_folder(self) -> None:
        self.folders.open()

    def check_folder(self, path: str) -> None:
        self.folders.check(path)

    def handle_drop(self, paths: list[str]) -> None:
        self.folders.handle_drop(paths)

    def show_about(self) -> None:
        self.dialogs.show_about()

    def show_preferences(self) -> None:
        self.dialogs.show_preferences()

    def show_doctor(self) -> None:
        self.dialogs.show_doctor()

    def show_selected_runs(self, ids: list) -> None:
        """Draw the selected runs' stored curves (up to MAX_OVERLAY, overlaid), unless a run is being drawn live."""
        if not self.state.may_show_stored():
            return
        if not ids:
            self.plots.clear()
            return
        runs = self.results.whole_runs(list(ids)[:MAX_OVERLAY])
        self.plots.show_runs(runs)
        if len(ids) > MAX_OVERLAY:
            self.say(f"The plots show the first {MAX_OVERLAY} of the {len(ids):,} selected runs.")

    def say(self, text: str) -> None:
        self.statusBar().showMessage(text)

    # -- questions (dialogs; tests answer them instead) ------------------------------------------------------------
    def ask(self, title: str, text: str, yes: str) -> bool:
        """A question with a named default button."""
        from PySide6.QtWidgets import QMessageBox

        box = QMessageBox(QMessageBox.Icon.Question, title, text, parent=self)
        go = box.addButton(yes, QMessageBox.ButtonRole.AcceptRole)
        box.addButton(QMessageBox.StandardButton.Cancel)
        box.setDefaultButton(go)
        box.exec()
        return box.clickedButton() is go

    def ask_script(self, devices: list[str]):
        """Run Your Training Script…'s dialog; the engine-checked RunConfig of the script, or None when cancelled."""
        from PySide6.QtWidgets import QDialog

        from ..script_dialog import ScriptDialog
        from .launch import SCRIPT_KEY

        dialog = ScriptDialog(devices, self.launch.remembered_script(), parent=self)
        if dialog.exec() != QDialog.DialogCode.Accepted:
            return None
        import json

        settings().setValue(SCRIPT_KEY, json.dumps(dialog.remembered()))
        return dialog.config

    def ask_tool_settings(self, kind: str, config: RunConfig, devices: list[str], train: int | None, trained=None):
        """A tool's sheet; what start_tool takes, or None when cancelled."""
        from PySide6.QtWidgets import QDialog

        from ..tools.sheet import ToolSheet

        try:
            runs = self.store.all()
        except Exception:  # an unreadable history: no estimate, the tool still runs
            runs = []
        sheet = ToolSheet(kind, config, devices, runs, train, parent=self, trained=trained)
        return sheet.chosen() if sheet.exec() == QDialog.DialogCode.Accepted else None

    # -- Qt's events -------------------------------------------------------------------------------------------------
    def dragEnterEvent(self, event) -> None:
        if event.mimeData().hasUrls():
            event.acceptProposedAction()

    def dropEvent(self, event) -> None:
        urls = event.mimeData().urls()
        event.acceptProposedAction()
        self.handle_drop([u.toLocalFile() for u in urls])

    # -- settings and closing ------------------------------------------------------------------------------------
    def _restore_settings(self) -> None:
        if self.demo:  # a demo looks the same every time
            return
        s = settings()
        geometry = s.value("window/geometry")
        if geometry is not None:
            self.restoreGeometry(geometry)
        for key, splitter in (("window/main_split", self.main_split), ("window/right_split", self.right_split)):
            state = s.value(key)
            if state is not None:
                splitter.restoreState(state)

    def _save_settings(self) -> None:
        if self.demo:
            return
        s = settings()
        s.setValue("window/geometry", self.saveGeometry())
        s.setValue("window/main_split", self.main_split.saveState())
        s.setValue("window/right_split", self.right_split.saveState())

    def closeEvent(self, event) -> None:
        """Stop a running job (a run ends within one window), keep finished runs, leave no thread behind."""
        self._save_settings()
        tool, run = self.state.tool_job, self.state.run_job
        if tool is not None:
            tool.stop()
            tool.wait()
        if run is not None:
            run.stop(grace_s=CLOSE_GRACE_S)  # then its process is ended, whatever it is doing
            run.wait()
            # deliver the job's last queued events now, so the cancelled run is saved before we go
            for part in (self.live, self.chrome, self.runs):
                QCoreApplication.sendPostedEvents(part, QEvent.Type.MetaCall)
        self.setup.model_files.stop()
        self.spare.close()
        from ...engine.basics.paths import cache_dir

        self.trained_models.forget(cache_dir() / "trained-models")  # kept for Save Trained Model… until Quit
        loader = self.catalog_control.loader
        if loader is not None and self.catalog_control.loading():
            loader.wait()
        self.folders.wait()
        self.history.wait()
        self.plots.close()
        self.results.close()
        super().closeEvent(event)


def open_history() -> tuple[RunStore, UserError | None]:
    """The user's run history, or (when it cannot be used) one in memory and the sentence saying why."""
    try:
        return RunStore(), None
    except UserError as exc:  # the app still runs; runs are kept in memory only
        return RunStore(":memory:"), exc
