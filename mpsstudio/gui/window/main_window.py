"""The main window: setup sidebar, live plots, results. A thin view over the engine: runs go through RunWorker ->
engine.process.run_isolated (a process per run); nothing is measured or estimated here (progress and time left come
with the engine's events).

The window is one QMainWindow made of parts, one module each, that share its state: layout, menus, the catalogue,
run control, the run in progress, trained models, the launch benchmark, the tools, folders, dialogs and the
history. This module builds it, wires the panels, and keeps and restores its settings.
"""

from __future__ import annotations

from PySide6.QtCore import QCoreApplication, QEvent
from PySide6.QtWidgets import QMainWindow

from ...engine.basics.errors import UserError
from ...engine.history.store import RunStore
from ...engine.process import Spare
from ..banner import Banner
from ..plots import LivePlots
from ..output_view import OutputView
from ..results.panel import ResultsPanel
from ..settings import settings
from ..setup.panel import SetupPanel
from ..tools.panel import ToolsPanel
from ..worker import CatalogLoader, FolderChecker, RunWorker, ToolWorker
from .catalog import CatalogMixin
from .dialogs import DialogsMixin
from .folders import FoldersMixin
from .history import HistoryMixin
from .launch import LaunchMixin
from .layout import LayoutMixin
from .live import LiveMixin
from .menus import MenusMixin
from .runs import RunsMixin
from .tools import ToolsMixin
from .trained import TrainedModelsMixin

MAX_OVERLAY = 8  # stored runs drawn at once when several are selected (one colour each)
CLOSE_GRACE_S = 1.0  # closing mid-run: the run's time to stop itself before its process is ended (< 2 s in all)


class MainWindow(LayoutMixin, MenusMixin, CatalogMixin, RunsMixin, LiveMixin, TrainedModelsMixin,
                 LaunchMixin, ToolsMixin, FoldersMixin, DialogsMixin, HistoryMixin, QMainWindow):
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
        self.catalog: dict | None = None
        self.worker: RunWorker | None = None
        self.loader: CatalogLoader | None = None
        self.checkers: list[FolderChecker] = []
        self._pending_folder: str | None = None
        self.run_ended: list = []
        self.rejected = ""  # the sentence when the last setup could not run at all
        self.probing = False  # the launch benchmark's probe is running (its runs are not kept)
        self._launch_jobs = None
        self._epochs: dict[str, tuple[int, int]] = {}
        self._rechecking = False  # Check Again (the MPS banner) asked for the catalogue once more
        self.trained: dict[str, str] = {}  # run id -> its trained model kept in the cache (the last Run's)
        self.setup_window = None  # Help → PyTorch Setup, made when first asked for
        self.folder_summary = None  # the last checked folder's summary window

        store_problem = None
        if store is None:
            store, store_problem = open_history()
        self.store = store
        self.interrupted_notes = self._keep_interrupted()  # before the table reads the history
        self.setup = SetupPanel()
        self.plots = LivePlots()
        self.results = ResultsPanel(self.store)
        self.tools = ToolsPanel(self.store)
        self.output = OutputView()
        self.tool_worker: ToolWorker | None = None
        self.banner = Banner()
        self._build_layout()
        self._build_status_bar()
        self._build_menus()
        self._connect()
        self._restore_settings()
        if store_problem is not None:
            self._show_store_problem(store_problem)
        elif self.store.read_only:
            self.banner.show_message(f"The run history at {self.store.path} is read-only: earlier runs are shown, "
                                     "new runs will not be kept.", warning=True)
        self._show_store_notices()

    def _connect(self) -> None:
        self.setup.run_requested.connect(self.start_run)
        self.setup.stop_requested.connect(self.stop_run)
        self.setup.open_folder_requested.connect(self.open_folder)
        self.setup.script_requested.connect(self.run_script_dialog)
        self.results.message.connect(self.say)
        self.results.selection_changed.connect(self.show_selected_runs)
        self.results.save_model_requested.connect(lambda: self.save_trained_model())
        self.plots.emptied.connect(self._plots_emptied)
        self.results.export_comparison_to = self.export_comparison  # the button and ⌘E: one export, two PNGs
        self._plots_emptied(self.plots.is_empty())  # the state they started in (emitted before this connection)
        self.setup.changed.connect(self._fill_spare)  # another first device or fallback: another spare
        self.tools.sweep_requested.connect(self.sweep_sizes_of)
        self.tools.message.connect(self.say)
        self.tools.apply_requested.connect(self.apply_tuned_settings)

    # -- reviewing stored runs ------------------------------------------------------------------------------
    def show_selected_runs(self, ids: list) -> None:
        """Draw the selected runs' stored curves (up to MAX_OVERLAY, overlaid), unless a run is being drawn live."""
        if self.worker is not None:
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

    # -- settings and closing ---------------------------------------------------------------------------
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
        """Stop a running worker (it ends within one window), keep finished runs, leave no thread behind."""
        self._save_settings()
        if self.tool_worker is not None:
            self.tool_worker.stop()
            self.tool_worker.wait()
        if self.worker is not None:
            self.worker.stop(grace_s=CLOSE_GRACE_S)  # then its process is ended, whatever it is doing
            self.worker.wait()
            # deliver the worker's last queued events now, so the cancelled run is saved before we go
            QCoreApplication.sendPostedEvents(self, QEvent.MetaCall)
        self.setup.model_files.stop()
        self.spare.close()
        from ...engine.basics.paths import cache_dir

        self._forget_trained(cache_dir() / "trained-models")  # kept for Save Trained Model… until Quit
        for thread in [self.loader, *self.checkers, getattr(self, "recovering", None)]:
            if thread is not None and thread.isRunning():
                thread.wait()
        self.plots.close()
        self.results.close()
        super().closeEvent(event)


def open_history() -> tuple[RunStore, UserError | None]:
    """The user's run history, or (when it cannot be used) one in memory and the sentence saying why."""
    try:
        return RunStore(), None
    except UserError as exc:  # the app still runs; runs are kept in memory only
        return RunStore(":memory:"), exc
