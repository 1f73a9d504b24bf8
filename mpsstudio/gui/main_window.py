"""The main window: setup sidebar, live plots, results; menus, shortcuts, drag and drop, run lifecycle.

It is a thin view over the engine: runs go through RunWorker -> engine.process.run_isolated (a process per run); nothing is measured
or estimated here (progress and time left come with the engine's events).
About 550 lines, on purpose: the window's wiring (menus, run lifecycle, drops, exports, settings, closing)
in one place; every panel it wires lives in its own module.
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

from PySide6.QtCore import QCoreApplication, QEvent, QSize, Qt, QTimer, Slot
from PySide6.QtGui import QAction, QKeySequence
from PySide6.QtWidgets import (
    QFileDialog, QLabel, QMainWindow, QMessageBox, QProgressBar, QSplitter, QTabWidget,
    QVBoxLayout, QWidget,
)

from ..engine.tools import toolview
from ..engine.basics.config import RunConfig
from ..engine.basics.errors import UserError
from ..engine.basics.events import RECENT_WINDOWS, Ended, EpochEnd, Started, Warmup, Window
from ..engine.basics.formatting import fmt_duration, fmt_rate, one_line
from ..engine.basics.formatting import plural
from ..engine.process import STOP_GRACE_S, Spare
from ..engine.history.store import DamagedHistory, RunStore
from .banner import Banner
from .plots import LivePlots
from .settings import settings
from .results_panel import ResultsPanel
from .setup_panel import SetupPanel
from .tools_panel import ToolsPanel
from .worker import CatalogLoader, FolderChecker, RunWorker, ToolWorker

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
        self.setup = SetupPanel()
        self.plots = LivePlots()
        self.results = ResultsPanel(self.store)
        self.tools = ToolsPanel(self.store)
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

    # -- the history ---------------------------------------------------------------------------------------
    def _show_store_problem(self, problem: UserError) -> None:
        if isinstance(problem, DamagedHistory):
            self.banner.show_message(
                f"The run history at {problem.path} is damaged; it was left as it is. Recover… copies every "
                "readable run to a fresh history and keeps the damaged file; until then new runs are kept in "
                "memory only.", warning=True, action=("Recover…", lambda: self.recover_history(problem.path)))
        else:
            self.banner.show_message(f"{problem} New runs are kept in memory only.", warning=True)

    def _show_store_notices(self) -> None:
        for notice in [*self.store.notices, *getattr(self.store, "tool_notices", [])]:
            self.banner.show_message(notice, warning=True)

    def recover_history(self, path=None) -> None:
        """Copy every readable run of the damaged history to a fresh one (the damaged file is kept)."""
        from ..engine.history.recovery import recover

        try:
            kept, copied, lost = recover(path)
            store = RunStore()
        except UserError as exc:
            self.banner.show_message(str(exc), warning=True)
            return
        for result in self.results.results():  # runs of this session, kept in memory so far
            if not result.is_summary:  # (a summary came from a history, which is where its steps are)
                store.save(result)
        self.store = store
        self.results.set_store(store)
        lost_note = f", {lost} could not be read" if lost else ""
        self.banner.show_message(f"Recovered {plural(copied, 'run')}{lost_note}; the damaged file is kept as "
                                 f"{kept.name}.")

    # -- construction ------------------------------------------------------------------------------------
    def _build_layout(self) -> None:
        right = QWidget()
        rl = QVBoxLayout(right)
        rl.setContentsMargins(0, 0, 0, 0)
        rl.addWidget(self.banner)
        self.right_split = QSplitter(Qt.Vertical)
        self.right_split.addWidget(self.plots)
        self.tabs = QTabWidget()
        self.tabs.setDocumentMode(True)
        self.tabs.addTab(self.results, "Runs")
        self.tabs.addTab(self.results.details, "Details")  # the selected run: epochs, note, evaluation
        self.tabs.addTab(self.tools, "Tools")
        self.right_split.addWidget(self.tabs)
        self.right_split.setStretchFactor(0, 3)
        self.right_split.setStretchFactor(1, 2)
        self.right_split.setSizes([470, 450])
        self.right_split.setChildrenCollapsible(False)
        rl.addWidget(self.right_split, 1)
        self.main_split = QSplitter(Qt.Horizontal)
        self.main_split.addWidget(self.setup)
        self.main_split.addWidget(right)
        self.main_split.setStretchFactor(0, 0)
        self.main_split.setStretchFactor(1, 1)
        self.main_split.setSizes([330, 1110])
        self.main_split.setChildrenCollapsible(False)
        self.setCentralWidget(self.main_split)
        self.resize(1440, 900)
        # Tab goes down the setup to Run, then to the runs: filter, table, their buttons
        QWidget.setTabOrder(self.setup.run_button, self.results.filter)
        QWidget.setTabOrder(self.results.filter, self.results.table)

    def _build_status_bar(self) -> None:
        bar = self.statusBar()
        self.run_label = QLabel("")
        self.rate_label = QLabel("")
        self.progress = QProgressBar()
        self.progress.setMinimumWidth(200)
        self.progress.setMaximumWidth(260)
        self.progress.setFormat("")  # set_progress writes "step 84 / 188 · 45 %"
        self.progress.setTextVisible(True)
        self.progress.hide()
        bar.addPermanentWidget(self.run_label)
        bar.addPermanentWidget(self.rate_label)
        bar.addPermanentWidget(self.progress)
        bar.showMessage("Loading PyTorch…")

    def _action(self, text: str, slot, shortcut=None, role=None) -> QAction:
        action = QAction(text, self)
        if shortcut is not None:
            action.setShortcut(QKeySequence(shortcut))
        if role is not None:
            action.setMenuRole(role)
        action.triggered.connect(slot)
        return action

    def _build_menus(self) -> None:
        menu = self.menuBar()
        app_menu = menu.addMenu("MPS Studio")
        self.about_action = self._action("About MPS Studio", self.show_about, role=QAction.AboutRole)
        self.prefs_action = self._action("Preferences…", self.show_preferences, QKeySequence.Preferences,
                                         QAction.PreferencesRole)
        if self.prefs_action.shortcut().isEmpty():
            self.prefs_action.setShortcut(QKeySequence("Ctrl+,"))
        self.quit_action = self._action("Quit MPS Studio", self.close, QKeySequence.Quit, QAction.QuitRole)
        if self.quit_action.shortcut().isEmpty():
            self.quit_action.setShortcut(QKeySequence("Ctrl+Q"))
        for a in (self.about_action, self.prefs_action, self.quit_action):
            app_menu.addAction(a)

        file_menu = menu.addMenu("File")
        file_menu.addAction(self._action("Open Folder…", self.open_folder, QKeySequence.Open))
        file_menu.addSeparator()
        file_menu.addAction(self._action("Import Runs…", self.results.import_dialog, "Ctrl+I"))
        file_menu.addAction(self._action("Export Selected Runs as CSV…", self.results.export_csv_dialog))
        file_menu.addAction(self._action("Export Selected Runs as JSON…", self.results.export_json_dialog))
        file_menu.addAction(self._action("Export Comparison…", self.export_comparison_dialog, "Ctrl+E"))
        file_menu.addAction(self._action("Export Loss Curve as CSV…", lambda: self.results.export_steps_dialog()))
        file_menu.addAction(self._action("Save Trained Model…", lambda: self.save_trained_model(), "Ctrl+Shift+S"))
        file_menu.addSeparator()
        self.close_action = self._action("Close Window", self.close)
        # ⌘W on a Mac ("Ctrl" is ⌘ there), and the platform's own Close where it differs (Ctrl+F4 elsewhere)
        self.close_action.setShortcuts(list(dict.fromkeys([QKeySequence("Ctrl+W"),
                                                           *QKeySequence.keyBindings(QKeySequence.Close)])))
        file_menu.addAction(self.close_action)

        edit_menu = menu.addMenu("Edit")
        self.undo_action = self._action("Undo Delete", self.results.undo_delete, QKeySequence.Undo)
        self.undo_action.setEnabled(False)
        self.results.undo_bar.timer.timeout.connect(lambda: self.undo_action.setEnabled(False))
        self.results.message.connect(lambda _: self.undo_action.setEnabled(self.results.undo_bar.can_undo()))
        edit_menu.addAction(self.undo_action)
        edit_menu.addSeparator()
        edit_menu.addAction(self._action("Find Runs", self.find_runs, QKeySequence.Find))
        edit_menu.addAction(self._action("Select All Runs", self.results.table.selectAll, QKeySequence.SelectAll))

        run_menu = menu.addMenu("Run")
        self.run_action = self._action("Run", self.start_run, "Ctrl+R")
        self.stop_action = self._action("Stop", self.stop_run, "Ctrl+.")
        self.run_action.setEnabled(False)
        self.stop_action.setEnabled(False)
        run_menu.addAction(self.run_action)
        run_menu.addAction(self.stop_action)
        run_menu.addSeparator()
        self.launch_action = self._action("PyTorch Launch Benchmark…", self.launch_benchmark)
        self.launch_action.setEnabled(False)
        run_menu.addAction(self.launch_action)

        tools_menu = menu.addMenu("Tools")
        self.tool_actions = [
            self._action("Batch-Size Sweep", lambda: self.start_tool("sweep"), "Ctrl+Shift+B"),
            self._action("Find Largest Batch", lambda: self.start_tool("max-batch"), "Ctrl+Shift+M"),
            self._action("Inspect Model (CPU Fallback, Parity)", lambda: self.start_tool("inspect"), "Ctrl+Shift+I"),
        ]
        for a in self.tool_actions:
            a.setEnabled(False)
            tools_menu.addAction(a)

        window_menu = menu.addMenu("Window")
        window_menu.addAction(self._action("Minimize", self.showMinimized, "Ctrl+M"))
        window_menu.addAction(self._action("Zoom", self._zoom))
        window_menu.addSeparator()
        window_menu.addAction(self._action("Show Runs", lambda: self._show_tab(0), "Ctrl+1"))
        window_menu.addAction(self._action("Show Run Details", lambda: self._show_tab(1), "Ctrl+2"))
        window_menu.addAction(self._action("Show Tools", lambda: self._show_tab(2), "Ctrl+3"))

        help_menu = menu.addMenu("Help")
        help_menu.addAction(self._action("PyTorch Setup…", self.show_doctor))

    def find_runs(self) -> None:
        """⌘F: the Runs tab's filter box, text selected."""
        self._show_tab(0)
        self.results.filter.setFocus(Qt.FocusReason.ShortcutFocusReason)
        self.results.filter.selectAll()

    def _show_tab(self, index: int) -> None:
        self.tabs.setCurrentIndex(index)

    def _zoom(self) -> None:
        self.showNormal() if self.isMaximized() else self.showMaximized()

    def _connect(self) -> None:
        self.setup.run_requested.connect(self.start_run)
        self.setup.stop_requested.connect(self.stop_run)
        self.setup.open_folder_requested.connect(self.open_folder)
        self.results.message.connect(self.say)
        self.results.selection_changed.connect(self.show_selected_runs)
        self.results.save_model_requested.connect(lambda: self.save_trained_model())
        self.plots.emptied.connect(self._plots_emptied)

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

    def _plots_emptied(self, empty: bool) -> None:
        """No curves: the plots shrink to a line of hint and the table below gets the room."""
        total = sum(self.right_split.sizes()) or 920
        hint = self.plots.minimumSizeHint().height() + 8
        self.right_split.setSizes([hint, total - hint] if empty else [round(total * 0.52), round(total * 0.48)])

    # -- loading ----------------------------------------------------------------------------------------
    @Slot()
    def start_loading(self) -> None:
        """Import torch and list models, datasets and devices off the GUI thread."""
        self.loader = CatalogLoader(self)
        self.loader.loaded.connect(self._on_catalog)
        self.loader.failed.connect(self._on_catalog_failed)
        self.loader.start()

    def _on_catalog(self, catalog: dict) -> None:
        self.catalog = catalog
        if self.setup_window is not None:
            self.setup_window.show_rows(catalog.get("setup"))
        self.setup.set_catalog(catalog["models"], catalog["datasets"], catalog["devices"])
        last = settings().value("run/last_config")
        if last and not self.demo:
            try:
                devices = json.loads(settings().value("run/last_devices") or "null")
                self.setup.apply_config(RunConfig.from_dict(json.loads(last)), devices)
            except (ValueError, TypeError):
                pass
        self.run_action.setEnabled(True)
        self.launch_action.setEnabled(True)
        for a in self.tool_actions:
            a.setEnabled(True)
        if self._pending_folder:
            self.check_folder(self._pending_folder)
            self._pending_folder = None
        available = [d.id for d in catalog["devices"] if d.available]
        self.say(f"Ready: {', '.join(available)} available. Press Run (⌘R) to measure.")
        broken = [(d, c) for d, c in (catalog.get("checks") or {}).items() if not c.ok]
        mps_text = catalog.get("mps_banner") or ""
        if mps_text:  # on a Mac: why the Apple GPU cannot be used, the fix, and a way to look again
            self.banner.show_message(mps_text, warning=True, action=("Check Again", self.check_devices_again),
                                     kind="mps")
        elif self._rechecking:
            self.banner.clear("mps")
            if any(d.kind == "mps" and d.available for d in catalog["devices"]):
                self.say("The Apple GPU (MPS) works now.")
        if broken and not mps_text:
            device, check = broken[0]
            self.banner.show_message(f"{device} reports itself available but is not working: {check.detail}. "
                                     f"It is left out of runs; this happens in virtual machines.", warning=True)
        self._rechecking = False
        if self.keep_spare:
            QTimer.singleShot(0, self.spare.fill)  # after the window is painted: imports torch in the background
        if self.demo:
            QTimer.singleShot(0, self.start_run)

    def check_devices_again(self) -> None:
        """Look for the devices again (a fresh probe in a run process), e.g. after fixing what the banner said."""
        if self.loader is not None and self.loader.isRunning():
            return
        self._rechecking = True
        self.say("Checking the devices again…")
        self.start_loading()

    def _on_catalog_failed(self, message: str) -> None:
        self.banner.show_message(message, warning=True)
        self.say(message)
        if self.demo:
            self._finish_demo(1, message)

    # -- running ----------------------------------------------------------------------------------------
    @Slot()
    def start_run(self) -> None:
        if self.worker is not None or self.catalog is None:
            return
        configs = self.setup.configs()
        if not configs:
            self.say("Check at least one available device, then press Run.")
            return
        allowed = self.setup.confirm_model_file()
        if allowed is not True:
            message = allowed or "Not run: the model file's code runs only if you allow it."
            self.say(message)
            if allowed:
                self.banner.show_message(message, warning=True)
            return
        from .preferences import Preferences

        prefs = Preferences.load()
        for cfg in configs:
            prefs.apply(cfg)
        settings().setValue("run/last_config", json.dumps(configs[0].to_dict()))
        settings().setValue("run/last_devices", json.dumps([c.device for c in configs]))
        from ..engine.analysis.repeat import interleave

        order, tags = interleave(configs, self.setup.rounds())
        self._start_worker(order, tags)

    def _start_worker(self, configs, tags, probing: bool = False) -> None:
        self.plots.clear()
        self.banner.clear("run")  # the last run's failure no longer applies
        self.run_ended = []
        self.rejected = ""
        self.probing = probing  # a launch-benchmark probe: its runs estimate the time and are not kept
        self.worker = RunWorker(configs, self, spare=self.spare if self.keep_spare else None, repeat=tags,
                                save_models=None if probing else self._model_slots(configs))
        self.worker.event.connect(self._on_event)
        self.worker.progress.connect(self._on_download)
        self.worker.rejected.connect(self._on_rejected)
        self.worker.all_done.connect(self._on_all_done)
        self._set_running(True)
        self.say("Loading the dataset…")
        self.worker.start()

    # -- the measuring tools ------------------------------------------------------------------------------
    def start_tool(self, kind: str, config: RunConfig | None = None) -> None:
        """Run a tool on the setup's config: a sweep over every checked device; max-batch and inspect on the first
        checked accelerator (else the CPU). `config`: a run's own config (the inspection after an MPS run, whose
        model file the user already allowed). Its result lands in the Tools tab and the history."""
        if self.worker is not None or self.tool_worker is not None or self.catalog is None:
            return
        if config is None:
            configs = self.setup.configs()
            if not configs:
                self.say("Check at least one available device, then choose the tool again.")
                return
            allowed = self.setup.confirm_model_file()
            if allowed is not True:
                self.say(allowed or "Not run: the model file's code runs only if you allow it.")
                return
            devices = [c.device for c in configs]
            config = next((c for c in configs if c.device != "cpu"), configs[0])
        else:
            devices = [config.device]
        self.tool_worker = ToolWorker(kind, config, devices, self.store, self)
        self.tool_worker.progress.connect(self.say)
        self.tool_worker.done.connect(self._on_tool_done)
        self.tool_worker.rejected.connect(self._on_tool_rejected)
        self.tool_worker.finished.connect(self._on_tool_finished)
        self.banner.hide()
        self._set_running(True)
        where = ", ".join(devices) if kind == "sweep" else config.device
        self.say(f"{toolview.TITLES[kind]} of {config.model} on {where}…")
        self.tool_worker.start()

    def _on_tool_done(self, record, why_not_kept: str) -> None:
        self.tools.add(record)
        if record.kind == "inspect":  # the verdict names its findings (kept in memory when the history is not)
            self.results.add_inspection(record.result)
        self.tabs.setCurrentWidget(self.tools)
        self.say(record.result.get("sentence", ""))
        if why_not_kept:
            self.banner.show_message(f"This result was not kept ({why_not_kept}); it stays in the Tools tab until "
                                     f"you quit.", warning=True)

    def _on_tool_rejected(self, message: str) -> None:
        self.banner.show_message(message, warning=True)
        self.say(message)

    def _on_tool_finished(self) -> None:
        worker, self.tool_worker = self.tool_worker, None
        if worker is not None:
            worker.deleteLater()
        self._set_running(False)

    @Slot()
    def stop_run(self) -> None:
        if self.tool_worker is not None:
            self.tool_worker.stop()
            self._stopping()
            self.say("Stopping the tool… (what it found so far is kept)")
        if self.worker is not None:
            self.worker.stop()
            self._stopping()
            self.say(f"Stopping… (a run that does not stop within {STOP_GRACE_S:g} s has its process ended)")

    def _model_slots(self, configs) -> list:
        """Where each training run of this Run keeps its trained model, in the cache folder; the last Run's
        models are kept (until the next Run or Quit), older ones are removed. None for an inference run."""
        from ..engine.basics.paths import cache_dir

        folder = cache_dir() / "trained-models"
        try:
            folder.mkdir(parents=True, exist_ok=True)
            self._forget_trained(folder)
        except OSError:
            return [None] * len(configs)  # nothing can be kept: Save Trained Model… will say so
        self.trained = {}
        stamp = f"{os.getpid()}-{int(time.time() * 1000)}"
        return [str(folder / f"{stamp}-{i}.pt") if c.mode == "train" else None for i, c in enumerate(configs)]

    @staticmethod
    def _forget_trained(folder: Path) -> None:
        """Remove this window's kept models, and any another window left over a day ago (a crash, say)."""
        if not folder.is_dir():
            return
        mine = f"{os.getpid()}-"
        for old in folder.iterdir():
            try:
                if old.suffix in (".pt", ".json") and old.is_file() and (
                        old.name.startswith(mine) or time.time() - old.stat().st_mtime > 86_400):
                    old.unlink()
            except OSError:
                continue

    def save_trained_model(self, path: str | None = None) -> str | None:
        """Save the current run's trained model (weights + JSON) where the user says; returns the path written."""
        from ..engine.models import saved as savedmodel

        runs = self.results.whole_runs(self.results.selected_ids()[:1])
        if not runs:
            self.say("Select a finished training run first; its trained model can be saved.")
            return None
        run = runs[0]
        kept = self.trained.get(run.id) or run.summary.get("saved_model")
        if run.status != "finished" or run.config.mode != "train" or not kept:
            why = run.summary.get("saved_model_error") or (
                "only a finished training run of the last Run has its model kept; run it again to save it")
            self.say(f"No trained model to save: {why}.")
            return None
        if path is None:
            name = f"{run.config.model}-{run.config.dataset}-{run.config.device.replace(':', '')}.pt"
            path, _ = QFileDialog.getSaveFileName(self, "Save Trained Model", str(Path.home() / name),
                                                  "PyTorch weights (*.pt)")
            if not path:
                return None
            if not path.endswith(".pt"):
                path += ".pt"
        try:
            written = savedmodel.copy_saved(kept, path)
        except UserError as exc:
            self.say(str(exc))
            return None
        self.say(f"Saved the trained model to {written.name} and {savedmodel.meta_path(written).name}.")
        return str(written)

    def _stopping(self) -> None:
        self.stop_action.setEnabled(False)
        self.setup.set_stopping()

    # -- the launch benchmark preset ---------------------------------------------------------------------
    @Slot()
    def launch_benchmark(self) -> None:
        """PyTorch's launch workloads on every available device: a short probe first, whose estimate the user
        sees before anything long starts; then ordinary runs (stored, compared, stoppable with Stop)."""
        from ..engine.tools import launch

        if self.worker is not None or self.catalog is None:
            return
        devices = [d.id for d in self.catalog["devices"] if d.available]
        jobs = launch.plan(devices)
        runs = sum(len(j.configs) for j in jobs)
        text = (f"ResNet50 (batch 128), BERT-base (batch 64) and VGG16 (batch 64), in training and inference, on "
                f"{', '.join(devices)}: {runs} runs of {launch.DEFAULT_STEPS} measured steps, compared with the "
                f"published claim ({launch.CLAIMS['train'][1]} training, {launch.CLAIMS['inference'][1]} "
                f"evaluation on an M1 Ultra).\n\nA short probe on each device first estimates how long it takes; "
                "you decide then.")
        if not self.ask("PyTorch Launch Benchmark", text, "Estimate"):
            return
        self._launch_jobs = jobs
        self._start_worker([launch.PROBE.with_device(d) for d in devices], None, probing=True)
        self.say("Probing each device to estimate the launch benchmark's time…")

    def _after_probe(self) -> None:
        from ..engine.tools import launch

        jobs, self._launch_jobs = self._launch_jobs, None
        probes = {r.config.device: r.summary.get("samples_per_s") for r in self.run_ended if r.status == "finished"}
        devices = [c.device for c in jobs[0].configs]
        estimate = launch.estimate_s(jobs, {d: probes.get(d) for d in devices})
        known = [v for v in estimate.values() if v is not None]
        total = f"{launch.fmt_estimate(sum(known))} in all" if known else "unknown"
        lines = "\n".join(f"{d}: {launch.fmt_estimate(estimate[d])}" for d in devices)
        text = (f"Estimated time (from the probe; it can be off by 2-3\u00d7):\n{lines}\n{total}.\n\n"
                "Stop (\u2318.) ends it at any time; the runs done so far are kept.")
        if self.ask("PyTorch Launch Benchmark", text, "Start"):
            configs = [c for job in jobs for c in job.configs]
            self._start_worker(configs, None)
            self.say(f"Launch benchmark: {len(configs)} runs.")
        else:
            self.say("Launch benchmark not started.")

    def ask(self, title: str, text: str, yes: str) -> bool:
        """A question with a named default button; tests replace it."""
        box = QMessageBox(QMessageBox.Icon.Question, title, text, parent=self)
        go = box.addButton(yes, QMessageBox.ButtonRole.AcceptRole)
        box.addButton(QMessageBox.StandardButton.Cancel)
        box.setDefaultButton(go)
        box.exec()
        return box.clickedButton() is go

    def _set_running(self, running: bool) -> None:
        self.setup.set_running(running)
        self.launch_action.setEnabled(not running and self.catalog is not None)
        for a in self.tool_actions:
            a.setEnabled(not running and self.catalog is not None)
        self.run_action.setEnabled(not running and self.catalog is not None)
        self.stop_action.setEnabled(running)
        self.progress.setVisible(running)
        if not running:
            self.run_label.setText("")
            self.rate_label.setText("")

    def set_progress(self, done: int) -> None:
        """The status bar's bar and its words: "step 84 / 188 · 45 %" (Qt's own %p would say 44)."""
        total = self.progress.maximum()
        self.progress.setValue(min(done, total))
        self.progress.setFormat(f"step {done:,} / {total:,} \u00b7 {round(100 * done / total) if total else 0} %")

    def _on_download(self, message: str, fraction: float) -> None:
        self.say(f"{message} {fraction:.0%}")

    def _on_event(self, event) -> None:
        if isinstance(event, Started):
            device = event.config["device"]
            epochs = event.config.get("epochs") if event.config.get("steps") is None else None
            if epochs:
                self._epochs[event.run_id] = (epochs, event.total_steps)
            self.plots.start_run(event.run_id, device, event.warmup_steps)
            threads, cores = event.env.get("threads"), os.cpu_count() or 1
            self.plots.set_cores_busy(device == "cpu" and isinstance(threads, int) and threads >= cores)
            self.progress.setRange(0, max(1, event.total_steps))
            self.set_progress(0)
            where = f"run {event.run_index} of {event.run_count}: " if event.run_count > 1 else ""
            self.run_label.setText(f"{where}{device}")
            self.say(f"{device}: warming up ({event.warmup_steps} steps; timed apart)…")
            for note in event.notes:
                self.banner.show_message(note)
            meter = event.env.get("energy") if isinstance(event.env.get("energy"), dict) else {}
            reason = meter.get("reason")
            self.plots.set_power_note(f"Power of {device} not measured: {one_line(str(reason), 120)}" if reason
                                      else "")
        elif isinstance(event, Warmup):
            self.plots.add_warmup(self._current_id(), event.losses, event.seconds)
            self.set_progress(event.steps)
            self.say(f"Warm-up took {fmt_duration(event.seconds)}; measuring…")
        elif isinstance(event, Window):
            power = event.power_w
            self.plots.add_window(self._current_id(), event.first_step, event.losses, event.samples_per_s,
                                  event.memory, power, seconds=event.seconds)
            self.set_progress(event.steps_done)
            left = f" · {fmt_duration(event.eta_s)} left (estimated)" if event.eta_s is not None else ""
            watts = f" · {power:,.0f} W" if power is not None else ""
            rate = event.recent_samples_per_s if event.recent_samples_per_s is not None else event.samples_per_s
            self.rate_label.setText(f"{fmt_rate(rate)} samples/s{watts}{left}")
            self.rate_label.setToolTip(f"Samples/s: the median of the last {RECENT_WINDOWS} measurement windows "
                                       "(one window's rate jumps). Time left: the steps left at the pace of every "
                                       "step since warm-up, validation included (the engine's estimate).")
        elif isinstance(event, EpochEnd):
            run_id = self._current_id()
            epochs, total = self._epochs.get(run_id, (0, 0))
            if event.step is not None:
                self.plots.add_epoch(run_id, event.step, event.val_loss)
            elif epochs:
                self.plots.add_epoch(run_id, event.epoch * total // epochs, event.val_loss)
            if event.val_accuracy is not None:
                self.say(f"Epoch {event.epoch}: validation accuracy {event.val_accuracy:.1%}")
        elif isinstance(event, Ended):
            self._on_run_ended(event.result)

    def _current_id(self) -> str:
        ids = self.plots.run_ids()
        return ids[-1] if ids else ""

    def _on_run_ended(self, result) -> None:
        self.run_ended.append(result)
        if self.probing:
            if result.id in self.plots.run_ids():
                self.plots.finish_run(result.id, result.status)
            return
        try:
            self.store.save(result)
        except UserError as exc:  # locked, read-only, full: the run stays in the table for this session
            self.banner.show_message(f"This run was not kept: {exc} It stays in the table until you quit; "
                                     "Export JSON keeps a copy.", warning=True)
        if result.summary.get("saved_model"):
            self.trained[result.id] = result.summary["saved_model"]
        self.results.add_result(result)
        if result.id in self.plots.run_ids():
            self.plots.finish_run(result.id, result.status)
        device = result.config.device
        if result.status == "finished":
            sps = result.summary.get("samples_per_s")
            text = (f"{device}: finished, {fmt_rate(sps)} samples/s (median of {result.summary.get('windows')} "
                    f"windows)." if sps else f"{device}: finished.")
            if result.summary.get("stability") == "noisy":
                text += f" Noisy: {result.summary.get('stability_reason')}."
            if result.summary.get("stopped_early_reason"):
                text += (f" Stopped early after epoch {result.summary.get('stopped_early_epoch')}: "
                         f"{result.summary['stopped_early_reason']}.")
            self.say(text)
        elif result.status == "cancelled":
            self.say(f"{device}: stopped; the run is kept as cancelled.")
        else:
            self.say(f"{device}: {result.error}")
            self.banner.show_message(f"{device}: {result.error}", warning=True, kind="run")

    def _on_rejected(self, message: str) -> None:
        """The setup cannot run at all (a dataset that does not load, say): one sentence, nothing recorded."""
        self.rejected = message
        self.say(message)
        self.banner.show_message(message, warning=True, kind="run")

    def _on_all_done(self) -> None:
        worker, self.worker = self.worker, None
        if worker is not None:
            worker.wait()
            worker.deleteLater()
        self._set_running(False)
        self.plots.set_cores_busy(False)
        self.plots.redraw()
        if self.keep_spare:
            self.spare.fill()  # idle again: the next Run starts without waiting for torch
        if self.probing:
            self.probing = False
            if self._launch_jobs is not None and not self.rejected:
                QTimer.singleShot(0, self._after_probe)
            return
        kept = [r.id for r in self.run_ended if self.results.model.row_of(r.id) is not None]
        if kept:  # the Run's runs selected and drawn from what was kept: a failed run's last steps included
            self.results.select_ids(kept)
            self.show_selected_runs(self.results.selected_ids())  # (the selection may not have changed)
        if self.demo:
            failed = [f"{r.config.device}: {r.error}" for r in self.run_ended if r.status != "finished"]
            failed += [self.rejected] if self.rejected else []
            self._finish_demo(1 if failed else 0, "; ".join(failed))
            return
        mps = next((r for r in self.run_ended if r.status == "finished" and r.config.device == "mps"), None)
        if mps is not None:  # what the verdict needs to explain MPS: its CPU fallbacks and parity (Tools tab)
            QTimer.singleShot(0, lambda: self.start_tool("inspect", mps.config))

    def _finish_demo(self, code: int, message: str = "") -> None:
        self.exit_code = code
        if message:
            print(f"mpsstudio: {message}", file=sys.stderr)
        QTimer.singleShot(300, self._demo_screenshot_and_quit)

    def _demo_screenshot_and_quit(self) -> None:
        if self.demo_screenshot:
            self.plots.redraw()
            if not self.grab().save(self.demo_screenshot):
                print(f"mpsstudio: could not write the screenshot to {self.demo_screenshot}.", file=sys.stderr)
                self.exit_code = self.exit_code or 1
            else:
                print(f"screenshot saved to {self.demo_screenshot}")
        self.close()

    # -- folders: drop and open ---------------------------------------------------------------------------
    def dragEnterEvent(self, event) -> None:
        if event.mimeData().hasUrls():
            event.acceptProposedAction()

    def dropEvent(self, event) -> None:
        urls = event.mimeData().urls()
        event.acceptProposedAction()
        self.handle_drop([u.toLocalFile() for u in urls])

    def handle_drop(self, paths: list[str]) -> None:
        """A drop: exactly one folder is checked with the engine; anything else is explained inline."""
        paths = [p for p in paths if p]
        if len(paths) != 1:
            self.banner.show_message(
                f"Drop one folder at a time (that was {len(paths)} items); it should hold one subfolder of "
                f"images per class.", warning=True)
            return
        path = Path(paths[0])
        if path.is_file():
            self.banner.show_message(
                f"{path.name} is a file; drop a folder that holds one subfolder of images per class.", warning=True)
            return
        self.check_folder(str(path))

    def check_folder(self, path: str) -> None:
        if self.catalog is None:  # e.g. a folder dropped on the Dock icon at launch: check it once loaded
            self._pending_folder = path
            self.banner.show_message(f"{Path(path).name} will be checked as soon as PyTorch has loaded…")
            return
        self.banner.show_message(f"Checking {Path(path).name}…")
        checker = FolderChecker(path, self)
        checker.checked.connect(self._on_folder_ok)
        checker.rejected.connect(self._on_folder_rejected)
        # a bound method, not a lambda: Qt drops the connection if the window goes first
        checker.finished.connect(self._forget_finished_checkers)
        self.checkers.append(checker)
        checker.start()

    @Slot()
    def _forget_finished_checkers(self) -> None:
        for checker in [c for c in self.checkers if c.isFinished()]:
            self.checkers.remove(checker)
            checker.wait()  # `finished` comes just before the thread ends: deleting it sooner aborts the app
            checker.deleteLater()

    def _on_folder_ok(self, path: str, report) -> None:
        self.setup.add_folder_dataset(path, report)
        self.banner.show_message(f"{Path(path).name}: {report.summary()}. Selected as the dataset.")
        self.show_folder_summary(report)

    def show_folder_summary(self, report) -> None:
        """What the folder holds, its split and the size the chosen model gets (a window of its own)."""
        from ..engine.models import registry as models
        from ..engine.basics.errors import UserError as _UserError
        from .folder_summary import FolderSummary

        configs = self.setup.configs()
        model = configs[0].model if configs else (self.setup.model_combo.currentData() or "mlp")
        try:
            size = models.input_size_for_folder(model, report, configs[0].image_size if configs else None)
        except (_UserError, ValueError, KeyError):
            size = None  # a model file's needs are known once it runs
        seed = configs[0].seed if configs else 0
        if self.folder_summary is not None:
            self.folder_summary.close()
        self.folder_summary = FolderSummary(report, str(model), size, seed, self)
        self.folder_summary.show()

    def _on_folder_rejected(self, path: str, message: str) -> None:
        self.banner.show_message(message, warning=True)

    @Slot()
    def open_folder(self) -> None:
        path = QFileDialog.getExistingDirectory(self, "Open an image folder (one subfolder per class)")
        if path:
            self.check_folder(path)

    # -- export, dialogs ------------------------------------------------------------------------------------
    @Slot()
    def export_comparison_dialog(self) -> None:
        path, _ = QFileDialog.getSaveFileName(self, "Export comparison", "comparison.png", "PNG image (*.png)")
        if path:
            self.export_comparison(path)

    def export_comparison(self, path: str) -> tuple[str, str] | None:
        """The results panel with its chart, and the plots beside it (PATH-plots.png); titles make each readable."""
        from .export import render_png

        try:
            results_png = self.results.export_comparison_png(path)
            stem = Path(results_png)
            plots_png = str(stem.with_name(stem.stem + "-plots.png"))
            title, subtitle = self.results.comparison_title()
            comparison = self.results.current_comparison()
            plots = LivePlots()  # the comparison's own stored curves, whatever the window shows now
            plots.setAttribute(Qt.WidgetAttribute.WA_DontShowOnScreen)
            plots.resize(self.plots.size() if self.plots.width() > 400 else QSize(1100, 640))
            plots.show()
            try:
                plots.set_x_axis(self.plots.x_axis())
                plots.set_smoothing(self.plots.smoothing())
                plots.show_runs(self.results.whole_runs([r.id for r in comparison.runs]))
                render_png(plots, plots_png, f"Curves · {title}", subtitle)
            finally:
                plots.close()
                plots.deleteLater()
        except UserError as exc:
            self.say(str(exc))
            return None
        self.say(f"Saved {Path(results_png).name} and {Path(plots_png).name}.")
        return results_png, plots_png

    @Slot()
    def show_about(self) -> None:
        from PySide6.QtCore import QUrl
        from PySide6.QtGui import QDesktopServices

        from .. import __version__
        from ..engine.basics.paths import log_dir

        torch_version = sys.modules["torch"].__version__ if "torch" in sys.modules else "loading…"
        box = QMessageBox(self)
        box.setWindowTitle("About MPS Studio")
        box.setIconPixmap(self.windowIcon().pixmap(64, 64))
        box.setText(f"<h3>MPS Studio {__version__}</h3>")
        box.setInformativeText(
            f"<p>How fast does PyTorch train on your Mac's GPU (MPS) compared with its CPU? "
            f"Warm-up timed apart, the device synchronized before every clock read, medians over windows.</p>"
            f"<p>PyTorch {torch_version}<br>Each run in its own process; CPU fallback for MPS: a per-run "
            f"option (Advanced), on by default<br>History: {self.store.path}<br>"
            f"Logs and crash reports: {log_dir()}</p>")
        logs = box.addButton("Show Logs", QMessageBox.ActionRole)
        box.addButton(QMessageBox.Close)
        box.exec()
        if box.clickedButton() is logs:
            log_dir().mkdir(parents=True, exist_ok=True)
            QDesktopServices.openUrl(QUrl.fromLocalFile(str(log_dir())))

    @Slot()
    def show_preferences(self) -> None:
        from .preferences import PreferencesDialog

        PreferencesDialog(self.store.path, self).exec()

    @Slot()
    def show_doctor(self) -> None:
        """Help → PyTorch Setup: a window of its own (not modal), refreshed when the devices are checked again."""
        from .setup_window import SetupWindow

        if self.setup_window is None:
            self.setup_window = SetupWindow(self)
            self.setup_window.check_again.connect(self.check_devices_again)
        self.setup_window.show_rows((self.catalog or {}).get("setup") if self.catalog else None)
        self.setup_window.show()
        self.setup_window.raise_()
        self.setup_window.activateWindow()

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
        from ..engine.basics.paths import cache_dir

        self._forget_trained(cache_dir() / "trained-models")  # kept for Save Trained Model… until Quit
        for thread in [self.loader, *self.checkers]:
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
