"""How the window is laid out: sidebar | plots over tabs, and the status bar; the tabs' badges."""

from __future__ import annotations

from typing import TYPE_CHECKING

from PySide6.QtCore import QObject, Qt
from PySide6.QtWidgets import QLabel, QProgressBar, QSplitter, QTabWidget, QVBoxLayout, QWidget

if TYPE_CHECKING:
    from .main_window import MainWindow


QWIDGETSIZE_MAX = (1 << 24) - 1  # Qt's "no maximum" size


class Chrome(QObject):
    """The window's layout: the setup sidebar beside the plots over the Runs, Details, Tools and Output tabs, and the
    status bar (progress, the engine's samples/s and time left); the tabs' badges and the plots' room."""

    def __init__(self, w: MainWindow):  # the window that holds it
        super().__init__(w)
        self.w = w
        # its own widgets (the window takes them from here: MainWindow.tabs, .progress, ...)
        self.tabs = QTabWidget()
        self.right_split = QSplitter(Qt.Orientation.Vertical)
        self.main_split = QSplitter(Qt.Orientation.Horizontal)
        self.run_label = QLabel("")
        self.rate_label = QLabel("")
        self.progress = QProgressBar()

    def build(self) -> None:
        w = self.w
        right = QWidget()
        rl = QVBoxLayout(right)
        rl.setContentsMargins(0, 0, 0, 0)
        rl.addWidget(w.banner)
        self.right_split.addWidget(w.plots)
        tabs = self.tabs
        tabs.setDocumentMode(True)
        tabs.addTab(w.results, "Runs")
        tabs.addTab(w.results.details, "Details")  # the selected run: epochs, note, evaluation
        tabs.addTab(w.tools, "Tools")
        tabs.addTab(w.output, "Output")  # what the runs' processes write, as it comes
        tabs.currentChanged.connect(self.on_tab)
        self.right_split.addWidget(tabs)
        self.right_split.setStretchFactor(0, 3)
        self.right_split.setStretchFactor(1, 2)
        self.right_split.setSizes([470, 450])
        self.right_split.setChildrenCollapsible(False)
        rl.addWidget(self.right_split, 1)
        self.main_split.addWidget(w.setup)
        self.main_split.addWidget(right)
        self.main_split.setStretchFactor(0, 0)
        self.main_split.setStretchFactor(1, 1)
        self.main_split.setSizes([330, 1110])
        self.main_split.setChildrenCollapsible(False)
        w.setCentralWidget(self.main_split)
        w.resize(1440, 900)
        # Tab goes down the setup to Run, then to the runs: filter, table, their buttons
        QWidget.setTabOrder(w.setup.footer.run_button, w.results.filter)
        QWidget.setTabOrder(w.results.filter, w.results.table)
        self._build_status_bar()

    def _build_status_bar(self) -> None:
        bar = self.w.statusBar()
        progress = self.progress
        progress.setMinimumWidth(200)
        progress.setMaximumWidth(260)
        progress.setFormat("")  # set_progress writes "step 84 / 188 · 45 %"
        progress.setTextVisible(True)
        progress.hide()
        bar.addPermanentWidget(self.run_label)
        bar.addPermanentWidget(self.rate_label)
        bar.addPermanentWidget(progress)
        bar.showMessage("Loading PyTorch…")

    def on_tab(self, index: int) -> None:
        """The Tools tab takes the room the plots had (a tool's chart and tables need it); the plots come back with
        the Runs and Details tabs, and with a run (a Run shows the Runs tab when it starts)."""
        w = self.w
        tools = index == self.tabs.indexOf(w.tools)
        if tools:
            w.tool_control.badge(False)
        if index == self.tabs.indexOf(w.output):
            self.badge_output(False)
        w.plots.setVisible(not tools)

    def badge_output(self, new: bool) -> None:
        """"Output •" while the Output tab holds lines not seen yet."""
        tabs = self.tabs
        index = tabs.indexOf(self.w.output)
        if new and tabs.currentIndex() == index:
            return
        tabs.setTabText(index, "Output \u2022" if new else "Output")
        tabs.setTabToolTip(index, "New output from the run in progress." if new else "")

    def on_output(self, device: str, text: str) -> None:
        self.w.output.add(device, text)
        self.badge_output(True)

    def plots_emptied(self, empty: bool) -> None:
        """No curves: the plots shrink to a line of hint and the table below gets the room. A maximum height, not
        only the splitter's sizes: a resize (the window opening at its size) shares space out by stretch again."""
        w = self.w
        total = sum(self.right_split.sizes()) or 920
        hint = max(w.plots.minimumSizeHint().height(), 40) + 8
        w.plots.setMaximumHeight(hint if empty else QWIDGETSIZE_MAX)
        self.right_split.setSizes([hint, total - hint] if empty else [round(total * 0.52), round(total * 0.48)])
