"""The window's menus, actions and shortcuts."""

from __future__ import annotations

from typing import TYPE_CHECKING


from PySide6.QtCore import QObject, Qt
from PySide6.QtGui import QAction, QKeySequence

if TYPE_CHECKING:
    from .main_window import MainWindow


class Menus(QObject):
    """The menus and their shortcuts (the macOS conventions: ⌘R Run, ⌘. Stop, ⌘W, ⌘1-4, ⌘F), what the Window and
    Edit menus do, and which commands are on: those that start something while the window's state allows it
    (`show_state`)."""

    def __init__(self, w: MainWindow):  # the window that holds it
        super().__init__(w)
        self.w = w

    def _action(self, text: str, slot, shortcut=None, role=None) -> QAction:
        action = QAction(text, self.w)
        if shortcut is not None:
            action.setShortcut(QKeySequence(shortcut))
        if role is not None:
            action.setMenuRole(role)
        action.triggered.connect(slot)
        return action

    def build(self) -> None:
        w = self.w
        menu = w.menuBar()
        app_menu = menu.addMenu("MPS Studio")
        self.about_action = self._action("About MPS Studio", w.show_about, role=QAction.MenuRole.AboutRole)
        self.prefs_action = self._action("Preferences…", w.show_preferences, QKeySequence.StandardKey.Preferences,
                                         QAction.MenuRole.PreferencesRole)
        if self.prefs_action.shortcut().isEmpty():
            self.prefs_action.setShortcut(QKeySequence("Ctrl+,"))
        self.quit_action = self._action("Quit MPS Studio", w.close, QKeySequence.StandardKey.Quit, QAction.MenuRole.QuitRole)
        if self.quit_action.shortcut().isEmpty():
            self.quit_action.setShortcut(QKeySequence("Ctrl+Q"))
        for a in (self.about_action, self.prefs_action, self.quit_action):
            app_menu.addAction(a)

        file_menu = menu.addMenu("File")
        file_menu.addAction(self._action("Open Folder…", w.open_folder, QKeySequence.StandardKey.Open))
        self.file_script_action = self._action("Run Your Training Script…", w.run_script_dialog)
        self.file_script_action.setEnabled(False)
        file_menu.addAction(self.file_script_action)
        file_menu.addSeparator()
        file_menu.addAction(self._action("Import Runs…", w.results.files.import_dialog, "Ctrl+I"))
        self.push_action = self._action("Push to Team Server", w.results.team.push)
        self.pull_action = self._action("Pull from Team Server…", w.results.team.pull)
        w.results.team.busy.connect(self._team_busy)
        file_menu.addAction(self.push_action)
        file_menu.addAction(self.pull_action)
        file_menu.addAction(self._action("Export Selected Runs as CSV…", w.results.files.export_csv_dialog))
        file_menu.addAction(self._action("Export Selected Runs as JSON…", w.results.files.export_json_dialog))
        file_menu.addAction(self._action("Export Comparison…", w.results.files.export_comparison_dialog, "Ctrl+E"))
        file_menu.addAction(self._action("Export Report…", self.export_report, "Ctrl+Alt+E"))
        file_menu.addAction(self._action("Export Loss Curve as CSV…", lambda: w.results.files.export_steps_dialog()))
        file_menu.addAction(self._action("Save Trained Model…", lambda: w.save_trained_model(), "Ctrl+Shift+S"))
        file_menu.addSeparator()
        self.close_action = self._action("Close Window", w.close)
        # ⌘W on a Mac ("Ctrl" is ⌘ there), and the platform's own Close where it differs (Ctrl+F4 elsewhere)
        self.close_action.setShortcuts(list(dict.fromkeys([QKeySequence("Ctrl+W"),
                                                           *QKeySequence.keyBindings(QKeySequence.StandardKey.Close)])))
        file_menu.addAction(self.close_action)

        edit_menu = menu.addMenu("Edit")
        self.undo_action = self._action("Undo Delete", w.results.deleter.undo, QKeySequence.StandardKey.Undo)
        self.undo_action.setEnabled(False)
        w.results.undo_bar.timer.timeout.connect(lambda: self.undo_action.setEnabled(False))
        w.results.message.connect(lambda _: self.undo_action.setEnabled(w.results.undo_bar.can_undo()))
        edit_menu.addAction(self.undo_action)
        edit_menu.addSeparator()
        edit_menu.addAction(self._action("Copy as Markdown", self.copy_markdown, "Ctrl+Shift+C"))
        edit_menu.addAction(self._action("Find Runs", self.find_runs, QKeySequence.StandardKey.Find))
        edit_menu.addAction(self._action("Select All Runs", w.results.table.selectAll, QKeySequence.StandardKey.SelectAll))

        run_menu = menu.addMenu("Run")
        self.run_action = self._action("Run", w.start_run, "Ctrl+R")
        self.stop_action = self._action("Stop", w.stop_run, "Ctrl+.")
        self.run_action.setEnabled(False)
        self.stop_action.setEnabled(False)
        run_menu.addAction(self.run_action)
        run_menu.addAction(self.stop_action)
        run_menu.addSeparator()
        self.script_action = self._action("Run Your Training Script…", w.run_script_dialog, "Ctrl+Shift+R")
        self.script_action.setEnabled(False)
        run_menu.addAction(self.script_action)
        self.launch_action = self._action("PyTorch Launch Benchmark…", w.launch_benchmark)
        self.launch_action.setEnabled(False)
        run_menu.addAction(self.launch_action)

        tools_menu = menu.addMenu("Tools")
        from ...engine.tools.registry import TABLE

        def opener(name: str):  # a slot of no arguments (triggered's `checked` is not a tool's name)
            if name == "export":  # an export asks for its file first
                return lambda: w.export_model()
            return lambda: w.open_tool_sheet(name)

        # the tool table's menu items, in its order
        self.tool_actions = [self._action(tool.menu, opener(tool.name), tool.shortcut) for tool in TABLE if tool.menu]
        for a in self.tool_actions:
            a.setEnabled(False)
            tools_menu.addAction(a)

        window_menu = menu.addMenu("Window")
        window_menu.addAction(self._action("Minimize", w.showMinimized, "Ctrl+M"))
        window_menu.addAction(self._action("Zoom", self._zoom))
        window_menu.addSeparator()
        window_menu.addAction(self._action("Show Runs", lambda: self._show_tab(0), "Ctrl+1"))
        window_menu.addAction(self._action("Show Run Details", lambda: self._show_tab(1), "Ctrl+2"))
        window_menu.addAction(self._action("Show Tools", lambda: self._show_tab(2), "Ctrl+3"))
        window_menu.addAction(self._action("Show Output", lambda: self._show_tab(3), "Ctrl+4"))

        help_menu = menu.addMenu("Help")
        help_menu.addAction(self._action("PyTorch Setup…", w.show_doctor))

    def _team_busy(self, running: bool) -> None:
        """One push or pull at a time."""
        self.push_action.setEnabled(not running)
        self.pull_action.setEnabled(not running)

    def _reporting(self):
        """What a report is of: the Tools tab's shown result there, else the Runs tab's comparison or run."""
        w = self.w
        return w.tools if w.tabs.currentWidget() is w.tools else w.results.reports

    def export_report(self) -> None:
        self._reporting().export_report_dialog()

    def copy_markdown(self) -> None:
        if not self._reporting().copy_markdown():
            self.w.say("Select a run, a comparison or a tool result first; its report is copied as Markdown.")

    def find_runs(self) -> None:
        """⌘F: the Runs tab's filter box, text selected."""
        self._show_tab(0)
        self.w.results.filter.setFocus(Qt.FocusReason.ShortcutFocusReason)
        self.w.results.filter.selectAll()

    def _show_tab(self, index: int) -> None:
        self.w.tabs.setCurrentIndex(index)

    def _zoom(self) -> None:
        w = self.w
        w.showNormal() if w.isMaximized() else w.showMaximized()

    def show_state(self) -> None:
        """The commands as the window's state allows them (gui/state.py: its rules), and the status bar's progress
        while something runs."""
        w = self.w
        on = w.state.actions()
        running = w.state.busy
        w.setup.set_running(running)
        if w.state.stopping:
            w.setup.set_stopping()
        for a in (self.run_action, self.launch_action, self.script_action, self.file_script_action,
                  *self.tool_actions):
            a.setEnabled(on["start"])
        self.stop_action.setEnabled(on["stop"])
        w.progress.setVisible(running)
        if not running:
            w.run_label.setText("")
            w.rate_label.setText("")
