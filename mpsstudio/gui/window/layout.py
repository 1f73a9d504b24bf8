"""How the window is laid out: sidebar | plots over tabs, and the status bar."""

from __future__ import annotations

from PySide6.QtCore import Qt

QWIDGETSIZE_MAX = (1 << 24) - 1  # Qt's "no maximum" size
from PySide6.QtWidgets import QLabel, QProgressBar, QSplitter, QTabWidget, QVBoxLayout, QWidget


class LayoutMixin:
    """The window's layout: the setup sidebar beside the plots over the Runs, Details and Tools tabs, and the status bar (progress, the engine's samples/s and time left)."""

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
        self.tabs.addTab(self.output, "Output")  # what the runs' processes write, as it comes
        self.tabs.currentChanged.connect(self._on_tab)
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

    def _on_tab(self, index: int) -> None:
        """The Tools tab takes the room the plots had (a tool's chart and tables need it); the plots come back with
        the Runs and Details tabs, and with a run (RunsMixin shows the Runs tab when one starts)."""
        tools = index == self.tabs.indexOf(self.tools)
        if tools:
            self._badge_tools(False)
        if index == self.tabs.indexOf(self.output):
            self._badge_output(False)
        self.plots.setVisible(not tools)

    def _badge_output(self, new: bool) -> None:
        """"Output •" while the Output tab holds lines not seen yet."""
        index = self.tabs.indexOf(self.output)
        if new and self.tabs.currentIndex() == index:
            return
        self.tabs.setTabText(index, "Output \u2022" if new else "Output")
        self.tabs.setTabToolTip(index, "New output from the run in progress." if new else "")

    def _on_output(self, device: str, text: str) -> None:
        self.output.add(device, text)
        self._badge_output(True)

    def _plots_emptied(self, empty: bool) -> None:
        """No curves: the plots shrink to a line of hint and the table below gets the room. A maximum height, not
        only the splitter's sizes: a resize (the window opening at its size) shares space out by stretch again."""
        total = sum(self.right_split.sizes()) or 920
        hint = max(self.plots.minimumSizeHint().height(), 40) + 8
        self.plots.setMaximumHeight(hint if empty else QWIDGETSIZE_MAX)
        self.right_split.setSizes([hint, total - hint] if empty else [round(total * 0.52), round(total * 0.48)])
