"""Reports of what the results panel shows (engine/report): Copy as Markdown and Export Report… of the comparison
on screen (devices, or runs by what differs), or of the selected run alone."""

from __future__ import annotations

from ..export import copy_to_clipboard, report_markdown, write_report_html


class ReportsMixin:
    """The panel's reports: the comparison on screen as Markdown on the clipboard or as one HTML file."""

    def report_parts_available(self) -> bool:
        return self.current_report_source() is not None

    def current_report_source(self):
        """What a report would be of now: the comparison by what differs on screen, the device comparison, or the
        selected run; None when nothing is selected."""
        if not self.selected_ids():
            return None
        return self.shown_scaling() or self.shown_contrast() or self.current_comparison() or self._current_run()

    def current_report(self):
        """The engine's report of what the chart shows; None when nothing is."""
        from ...engine.report import parts as reporting

        from ...engine.analysis.compare import Comparison
        from ...engine.analysis.contrast import Contrast

        from ...engine.analysis.scaling import Scaling

        what = self.current_report_source()
        if isinstance(what, Scaling):
            return reporting.report([reporting.scaling_part(what)], runs=what.runs)
        if isinstance(what, Contrast):
            return reporting.report([reporting.contrast_part(what, self.contrast_chart.diagnoses)], runs=what.runs)
        if isinstance(what, Comparison):
            return reporting.report([reporting.comparison_part(what, self.chart.inspections)], runs=what.all_runs)
        if what is None:
            return None
        return reporting.report(reporting.run_parts(what, self.model.runs(), self.chart.inspections), runs=[what])

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
