"""The Tools tab: every stored sweep, max-batch search, inspection, export and deploy benchmark, and the one
selected, drawn.

It shows what the engine computed (engine.tools.toolview's tables, the engine's sentence); nothing is re-derived here.
A sweep is drawn as samples/s against batch size (log-x, one line per device, whiskers of ±IQR/2) with the
crossover marked (plots.py); an inspection as its parity and fallback tables; a deploy benchmark as latency per
place, where Core ML plans the work, and its table; a diagnosis (views.py) as its phases, memory and layers; a tune
(tune_view.py) as samples/s against peak memory over its table, with Apply. A tool without a view of its own here (a
max-batch search, an export, a new tool) shows its row's section (tools/registry.py): its tables.
"""

from __future__ import annotations

import html

from PySide6.QtCore import Qt, Signal
from PySide6.QtGui import QPalette
from PySide6.QtWidgets import (QFileDialog, QHBoxLayout, QLabel, QListWidget, QListWidgetItem, QMenu, QPushButton,
                               QSplitter, QStackedWidget, QVBoxLayout, QWidget)

from ...engine.tools import registry, toolview
from ...engine.tools.records import MaxBatchResult
from ...engine.tools.records.deploy import DeployResult
from ...engine.tools.records.inspection import InspectResult
from ...engine.basics.errors import UserError
from ...engine.basics.formatting import error_line, fmt_timestamp
from ...engine.history.runfiles import export_tool_json
from ..style import placeholder_label, warning_color
from .plots import DeployPlot, SweepPlot
from .views import chart_over, diagnose_view, section_view, table_widget, words_label

EMPTY_HINT = ("No tool results yet. Tools → Batch-Size Sweep, Find Largest Batch, Inspect Model, Diagnose, Deploy "
              "Benchmark, Best Settings or Export Model use the setup on the left.")


def _list_label(record, when: str) -> str:
    """Two short lines: "Batch-size sweep · 22 Nov 09:44" / "resnet18 on cifar10, cpu and mps"."""
    title = toolview.safe_title(record.kind, record.result, record.problem)
    head, _, what = title.partition(": ")
    return f"{head} · {when}\n{what}"


