"""Background work for the window: one QThread class (`Job`) for every job, and the jobs the window starts, each a
function of the engine run in that thread (loading PyTorch and the catalogue, checking a folder, another Python or a
model file, importing runs, recovering the history, a Run, a tool).

A job only forwards what the engine does as Qt signals; nothing is measured here. Its answer comes as `done`, a bad
input as `rejected` with the engine's one sentence, a bug as `rejected` with the job's own sentence (never a silent
thread death), and `ended` always follows either. (superqt's `create_worker` and napari's qthreading are the
pattern; this is ours, on PySide6 alone.)
"""

from __future__ import annotations

from pathlib import Path

import threading
import weakref
from collections.abc import Callable
from typing import Any

import shiboken6
from PySide6.QtCore import QThread, Signal

_live: "weakref.WeakSet[QThread]" = weakref.WeakSet()


def running_threads() -> list[QThread]:
    """Our QThreads that are still running (tests fail if any is left behind)."""
    return [t for t in list(_live) if shiboken6.isValid(t) and t.isRunning()]


class Job(QThread):
    """`work(job)` in a thread of its own. `job.report(*values)` emits `progress(values)`; `job.stopping()` says
    whether Stop was asked (`stop(grace_s)`, the grace a run has to stop by itself: `job.grace_s`).
    `failure(exc)` is the sentence for an exception that is not a UserError."""

    done = Signal(object)  # what `work` returned
    rejected = Signal(str)  # one sentence
    progress = Signal(object)  # a tuple: what the work reported
    event = Signal(object)  # type: ignore[assignment]  # (shadows QObject.event, never called on a Job) a run's engine events (Started, Warmup, Window, EpochEnd, Notice, Ended)
    output = Signal(str, str)  # device, what a run's process wrote (whole lines, a few times a second)
    ended = Signal()  # after `done` or `rejected`, always

    def __init__(self, work: Callable[["Job"], Any], failure: Callable[[BaseException], str], parent=None,
                 grace_s: float | None = None):
        super().__init__(parent)
        self.work, self.failure = work, failure
        self._stop = threading.Event()
        self.grace_s = grace_s
        _live.add(self)

    def stop(self, grace_s: float | None = None) -> None:
        if grace_s is not None:
            self.grace_s = grace_s if self.grace_s is None else min(self.grace_s, grace_s)
        self._stop.set()

    def stopping(self) -> bool:
        return self._stop.is_set()

    def report(self, *values) -> None:
        self.progress.emit(values)

    def run(self) -> None:
        from ..engine.basics.errors import UserError

        try:
            answer = self.work(self)
        except UserError as exc:
            self.rejected.emit(str(exc))
        except Exception as exc:  # a bug still ends in a sentence
            self.rejected.emit(self.failure(exc))
        else:
            self.done.emit(answer)
        finally:
            self.ended.emit()


def _words(template: str) -> Callable[[BaseException], str]:
    """A failure sentence with the error's line in it: template.format(error=...)."""
    def say(exc: BaseException) -> str:
        from ..engine.basics.formatting import error_line

        return template.format(error=error_line(exc))
    return say


# -- the jobs ----------------------------------------------------------------------------------------------------------
def load_catalog(job: Job) -> dict:
    """Imports torch and the engine, then lists models, datasets and devices (each checked in a run process)."""
    from ..engine import process
    from ..engine.data import datasets
    from ..engine.machine import devices, environment, probe
    from ..engine.models import registry as models

    from ..engine.machine import mlx

    found = devices.discover_devices()
    checks = process.check_devices(found)  # "available" is not "working": checked in a run process
    marked = probe.mark(found, checks)
    return {"models": models.list_models(), "datasets": datasets.list_datasets(),
            "devices": devices.worth_showing(marked), "mps_banner": devices.mps_banner(marked), "checks": checks,
            "doctor": environment.doctor(checks), "setup": environment.setup_rows(checks),
            "mlx": {kind: mlx.status(kind) for kind in ("cpu", "mps", "cuda")}}


def catalog_job(parent=None) -> Job:
    return Job(load_catalog, lambda exc: f"PyTorch could not be loaded ({type(exc).__name__}: {exc}); run "
                                         f"`mpsstudio doctor` in a terminal for details.", parent)


def folder_job(path: str, parent=None) -> Job:
    """A dropped or opened folder checked by the engine (reading every image can take a moment): (path, its
    FolderReport)."""
    def work(job: Job):
        from ..engine.data.datasets import inspect_folder

        return path, inspect_folder(path)
    return Job(work, lambda exc: f"{path} could not be read ({type(exc).__name__}: {exc}).", parent)


def text_job(path: str, model: str, parent=None) -> Job:
    """A dropped text file (or folder of them) tokenized by the chosen model folder's tokenizer in the engine
    (run.setup.text_summary: into the cache its run reuses): (path, its summary)."""
    def work(job: Job):
        from ..engine.run.setup import text_summary

        return path, text_summary(path, model)
    return Job(work, lambda exc: f"{Path(path).name} could not be read ({type(exc).__name__}: {exc}).", parent)


