"""A user's model file in the window: its code runs only with the user's say-so, and never in this process.

- Consent is asked once per file content (SHA-256): "Run the code in model.py?". The answer Yes is remembered
  in the window settings; a file that changes is asked about again. No is never remembered.
- Counting parameters and checking the output shape happen in a short-lived process (engine.process.
  probe_model, with a time limit) started by a model job (gui/jobs.py); a file that hangs, crashes or exits takes only that
  process with it.
- Restoring the last setup at launch runs nothing: the summary says the file has not been checked yet.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

from PySide6.QtCore import QObject, Signal
from PySide6.QtWidgets import QMessageBox, QWidget

from ...engine.basics.formatting import printable
from ...engine.basics.spec import DataSpec
from ..settings import settings
from ..jobs import Job, model_job

TRUSTED_KEY = "trusted_model_files"
MAX_MODEL_FILE_BYTES = 16 * 1024 * 1024  # a model file is Python source; anything larger is refused unread
NOT_CHECKED = "not checked yet (its code runs only when you press Check Model File or Run)"
CHECKING = "checking in a separate process…"


def file_digest(path: str) -> str:
    """SHA-256 of the file's content; OSError when it cannot be read, ValueError when it is too large."""
    size = os.stat(path).st_size
    if size > MAX_MODEL_FILE_BYTES:
        raise ValueError(f"{Path(path).name} is larger than {MAX_MODEL_FILE_BYTES // 2**20} MiB, too large for a "
                         "Python model file")
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


class ModelFileGuard(QObject):
    """Consent per content hash, and parameter counts from checker processes, for the setup panel."""

    changed = Signal()  # a check finished: the summary may change

    def __init__(self, parent: QWidget):
        super().__init__(parent)
        self._window = parent
        self._results: dict[tuple[str, str, DataSpec], int | str] = {}
        self._checker: Job | None = None  # the check in progress (gui/jobs.model_job)
        self._checking: tuple[str, str, DataSpec] | None = None
        self._digests: dict[tuple[str, int, int], str] = {}

    # -- consent ---------------------------------------------------------------------------------------
    def digest(self, path: str) -> str:
        """The file's SHA-256, cached by size and modification time (OSError / ValueError as file_digest)."""
        st = os.stat(path)
        key = (path, st.st_size, st.st_mtime_ns)
        if key not in self._digests:
            self._digests[key] = file_digest(path)
        return self._digests[key]

    def is_trusted(self, path: str) -> bool:
        try:
            digest = self.digest(path)
        except (OSError, ValueError):
            return False
        return bool(settings().value(f"{TRUSTED_KEY}/{digest}"))

    def confirm(self, path: str, script: bool = False) -> bool | str:
        """True when the user agrees (now or before, for this content) to run the file's code; False when they
        decline; a sentence when the file cannot be read. `script`: a training script run whole, not a model file."""
        try:
            digest = self.digest(path)
        except (OSError, ValueError) as exc:
            return f"{printable(path)} cannot be used ({exc}); choose another file."
        if settings().value(f"{TRUSTED_KEY}/{digest}"):
            return True
        if not (self.ask_script(path) if script else self.ask(path)):
            return False
        settings().setValue(f"{TRUSTED_KEY}/{digest}", path)
        return True

    def ask(self, path: str) -> bool:
        """The consent dialog (tests replace this method)."""
        return self._ask(path, "MPS Studio builds your model by running this file's build_model function, in a "
                               "separate process.")

    def ask_script(self, path: str) -> bool:
        """The consent dialog for a training script (tests replace this method)."""
        return self._ask(path, "MPS Studio runs this script as python would, in a separate process, once on each "
                               "checked device.")

    def _ask(self, path: str, how: str) -> bool:
        box = QMessageBox(QMessageBox.Icon.Warning, "Run the Code in This File?",
                          f"Run the Python code in “{printable(Path(path).name)}”?", parent=self._window)
        box.setInformativeText(
            f"{how} The code can do anything you can do: only continue if you trust it.\n\n"
            "You will not be asked again for this file unless it changes.")
        box.setDetailedText(path)
        run = box.addButton("Run the File's Code", QMessageBox.ButtonRole.AcceptRole)
        box.addButton(QMessageBox.StandardButton.Cancel)
        box.setDefaultButton(QMessageBox.StandardButton.Cancel)
        box.exec()
        return box.clickedButton() is run

    # -- checks ----------------------------------------------------------------------------------------
    def parameters(self, path: str, spec: DataSpec) -> int | str:
        """Parameter count of the checked file, the sentence of a failed check, or why there is none yet."""
        try:
            key = (path, self.digest(path), spec)
        except (OSError, ValueError) as exc:
            return f"cannot be read ({exc})"
        if key in self._results:
            return self._results[key]
        return CHECKING if key == self._checking else NOT_CHECKED

    def check(self, path: str, spec: DataSpec) -> bool | str:
        """Ask for consent if needed, then build the model in a checker process; see confirm() for the result."""
        answer = self.confirm(path)
        if answer is not True:
            return answer
        key = (path, self.digest(path), spec)
        if key in self._results or key == self._checking:
            return True
        self.stop()
        self._checking = key
        checker = model_job(path, spec, self)
        checker.done.connect(self._on_checked)
        checker.rejected.connect(self._on_rejected)
        checker.finished.connect(self._on_finished)
        self._checker = checker
        checker.start()
        self.changed.emit()
        return True

    def _on_checked(self, answer: tuple) -> None:
        path, spec, probe = answer
        self._store(path, spec, probe.parameters)

    def _on_rejected(self, message: str) -> None:
        key = self._checking
        if key is not None:
            self._store(key[0], key[2], message)

    def _store(self, path: str, spec, value) -> None:
        key = self._checking
        if self.sender() is self._checker and key is not None and key[0] == path and key[2] == spec:
            self._results[key] = value
            self.changed.emit()

    def _on_finished(self) -> None:
        checker = self.sender()
        if checker is self._checker:
            self._checker, self._checking = None, None
            self.changed.emit()
        if not isinstance(checker, Job):
            return
        checker.wait()  # `finished` comes just before the thread ends
        checker.deleteLater()

    def stop(self) -> None:
        """End a running check (its process is ended within about a second) and wait for its thread."""
        checker, self._checker, self._checking = self._checker, None, None
        if checker is not None:
            checker.stop()
            checker.wait()