class ToolsPanel(QWidget):
    """Stored tool results on the left, the selected one on the right."""

    selected = Signal(object)  # the ToolRecord shown, or None
    message = Signal(str)  # a sentence for the status line
    sweep_requested = Signal(object)  # a largest-batch search's result: sweep its sizes
    apply_requested = Signal(object, object)  # a tune's result and the candidate (row) to put into the setup
    push_requested = Signal(list)  # the shown result's id, to the team's server (gui/team.py)

    def __init__(self, store, parent=None):
        super().__init__(parent)
        self.store = store
        self.records: list = []
        self.list = QListWidget()
        self.list.setMinimumWidth(150)
        self.list.setMaximumWidth(340)
        self.list.setWordWrap(True)
        self.list.setTextElideMode(Qt.TextElideMode.ElideRight)
        self.list.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        self.list.setSpacing(2)
        self.list.currentRowChanged.connect(self._show_row)
        self.headline = QLabel()
        self.headline.setWordWrap(True)
        self.headline.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.detail = QStackedWidget()
        self.empty = placeholder_label(EMPTY_HINT)
        self.detail.addWidget(self.empty)
        # the three exports in one menu: the row keeps to the window's 1280 points with Push to Team Server beside it
        self.export_menu = QMenu(self)
        self.report_button = self.export_menu.addAction("Report (HTML)…")
        self.report_button.setToolTip("This result as one HTML file with its chart, to open in any browser, offline")
        self.report_button.triggered.connect(self.export_report_dialog)
        self.png_button = self.export_menu.addAction("Picture (PNG)…")
        self.png_button.setToolTip("The chart and table shown, with its title, as a picture to share")
        self.png_button.triggered.connect(self.export_png_dialog)
        self.export_button = self.export_menu.addAction("JSON…")
        self.export_button.setToolTip("The result as MPS Studio's JSON, which Import… (here or on another machine) "
                                      "reads back")
        self.export_button.triggered.connect(self.export_dialog)
        self.export_menu.setToolTipsVisible(True)
        self.export_menu_button = QPushButton("Export")
        self.export_menu_button.setMenu(self.export_menu)
        self.markdown_button = QPushButton("Copy as Markdown")
        self.markdown_button.setToolTip("This result as Markdown (its tables with units, the sentence, the environment "
                                        "folded; no paths or names), to paste into an issue or a pull request")
        self.markdown_button.clicked.connect(self.copy_markdown)
        self.import_button = QPushButton("Import…")
        self.import_button.setToolTip("A tool result exported as JSON (Export ▸ JSON…, or a command's --json), from "
                                      "this Mac or another machine")
        self.import_button.clicked.connect(self.import_dialog)
        self.push_button = QPushButton("Push to Team Server")
        self.push_button.setToolTip("Send this result to your team's MLflow tracking server (Preferences): its "
                                    "settings, the machine, its JSON and its report")
        self.push_button.clicked.connect(lambda: self.current() and self.push_requested.emit([self.current().id]))
        self.delete_button = QPushButton("Delete")
        self.delete_button.clicked.connect(self.delete_current)
        self.sweep_button = QPushButton("Sweep These Sizes")
        self.sweep_button.clicked.connect(lambda: self.current() and self.sweep_requested.emit(self.current().result))
        buttons = QHBoxLayout()
        buttons.addWidget(self.sweep_button)
        buttons.addWidget(self.import_button)
        buttons.addStretch(1)
        buttons.addWidget(self.markdown_button)
        buttons.addWidget(self.export_menu_button)
        buttons.addWidget(self.push_button)
        buttons.addWidget(self.delete_button)
        right = QWidget()
        rl = QVBoxLayout(right)
        rl.setContentsMargins(6, 0, 0, 0)
        rl.addWidget(self.headline)
        rl.addWidget(self.detail, 1)
        rl.addLayout(buttons)
        split = QSplitter(Qt.Orientation.Horizontal)
        split.addWidget(self.list)
        split.addWidget(right)
        split.setStretchFactor(0, 0)
        split.setStretchFactor(1, 1)
        split.setSizes([160, 960])
        split.setChildrenCollapsible(False)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addWidget(split)
        self.reload()

    # -- the list ----------------------------------------------------------------------------------------
    def reload(self, select_id: str | None = None) -> None:
        try:
            self.records = list(reversed(self.store.tools())) if self.store is not None else []
        except UserError as exc:
            self.records = []
            self.headline.setText(html.escape(str(exc)))
        self.list.blockSignals(True)
        self.list.clear()
        for record in self.records:
            item = QListWidgetItem(_list_label(record, fmt_timestamp(record.created_at)))
            item.setToolTip(record.problem or record.result.get("sentence", ""))
            self.list.addItem(item)
        self.list.blockSignals(False)
        row = next((i for i, r in enumerate(self.records) if r.id == select_id), 0 if self.records else -1)
        self.list.setCurrentRow(row)
        self._show_row(row)

    def add(self, record) -> None:
        """A tool result that just finished (already stored, or kept in memory when the history is read-only)."""
        if self.store is not None and not self.store.read_only:
            self.reload(select_id=record.id)
            if any(r.id == record.id for r in self.records):
                return
        self.records.insert(0, record)
        self.list.insertItem(0, QListWidgetItem(_list_label(record, "not kept")))
        self.list.setCurrentRow(0)

    def current(self):
        row = self.list.currentRow()
        return self.records[row] if 0 <= row < len(self.records) else None

    # -- the detail --------------------------------------------------------------------------------------
    def _show_row(self, row: int) -> None:
        while self.detail.count() > 1:
            widget = self.detail.widget(1)
            self.detail.removeWidget(widget)
            widget.deleteLater()
        record = self.records[row] if 0 <= row < len(self.records) else None
        shown = record is not None and not record.problem
        for button in (self.export_button, self.png_button, self.markdown_button, self.report_button,
                       self.push_button, self.export_menu_button):
            button.setEnabled(shown)
        self.delete_button.setEnabled(record is not None)
        found = (MaxBatchResult.of(record.result) if record is not None and not record.problem
                 and record.kind == "max-batch" else None)
        sizes = found.sweep_sizes if found is not None else []
        self.sweep_button.setVisible(bool(sizes))
        if found is not None and sizes:
            self.sweep_button.setToolTip(
                f"Measure batches {', '.join(f'{b:,}' for b in sizes)} on {found.device} with the "
                f"run's rules (warm-up apart, at least 8 measured windows each) to find the fastest: the search's "
                f"{found.probe_steps or 3} steps per probe are too few to rank them.")
        if record is None:
            self.headline.setText("")
            self.detail.setCurrentWidget(self.empty)
            self.selected.emit(None)
            return
        try:  # a row no check let through still cannot take the window down: it says why, with Delete
            if record.problem:
                raise ValueError(record.problem)
            headline, view = self._headline(record), self._view(record.kind, record.result)
        except Exception as exc:  # any failure of a view is this one sentence
            why = record.problem or (f"This {record.kind} result cannot be shown: "
                                     f"{error_line(exc, 200)}; Delete removes it.")
            headline, view = html.escape(why), placeholder_label(why)
            for button in (self.export_button, self.png_button, self.markdown_button, self.report_button,
                           self.push_button, self.export_menu_button):
                button.setEnabled(False)
            self.sweep_button.setVisible(False)
        self.headline.setText(headline)
        self.detail.addWidget(view)
        self.detail.setCurrentWidget(view)
        self.selected.emit(record if not record.problem else None)

    def _headline(self, record) -> str:
        r = record.result
        title = html.escape(toolview.title(record.kind, r))
        machine = html.escape((r.get("env") or {}).get("machine_label") or "")
        sentence = html.escape(r.get("sentence", ""))
        bad = record.kind == "inspect" and (not (r.get("probe") or {}).get("ok", True)
                                            or ((r.get("parity") or {}).get("ok") is False))
        bad = bad or (record.kind == "diagnose" and any(
            (d.get("parity") or {}).get("ok") is False or (d.get("after") or {}).get("ok") is False
            for d in r.get("devices") or []))
        if bad:
            color = warning_color(self.palette()).name()
            sentence = f"<span style='color:{color}'>⚠︎ {sentence}</span>"
        muted = self.palette().color(QPalette.ColorRole.PlaceholderText).name()
        imported = f" · imported from {html.escape(r['imported_from'])}" if r.get("imported_from") else ""
        return (f"<b>{title}</b> <span style='color:{muted}'>· {machine} · "
                f"{html.escape(fmt_timestamp(record.created_at))}{imported}</span><br>{sentence}")

    def _view(self, kind: str, result: dict) -> QWidget:
        if kind == "sweep":
            box = QSplitter(Qt.Orientation.Vertical)
            plot = SweepPlot()
            plot.show_sweep(result)
            box.addWidget(plot)
            box.addWidget(table_widget(toolview.sweep_table(result)))
            box.setSizes([320, 160])
            box.setObjectName("sweep")
            return box
        if kind == "tune":
            from .tune_view import TuneView

            view = TuneView(result)
            view.apply_requested.connect(lambda row: self.apply_requested.emit(result, row))
            return view
        if kind == "deploy-bench":
            plot = DeployPlot()
            deployed = DeployResult.of(result)
            plot.show_deploy(deployed)
            box, ll = chart_over(plot)
            said: dict[str, list[str]] = {}  # one line per different sentence, naming its models
            for name, where in deployed.placement.items():
                text = where.sentence or where.reason or ""
                if text:
                    said.setdefault(text, []).append(name)
            for note in deployed.notes:
                said.setdefault(note, [])
            for text, names in said.items():
                lead = f"{', '.join(names)}: " if names else ""
                label = QLabel(f"{lead}{text[0].upper()}{text[1:]}.".replace("..", "."))
                label.setWordWrap(True)
                ll.addWidget(label)
            ll.addWidget(table_widget(toolview.deploy_table(deployed)), 1)
            box.setSizes([200, 320])
            box.setObjectName("deploy")
            return box
        if kind == "diagnose":
            return diagnose_view(result)
        if kind != "inspect":  # a tool without a view of its own here: its row's section
            tool = registry.TOOLS.get(kind)
            return section_view(tool.call("section", result)[0] if tool is not None and tool.section else [])
        inspected = QWidget()
        layout = QVBoxLayout(inspected)
        layout.setContentsMargins(0, 0, 0, 0)
        r = InspectResult.of(result)
        layout.addWidget(words_label(f"Functional check: {'passed' if r.probe.ok else 'FAILED'} ({r.probe.detail})"))
        par = r.parity
        if par:
            label = QLabel(f"Parity with the CPU in float64 ({par.precision}, tolerance {par.tolerance:.0e} or "
                           f"{par.cpu_factor:g}× the CPU's own error in the same precision; one batch of "
                           f"{par.batch_size or '?'}, evaluation mode; relative error = max|device − reference| / "
                           f"max|reference|):")
            label.setWordWrap(True)
            layout.addWidget(label)
            layout.addWidget(table_widget(toolview.parity_table(r, limit=50)), 2)
        ops = r.fallback_ops
        if r.fallback_applies or ops:
            layout.addWidget(words_label(f"Operations that ran on the CPU during one training step of batch "
                                         f"{r.ops_batch_size or '?'} ({r.op_count or 0:,} operations "
                                         f"recorded, each timed with the device synchronized around it):"
                                         if ops else "No operation fell back to the CPU during one training step."))
            if ops:
                layout.addWidget(table_widget(toolview.fallback_table(r)), 1)
        elif r.device != "mps":
            layout.addWidget(words_label(f"CPU fallback applies to MPS only: {r.device} runs every operation "
                                         f"itself."))
        return inspected

    # -- actions -----------------------------------------------------------------------------------------
    def export_json(self, path: str) -> None:
        record = self.current()
        if record is None:
            raise UserError("Select a tool result to export.")
        export_tool_json({"kind": record.kind, "id": record.id, "created_at": record.created_at,
                          **record.result}, path)

    def _save_dialog(self, title: str, suffix: str, kinds: str, write) -> None:
        """Ask where to save the selected result (a name ending in `suffix`) and `write(path)` it; a refusal is the
        headline's one sentence."""
        record = self.current()
        if record is None:
            return
        path, _ = QFileDialog.getSaveFileName(self, title, f"{record.kind}{suffix}", kinds)
        if not path:
            return
        try:
            write(path if path.lower().endswith(suffix) else path + suffix)
        except UserError as exc:
            self.headline.setText(html.escape(str(exc)))

    def export_dialog(self) -> None:
        self._save_dialog("Export Tool Result", ".json", "JSON (*.json)", self.export_json)

    def export_png(self, path: str) -> str:
        """The shown result's chart and table below its title, machine and time; UserError if not written."""
        from ..export import render_png

        record = self.current()
        if record is None or self.detail.currentWidget() is self.empty:
            raise UserError("Select a tool result to export.")
        machine = (record.result.get("env") or {}).get("machine_label") or ""
        subtitle = " · ".join(p for p in (machine, fmt_timestamp(record.created_at)) if p)
        return render_png(self.detail.currentWidget(), path, toolview.title(record.kind, record.result), subtitle)

    def current_report(self):
        """The engine's report of the shown result (engine/report), None when none is shown."""
        from ...engine.report import parts as reporting

        record = self.current()
        if record is None or record.problem:
            return None
        return reporting.report([reporting.tool_part(record.kind, record.result, record.created_at)])

    def copy_markdown(self) -> str:
        from ..export import copy_to_clipboard, report_markdown

        report = self.current_report()
        if report is None:
            return ""
        text = report_markdown(report)
        copy_to_clipboard(text)
        self.message.emit(f"Copied “{report.title}” as Markdown: paste it into an issue or a pull request.")
        return text

    def export_report_dialog(self) -> None:
        from ..export import write_report_html

        report = self.current_report()
        if report is not None:
            self._save_dialog("Export Report", ".html", "HTML (*.html)",
                              lambda path: self.message.emit(write_report_html(report, path)))

    def export_png_dialog(self) -> None:
        self._save_dialog("Export Tool Result as PNG", ".png", "PNG (*.png)", self.export_png)

    def import_file(self, path: str) -> None:
        """Add a tool result from a JSON file (checked as a stored one is) and show it; one sentence otherwise."""
        from ...engine.history.runfiles import import_tool_json

        try:
            record = import_tool_json(path)
            if self.store is not None and not self.store.read_only:
                if not self.store.add_imported_tool(record):  # what is kept stays as it is, as with runs
                    self.reload(select_id=record.id)
                    self.headline.setText(html.escape(f"This {record.kind} result is already in the history; it "
                                                      "stays as it was."))
                    return
        except UserError as exc:
            self.headline.setText(html.escape(str(exc)))
            return
        self.add(record)

    def import_dialog(self) -> None:
        path, _ = QFileDialog.getOpenFileName(self, "Import Tool Result", "", "Tool results (*.json);;All files (*)")
        if path:
            self.import_file(path)

    def delete_current(self) -> None:
        record = self.current()
        if record is None:
            return
        try:
            if self.store is not None and not self.store.read_only:
                self.store.delete_tools([record.id])
        except UserError as exc:
            self.headline.setText(html.escape(str(exc)))
            return
        self.records = [r for r in self.records if r.id != record.id]
        self.reload()
