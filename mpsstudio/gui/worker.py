"""Background work for the window: loading PyTorch and the catalogue, and running configs one after another.

The QThreads only forward what the engine does as Qt signals; no measurement happens here.
Errors travel as signals too, never as exceptions the GUI thread would miss.
"""

from __future__ import annotations

import threading
import weakref

import shiboken6
from PySide6.QtCore import QThread, Signal

_live: "weakref.WeakSet[QThread]" = weakref.WeakSet()


def running_threads() -> list[QThread]:
    """Our QThreads that are still running (tests fail if any is left behind)."""
    return [t for t in list(_live) if shiboken6.isValid(t) and t.isRunning()]


class CatalogLoader(QThread):
    """Imports torch and the engine, then lists models, datasets and devices; the window waits for `loaded`."""

    loaded = Signal(object)  # dict(models=[ModelInfo], datasets=[DatasetInfo], devices=[Device], doctor=[(k, v)])
    failed = Signal(str)

    def __init__(self, parent=None):
        super().__init__(parent)
        _live.add(self)

    def run(self) -> None:
        try:
            from ..engine import datasets, devices, environment, models

            self.loaded.emit({
                "models": models.list_models(),
                "datasets": datasets.list_datasets(),
                "devices": devices.discover_devices(),
                "doctor": environment.doctor(),
            })
        except Exception as exc:  # a broken PyTorch install must still end in one sentence
            self.failed.emit(f"PyTorch could not be loaded ({type(exc).__name__}: {exc}); "
                             f"run `mpsstudio doctor` in a terminal for details.")


class FolderChecker(QThread):
    """Validates a dropped or opened folder with the engine (reading every image can take a moment)."""

    checked = Signal(str, object)  # path, FolderReport
    rejected = Signal(str, str)  # path, one sentence

    def __init__(self, path: str, parent=None):
        super().__init__(parent)
        self.path = path
        _live.add(self)

    def run(self) -> None:
        from ..engine.errors import UserError

        try:
            from ..engine.datasets import inspect_folder

            self.checked.emit(self.path, inspect_folder(self.path))
        except UserError as exc:
            self.rejected.emit(self.path, str(exc))
        except Exception as exc:
            self.rejected.emit(self.path, f"{self.path} could not be read ({type(exc).__name__}: {exc}).")


class RunWorker(QThread):
    """Runs configs one after another (never two devices at once) and forwards every engine event.

    `event` carries the engine's event objects (Started, Warmup, Window, EpochEnd, Ended) unchanged;
    `progress` carries dataset download progress. Stop is cooperative: the engine checks it once a window.
    """

    event = Signal(object)
    progress = Signal(str, float)
    all_done = Signal()

    def __init__(self, configs: list, parent=None):
        super().__init__(parent)
        self.configs = list(configs)
        self._stop = threading.Event()
        _live.add(self)

    def stop(self) -> None:
        self._stop.set()

    @property
    def stopping(self) -> bool:
        return self._stop.is_set()

    def run(self) -> None:
        from ..engine import trainer
        from ..engine.errors import UserError
        from ..engine.events import Ended

        data = None
        try:
            data = trainer.load_data(self.configs[0], progress=self.progress.emit)
        except UserError as exc:
            for cfg in self.configs:
                self.event.emit(Ended(trainer.failed_result(cfg, str(exc))))
            self.all_done.emit()
            return
        except Exception as exc:
            for cfg in self.configs:
                self.event.emit(Ended(trainer.failed_result(cfg, trainer.explain_failure(exc, cfg))))
            self.all_done.emit()
            return
        for cfg in self.configs:
            if self._stop.is_set():
                break
            trainer.run(cfg, data=data, on_event=self.event.emit, should_stop=self._stop.is_set)
        self.all_done.emit()
