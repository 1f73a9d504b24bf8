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


class ImportWorker(QThread):
    """Checks a file of runs and adds them to the history off the GUI thread (all of them or none)."""

    progress = Signal(float)
    done = Signal(list, int, int, object)  # ids in the file, added, already there, every run now in the history
    rejected = Signal(str)

    def __init__(self, path: str, store, parent=None):
        super().__init__(parent)
        self.path, self.store = path, store
        _live.add(self)

    def run(self) -> None:
        from ..engine import runfiles
        from ..engine.errors import UserError

        try:
            runs = runfiles.import_json(self.path, progress=self.progress.emit)
            added, known = self.store.add_imported(runs)
            self.done.emit([r.id for r in runs], added, known, self.store.all())  # read here, not in the GUI
        except UserError as exc:
            self.rejected.emit(str(exc))
        except Exception as exc:  # never a silent thread death
            from ..engine.formatting import error_line

            self.rejected.emit(f"The import failed ({error_line(exc)}); nothing was added.")


class RunWorker(QThread):
    """Runs configs one after another through the engine's one run path (engine.session.run_configs) and
    forwards every engine event unchanged.

    `event` carries the engine's events (Started, Warmup, Window, EpochEnd, Ended); `progress` dataset download
    progress; `rejected` the one sentence when the setup cannot run at all (nothing is recorded then).
    Stop is cooperative: the engine checks it once a measurement window.
    """

    event = Signal(object)
    progress = Signal(str, float)
    rejected = Signal(str)
    all_done = Signal()

    def __init__(self, configs: list, parent=None):
        super().__init__(parent)
        self.configs = list(configs)
        self._stop = threading.Event()
        _live.add(self)

    def stop(self) -> None:
        self._stop.set()

    def run(self) -> None:
        from ..engine import session
        from ..engine.errors import UserError

        try:
            session.run_configs(self.configs, on_event=self.event.emit, should_stop=self._stop.is_set,
                                progress=self.progress.emit)
        except UserError as exc:
            self.rejected.emit(str(exc))
        except Exception as exc:  # a bug must still end in a sentence, never a silent thread death
            from ..engine.formatting import error_line

            self.rejected.emit(f"The run could not start ({error_line(exc)}).")
        finally:
            self.all_done.emit()