def interpreter_job(path: str, parent=None) -> Job:
    """Another Python environment checked (it is started once): (its path, its label)."""
    def work(job: Job):
        from ..engine.process.interpreter import check

        found = check(path)
        return found.path, found.label()
    return Job(work, lambda exc: f"{path} could not be checked ({type(exc).__name__}: {exc}).", parent)


def import_job(path: str, library, parent=None) -> Job:
    """A file of runs checked and added to the history (all or none), through the engine's RunLibrary: its Imported
    (every run now kept read here, not in the GUI thread); `progress` the fraction read."""
    def work(job: Job):
        return library.import_file(path, progress=job.report)
    return Job(work, _words("The import failed ({error}); nothing was added."), parent)


def push_job(store, url: str, ids: list[str], parent=None) -> Job:
    """Runs and tool results pushed to the team's tracking server (engine team/push.py: queued, each once): its
    Pushed; `progress` what it is pushing."""
    def work(job: Job):
        from ..engine.team.push import push

        return push(store, url, ids, progress=job.report)
    return Job(work, _words("The push failed ({error}); what was chosen waits in the history for the next push."),
               parent)


def experiments_job(url: str, parent=None) -> Job:
    """The names of the experiments on the team's tracking server (engine team/pull.experiments)."""
    def work(job: Job):
        from ..engine.team.pull import experiments

        return experiments(url)
    return Job(work, _words("The team's server could not be asked for its experiments ({error})."), parent)


def pull_job(store, url: str, experiment: str, parent=None) -> Job:
    """An experiment's runs and tool results pulled into the history (engine team/pull.py: all or none): its
    Pulled; `progress` what it is reading."""
    def work(job: Job):
        from ..engine.team.pull import pull

        return pull(store, url, experiment, progress=job.report)
    return Job(work, _words("The pull failed ({error}); nothing was added."), parent)


def recover_job(path, parent=None) -> Job:
    """A damaged history recovered (engine history/recovery.py): its Recovered; `progress` the fraction."""
    def work(job: Job):
        from ..engine.history.recovery import recover

        return recover(path, progress=job.report)
    return Job(work, _words("The recovery failed ({error}); the history was left as it is."), parent)


def model_job(path: str, spec, parent=None) -> Job:
    """A user's model file built in a short-lived process (never the window's), once the user allowed its code:
    (path, spec, its ModelProbe)."""
    def work(job: Job):
        from ..engine import process

        return path, spec, process.probe_model(path, spec, should_stop=job.stopping)
    return Job(work, _words(f"{path} could not be checked ({{error}})."), parent)


def run_job(configs: list, parent=None, spare=None, repeat: list | None = None,
            save_models: list | None = None) -> Job:
    """The Run: configs one after another, each in its own process (engine.process.run_isolated, the one run path);
    `event` carries the engine's events unchanged, `progress` (message, fraction) a dataset's download, `output`
    what each run's process writes, `rejected` the sentence when the setup cannot run at all (nothing recorded).
    Stop asks the run to stop; one that has not ended STOP_GRACE_S later (less when `stop(grace_s)` says so: closing
    the window) has its process ended and is kept as cancelled."""
    from ..engine.process import STOP_GRACE_S

    def work(job: Job) -> None:
        from ..engine import process

        process.run_isolated(list(configs), on_event=job.event.emit, should_stop=job.stopping,
                             progress=job.report, spare=spare, grace_s=lambda: STOP_GRACE_S if job.grace_s is None else job.grace_s, repeat=repeat,
                             save_models=save_models, journal=True, on_output=job.output.emit)
    return Job(work, _words("The run could not start ({error})."), parent, grace_s=STOP_GRACE_S)


def tool_job(kind: str, config, devices: list[str], store, parent=None, batch_sizes: list[int] | None = None,
             payload: dict | None = None) -> Job:
    """One measuring tool (process.series: a sweep's or a tune's runs, or one tool in a run process), its result kept:
    (ToolRecord, "" or why it was not kept, "" or where it went instead); `progress` one line of what it does."""
    def work(job: Job):
        from ..engine.history.store import ToolRecord, keep_tool
        from ..engine.process import series

        from ..engine.history.earlier import beside_earlier

        result = series.tool_result(kind, config, list(devices), payload or {}, batch_sizes=batch_sizes,
                                    should_stop=job.stopping, say=lambda line: job.report(line))
        record = ToolRecord(kind=kind, result=beside_earlier(kind, result, store))
        why = pending = ""
        from ..engine.basics.errors import UserError

        try:
            if store is None or store.read_only:
                why = "the history is read-only"
            else:
                pending = keep_tool(record, store)  # "" when kept in the history
        except UserError as exc:
            why = str(exc)
        return record, why, pending
    return Job(work, _words(f"The {kind} tool failed ({{error}})."), parent)
