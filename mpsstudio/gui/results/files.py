"""The results panel's files: CSV and JSON of the selected runs, a run's loss curve as CSV, the comparison as PNG,
and the threaded import of a JSON export, all through the engine's RunLibrary."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from PySide6.QtCore import QObject, Qt, Signal
from PySide6.QtWidgets import QFileDialog, QWidget

from ...engine.analysis.compare import Comparison
from ...engine.basics.errors import UserError
from ...engine.basics.formatting import instant, local_time, plural, printable
from ...engine.basics.results import RunResult
from ...engine.history.library import Imported, RunLibrary
from ..export import render_png
from ..jobs import Job, import_job
from .comparison_sheet import ComparisonSheet
from .selection import RunSelection

SELECT_IMPORTED_UP_TO = 1000  # a larger import is not selected: selecting thousands of rows helps nobody


class RunFiles(QObject):
    """The files of the runs `selection` holds. `message(sentence)`; `runs_read(runs, ids)` after an import: every run
    now kept and the ones to select; `importing(bool)` while an import runs off the GUI thread. What Export
    comparison… writes is `export_comparison_to(path)` (the window gives its own: the PNG and the curves beside it)."""

    message = Signal(str)
    runs_read = Signal(list, list)
    importing = Signal(bool)

    def __init__(self, library: RunLibrary, selection: RunSelection, parent: QWidget,
                 export_comparison: Callable[[str], object] | None = None) -> None:
        super().__init__(parent)
        self.library = library
        self._selection = selection
        self._parent = parent
        self._importer: Job | None = None
        self._importing = ""  # the file being imported
        self._last_dir = str(Path.home())
        self.export_comparison_to = export_comparison or self.export_comparison_png

    @property
    def model(self):
        return self._selection.model

    def whole_runs(self, ids: list[str] | None = None) -> list[RunResult]:
        """These runs (None = the selection, or all) with their steps, windows and epochs, read from the history
        where the table holds only a summary; a run that cannot be read any more is left out and named."""
        whole = self.library.whole(self._selection.runs(ids))
        if whole.said:
            self.message.emit(whole.said)
        return whole.runs

    def export_steps(self, run_id: str, path: str) -> int:
        """Write one run's loss curve (every step) to CSV; returns the rows written (0 after saying why not)."""
        runs = self.whole_runs([run_id])
        if not runs:
            return 0
        try:
            rows = self.library.export_steps_csv(runs[0], path)
        except UserError as exc:
            self.message.emit(str(exc))
            return 0
        self.message.emit(f"Exported {plural(rows, 'step')} of the loss curve to {Path(path).name}.")
        return rows

    def export_steps_dialog(self, run_id: str = "") -> None:
        row = self.model.row_of(run_id) if run_id else None
        run = self._selection.current_run() if not run_id else self.model.run_at(row) if row is not None else None
        if run is None:
            self.message.emit("Select a run first; its loss curve is exported as CSV.")
            return
        name = f"{run.config.model}-{run.config.device.replace(':', '')}-loss.csv"
        path = self.save_path("Export Loss Curve as CSV", name, "CSV files (*.csv)", ".csv")
        if path:
            self.export_steps(run.id, path)

    def export_csv(self, path: str, ids: list[str] | None = None) -> int:
        """Write runs (ids; None = the selection, or all) to CSV with the table's speedups; returns runs written."""
        runs = self._selection.runs(ids)
        try:
            self.library.export_csv(runs, path, self.model.speedups)
        except UserError as exc:
            self.message.emit(str(exc))
            return 0
        self.message.emit(f"Exported {plural(len(runs), 'run')} to {Path(path).name}.")
        return len(runs)

    def export_json(self, path: str, ids: list[str] | None = None) -> int:
        """Write runs with every step and their comparisons to JSON, for import elsewhere; returns runs written."""
        runs = self.whole_runs(ids)
        try:
            self.library.export_json(runs, path)
        except UserError as exc:
            self.message.emit(str(exc))
            return 0
        self.message.emit(f"Exported {plural(len(runs), 'run')} to {Path(path).name}.")
        return len(runs)

    def import_json(self, path: str) -> int:
        """Add the runs of an MPS Studio JSON file, here and now (checked whole: all of them or none); runs
        already in the history stay as they are. Returns how many were added. The menu uses start_import."""
        try:
            imported = self.library.import_file(path)
        except UserError as exc:
            self.message.emit(str(exc))
            return 0
        self._imported(path, imported)
        return imported.added

    def start_import(self, path: str) -> None:
        """Import off the GUI thread with progress (a file of thousands of runs takes seconds to check)."""
        if self._importer is not None:
            self.message.emit("An import is still running; wait for it to finish.")
            return
        self._importer = import_job(path, self.library, self)
        self._importing = path
        # bound methods, not lambdas: Qt drops the connections if the panel goes first
        self._importer.progress.connect(self._on_import_progress)
        self._importer.done.connect(self._on_import_done)
        self._importer.rejected.connect(self.message.emit)
        self._importer.finished.connect(self._import_finished)
        self.importing.emit(True)
        self._importer.start()

    def _on_import_progress(self, values: tuple) -> None:
        if self._importer is not None:
            self.message.emit(f"Checking {printable(Path(self._importing).name)}… {values[0]:.0%}")

    def _on_import_done(self, imported: Imported) -> None:
        if self._importer is not None:
            self._imported(self._importing, imported)

    def _import_finished(self) -> None:
        importer, self._importer = self._importer, None
        if importer is not None:
            importer.wait()  # `finished` comes just before the thread ends: deleting it sooner aborts the app
            importer.deleteLater()
        self.importing.emit(False)

    def wait(self) -> None:
        """An import still running finishes first (it is one transaction: all of the file or none)."""
        if self._importer is not None:
            self._importer.wait()

    def _imported(self, path: str, imported: Imported) -> None:
        for notice in self.library.notices:
            self.message.emit(notice)
        ids = imported.ids
        self.runs_read.emit(imported.runs, ids if len(ids) <= SELECT_IMPORTED_UP_TO else [])
        note = f" ({plural(imported.known, 'run')} already in the history)" if imported.known else ""
        self.message.emit(f"Imported {plural(imported.added, 'run')} from {printable(Path(path).name)}{note}.")

    def export_comparison_png(self, path: str, scale: float | None = None) -> str:
        """Save the current comparison's rows and chart as a PNG with a title; returns the path.

        Raises UserError (one sentence) when no comparison is selected or the file cannot be written.
        """
        c = self._require_comparison()
        title, subtitle = self.comparison_title()
        sheet = ComparisonSheet(self.model, c)
        sheet.setAttribute(Qt.WidgetAttribute.WA_DontShowOnScreen)
        sheet.show()
        try:
            out = render_png(sheet, path, title, subtitle, scale)
        finally:
            sheet.close()
            sheet.deleteLater()
        self.message.emit(f"Saved comparison {self.model.letter_of(c)} to {Path(path).name}.")
        return out

    def comparison_title(self) -> tuple[str, str]:
        """Title and subtitle of the current comparison for pictures, e.g.
        ("resnet18 on cifar10 \u00b7 batch 128 \u00b7 fp32", "21 Nov 2026 \u00b7 Apple M2 Pro, macOS 14.5")."""
        c = self._require_comparison()
        newest = max((r.created_at for r in c.runs), key=instant)
        dt = local_time(newest)
        date = f"{dt.day} {dt:%b %Y}" if dt else newest[:10]
        machines = list(dict.fromkeys(r.machine for r in c.runs))
        return c.title(" \u00b7 "), f"{date} \u00b7 {' + '.join(machines)}"

    def _require_comparison(self) -> Comparison:
        c = self._selection.current_comparison()
        if c is None:
            raise UserError("Select a run that belongs to a comparison first; run the same setup on two devices "
                            "to make one.")
        return c

    def save_path(self, caption: str, name: str, filters: str, suffix: str) -> str:
        path, _ = QFileDialog.getSaveFileName(self._parent, caption, str(Path(self._last_dir) / name), filters)
        if not path:
            return ""
        if not path.lower().endswith(suffix):
            path += suffix
        self._last_dir = str(Path(path).parent)
        return path

    def export_csv_dialog(self) -> None:
        path = self.save_path("Export Runs as CSV", "mpsstudio-runs.csv", "CSV files (*.csv)", ".csv")
        if path:
            self.export_csv(path)

    def export_json_dialog(self) -> None:
        path = self.save_path("Export Runs as JSON", "mpsstudio-runs.json", "JSON files (*.json)", ".json")
        if path:
            self.export_json(path)

    def import_dialog(self) -> None:
        path, _ = QFileDialog.getOpenFileName(self._parent, "Import Runs", self._last_dir,
                                              "MPS Studio runs (*.json);;All files (*)")
        if path:
            self._last_dir = str(Path(path).parent)
            self.start_import(path)

    def export_comparison_dialog(self) -> None:
        c = self._selection.current_comparison()
        name = "comparison.png"
        if c is not None:
            cfg = c.config
            name = f"{cfg.model}-{cfg.dataset}-batch{cfg.batch_size or ''}-{cfg.precision or ''}.png"
        path = self.save_path("Export Comparison as PNG", name, "PNG images (*.png)", ".png")
        if path:
            try:
                self.export_comparison_to(path)
            except UserError as exc:
                self.message.emit(str(exc))
