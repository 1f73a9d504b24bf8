"""Folders: drop, open, check, summarise."""

from __future__ import annotations

from pathlib import Path

from PySide6.QtCore import Slot
from PySide6.QtWidgets import QFileDialog

from ..worker import FolderChecker


class FoldersMixin:
    """A folder of images dropped on the window or opened: checked by the engine off the GUI thread, then added as the dataset with its summary."""

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
        model, size, _ = self._what_the_model_gets(report)
        self.banner.show_message(f"{Path(path).name}: {report.summary(size, Path(model).name)}. Selected as the "
                                 "dataset.")
        self.show_folder_summary(report)

    def _what_the_model_gets(self, report) -> tuple[str, tuple[int, int] | None, int]:
        """The chosen model, the (width, height) it gets from this folder (None where a model file's needs are known
        only once it runs) and the split's seed: the engine's one answer for the banner and the summary."""
        from ...engine.models import registry as models
        from ...engine.basics.errors import UserError as _UserError

        configs = self.setup.configs()
        model = configs[0].model if configs else (self.setup.model_combo.currentData() or "mlp")
        try:
            size = models.input_size_for_folder(model, report, configs[0].image_size if configs else None)
        except (_UserError, ValueError, KeyError):
            size = None
        return str(model), size, configs[0].seed if configs else 0

    def show_folder_summary(self, report) -> None:
        """What the folder holds, its split and the size the chosen model gets (a window of its own)."""
        from ..setup.folder_summary import FolderSummary

        model, size, seed = self._what_the_model_gets(report)
        if self.folder_summary is not None:
            self.folder_summary.close()
        self.folder_summary = FolderSummary(report, model, size, seed, self)
        self.folder_summary.show()

    def _on_folder_rejected(self, path: str, message: str) -> None:
        self.banner.show_message(message, warning=True)

    @Slot()
    def open_folder(self) -> None:
        path = QFileDialog.getExistingDirectory(self, "Open an image folder (one subfolder per class)")
        if path:
            self.check_folder(path)
