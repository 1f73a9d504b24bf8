"""Folders: drop, open, check, summarise."""

from __future__ import annotations

from typing import TYPE_CHECKING

from pathlib import Path

from PySide6.QtCore import QObject

from PySide6.QtWidgets import QFileDialog

from ..jobs import folder_job, text_job

if TYPE_CHECKING:
    from ..setup.folder_summary import FolderSummary
    from .main_window import MainWindow


class Folders(QObject):
    """A folder of images dropped on the window or opened: checked by the engine off the GUI thread, then added as
    the dataset with its summary."""

    def __init__(self, w: MainWindow):  # the window that holds it
        super().__init__(w)  # a QObject of the window: what the jobs send is handled in its thread
        self.w = w
        self.checkers: list = []  # the folder checks running
        self.summary: FolderSummary | None = None  # the last checked folder's summary window

    def handle_drop(self, paths: list[str]) -> None:
        """A drop: exactly one folder is checked with the engine; anything else is explained inline."""
        paths = [p for p in paths if p]
        banner = self.w.banner
        if len(paths) != 1:
            banner.show_message(f"Drop one folder at a time (that was {len(paths)} items); it should hold one "
                                f"subfolder of images per class.", warning=True)
            return
        path = Path(paths[0])
        from ...engine.basics.spec import is_text_dataset

        if is_text_dataset(str(path)):  # text for a language model folder: .txt, .jsonl, .parquet, or a folder
            self.use_text(str(path))
            return
        if path.is_file():
            banner.show_message(f"{path.name} is a file; drop a folder that holds one subfolder of images per "
                                "class.", warning=True)
            return
        self.check(str(path))

    def check(self, path: str) -> None:
        w = self.w
        if not w.state.loaded:  # e.g. a folder dropped on the Dock icon at launch: check it once loaded
            w.state.pending_folder = path
            w.banner.show_message(f"{Path(path).name} will be checked as soon as PyTorch has loaded…")
            return
        from ...engine.models.hf_folder import is_model_folder

        if is_model_folder(path):  # a folder with config.json is a model (a folder of class subfolders, a dataset)
            self.use_model(path)
            return
        w.banner.show_message(f"Checking {Path(path).name}…")
        checker = folder_job(path, w)
        checker.done.connect(self.on_checked)
        checker.rejected.connect(self.on_rejected)
        checker.finished.connect(self.forget_finished)
        self.checkers.append(checker)
        checker.start()

    def use_model(self, path: str) -> None:
        """A Hugging Face model folder: its config read (nothing runs: safetensors hold data), chosen as the model,
        its own batches made for its task; one sentence where it cannot be one."""
        from ...engine.basics.errors import UserError
        from ...engine.models import registry

        w = self.w
        try:
            info = registry.get_model_info(path)
        except UserError as exc:
            w.banner.show_message(str(exc), warning=True, kind="folder")
            return
        w.setup.use_model_folder(path, info.description)
        w.banner.clear("folder")
        w.say(f"Model: {info.description} It trains on batches made for its task (synthetic).")

    def use_text(self, path: str) -> None:
        """A text dataset for the chosen model folder: tokenized by its tokenizer in the engine off the GUI thread,
        then chosen with its token count and its first example; one sentence where it cannot be."""
        w = self.w
        model = w.setup.models.current()
        if not w.setup.facts.is_model_folder(model):
            w.banner.show_message(f"{Path(path).name} is text for a language model: choose its model folder first "
                                  "(drop the folder with config.json and its tokenizer), then drop the text.",
                                  warning=True, kind="folder")
            return
        w.banner.show_message(f"Tokenizing {Path(path).name} with {Path(model).name}'s tokenizer…")
        job = text_job(path, model, w)
        job.done.connect(self.on_text)
        job.rejected.connect(self.on_rejected)
        job.finished.connect(self.forget_finished)
        self.checkers.append(job)
        job.start()

    def on_text(self, answer: tuple) -> None:
        path, found = answer  # run.setup.text_summary's answer
        w = self.w
        w.setup.add_text_dataset(path, found)
        w.banner.show_message(f"{found['sentence']}. Selected as the dataset.", kind="folder")
        w.say(f"{found['name']}, its first example: {found['preview'][:160]}")

    def forget_finished(self) -> None:
        for checker in [c for c in self.checkers if c.isFinished()]:
            self.checkers.remove(checker)
            checker.wait()  # `finished` comes just before the thread ends: deleting it sooner aborts the app
            checker.deleteLater()

    def on_rejected(self, message: str) -> None:
        self.w.banner.show_message(message, warning=True)

    def on_checked(self, answer: tuple) -> None:
        path, report = answer
        w = self.w
        w.setup.add_folder_dataset(path, report)
        model, size, _ = self.what_the_model_gets(report)
        w.banner.show_message(f"{Path(path).name}: {report.summary(size, Path(model).name)}. Selected as the "
                              "dataset.")
        self.show_summary(report)

    def what_the_model_gets(self, report) -> tuple[str, tuple[int, int] | None, int]:
        """The chosen model, the (width, height) it gets from this folder (None where a model file's needs are known
        only once it runs) and the split's seed: the engine's one answer for the banner and the summary."""
        from ...engine.basics.errors import UserError
        from ...engine.models import registry as models

        setup = self.w.setup
        configs = setup.configs()
        model = configs[0].model if configs else (setup.models.combo.currentData() or "mlp")
        try:
            size = models.input_size_for_folder(model, report, configs[0].image_size if configs else None)
        except (UserError, ValueError, KeyError):
            size = None
        return str(model), size, configs[0].seed if configs else 0

    def show_summary(self, report) -> None:
        """What the folder holds, its split and the size the chosen model gets (a window of its own)."""
        from ..setup.folder_summary import FolderSummary

        model, size, seed = self.what_the_model_gets(report)
        if self.summary is not None:
            self.summary.close()
        self.summary = FolderSummary(report, model, size, seed, self.w)
        self.summary.show()

    def open(self) -> None:
        path = QFileDialog.getExistingDirectory(self.w, "Open an image folder (one subfolder per class)")
        if path:
            self.check(path)

    def wait(self) -> None:
        for checker in list(self.checkers):
            if checker.isRunning():
                checker.wait()
