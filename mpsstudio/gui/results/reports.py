"""Reports of what the results panel shows (engine/report): Copy as Markdown and Export Report… of the comparison
on screen (devices, or runs by what differs), or of the selected run alone."""

from __future__ import annotations

from collections.abc import Callable

from PySide6.QtCore import QObject, Signal

from ..export import copy_to_clipboard, report_markdown, write_report_html
from .selection import ComparePicker, RunSelection


class Reports(QObject):
    """The reports of what the panel shows: as Markdown on the clipboard or as one HTML file. `findings()`: the
    stored inspections and diagnoses the verdicts name (the charts'); `save_path(caption, name, filters, suffix)`
    asks where. `message(sentence)`."""

    message = Signal(str)

    def __init__(self, selection: RunSelection, picker: ComparePicker, findings: Callable[[], tuple[list, list]],
                 save_path: Callable[[str, str, str, str], str], parent: QObject) -> None:
        super().__init__(parent)
        self._selection = selection
        self._picker = picker
        self._findings = findings
        self._save_path = save_path

    def available(self) -> bool:
        return self.current_source() is not None

    def current_source(self):
        """What a report would be of now: the comparison by what differs on screen, the device comparison, or the
        selected run; None when nothing is selected."""
        if not self._selection.ids():
            return None
        return (self._picker.shown_scaling() or self._picker.shown_contrast()
                or self._selection.current_comparison() or self._selection.current_run())

    def current_report(self):
        """The engine's report of what the chart shows; None when nothing is."""
        from ...engine.analysis.compare import Comparison
        from ...engine.analysis.contrast import Contrast
        from ...engine.analysis.scaling import Scaling
        from ...engine.report import parts as reporting

        what = self.current_source()
        inspections, diagnoses = self._findings()
        if isinstance(what, Scaling):
            return reporting.report([reporting.scaling_part(what)], runs=what.runs)
        if isinstance(what, Contrast):
            return reporting.report([reporting.contrast_part(what, diagnoses)], runs=what.runs)
        if isinstance(what, Comparison):
            return reporting.report([reporting.comparison_part(what, inspections)], runs=what.all_runs)
        if what is None:
            return None
        return reporting.report(reporting.run_parts(what, self._selection.model.runs(), inspections), runs=[what])

    def copy_markdown(self) -> str:
        """Put the report on the clipboard as Markdown (GitHub renders its tables); returns the text."""
        report = self.current_report()
        if report is None:
            self.message.emit("Select a run or a comparison first; its report is copied as Markdown.")
            return ""
        text = report_markdown(report)
        copy_to_clipboard(text)
        self.message.emit(f"Copied the report of “{report.title}” as Markdown: paste it into an issue or a pull "
                          "request.")
        return text

    def export_report(self, path: str) -> bool:
        report = self.current_report()
        if report is None:
            self.message.emit("Select a run or a comparison first; its report is exported.")
            return False
        said = write_report_html(report, path)
        self.message.emit(said)
        return said.startswith("Exported")

    def export_report_dialog(self) -> None:
        report = self.current_report()
        if report is None:
            self.message.emit("Select a run or a comparison first; its report is exported.")
            return
        path = self._save_path("Export Report", "mpsstudio-report.html", "HTML (*.html)", ".html")
        if path:
            self.export_report(path)
