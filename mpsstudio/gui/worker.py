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
            from ..engine.data import datasets
            from ..engine.machine import devices, environment, probe
            from ..engine import process
            from ..engine.models import registry as models

            found = devices.discover_devices()
            checks = process.check_devices(found)  # "available" is not "working": checked in a run process
            marked = probe.mark(found, checks)
            self.loaded.emit({
                "models": models.list_models(),
                "datasets": datasets.list_datasets(),
                "devices": devices.worth_showing(marked),
                "mps_banner": devices.mps_banner(marked),
                "checks": checks,
                "doctor": environment.doctor(checks),
                "setup": environment.setup_rows(checks),
            })
        except Exception as exc:  # a broken PyTorch install must still end in one sentence
            self.failed.emit(f"PyTorch could not be loaded ({type(exc).__name__}: {exc}); "
                             f"run `mpsstudio doctor` in a terminal for details.")


class _PathChecker(QThread):
    """One path checked by the engine off the window's thread: `checked` with its answer, or `rejected` with one
    sentence (never a traceback). Subclasses name the answer (`answer`) and what a surprise failure says."""

    rejected = Signal(str, str)  # path, one sentence
    failing = "could not be checked"

    def __init__(self, path: str, parent=None):
        super().__init__(parent)
        self.path = path
        _live.add(self)

    def answer(self) -> tuple:
        raise NotImplementedError

    def run(self) -> None:
        from ..engine.basics.errors import UserError

        try:
            self.checked.emit(*self.answer())
        except UserError as exc:
            self.rejected.emit(self.path, str(exc))
        except Exception as exc:  # noqa: BLE001 (said in one sentence, never a traceback)
            self.rejected.emit(self.path, f"{self.path} {self.failing} ({type(exc).__name__}: {exc}).")


class InterpreterChecker(_PathChecker):
    """Checks another Python environment (engine process/interpreter.py: it starts that Python once)."""

    checked = Signal(str, str)  # path, its label ("torch 2.15.0 · Python 3.12.4 (venv215)")

    def answer(self) -> tuple:
        from ..engine.process.interpreter import check

        found = check(self.path)
        return found.path, found.label()


class FolderChecker(_PathChecker):
    """Validates a dropped or opened folder with the engine (reading every image can take a moment)."""

    checked = Signal(str, object)  # path, FolderReport
    failing = "could not be read"

    def answer(self) -> tuple:
        from ..engine.data.datasets import inspect_folder

        return self.path, inspect_folder(self.path)


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
        from ..engine.history import runfiles
        from ..engine.basics.errors import UserError

        try:
            runs = runfiles.import_json(self.path, progress=self.progress.emit)
            added, known = self.store.add_imported(runs)
            self.done.emit([r.id for r in runs], added, known, self.store.summaries())  # read here, not in the GUI
        except UserError as exc:
            self.rejected.emit(str(exc))
        except Exception as exc:  # never a silent thread death
            from ..engine.basics.formatting import error_line

            self.rejected.emit(f"The import failed ({error_line(exc)}); nothing was added.")


class RecoverWorker(QThread):
    """Recovers a damaged history off the GUI thread (engine.history.recovery), with its progress."""

    progress = Signal(float)
    done = Signal(object)  # recovery.Recovered
    rejected = Signal(str)

    def __init__(self, path, parent=None):
        super().__init__(parent)
        self.path = path
        _live.add(self)

    def run(self) -> None:
        from ..engine.basics.errors import UserError
        from ..engine.history.recovery import recover

        try:
            self.done.emit(recover(self.path, progress=self.progress.emit))
        except UserError as exc:
            self.rejected.emit(str(exc))
        except Exception as exc:  # never a silent thread death
            from ..engine.basics.formatting import error_line

            self.rejected.emit(f"The recovery failed ({error_line(exc)}); the history was left as it is.")


class RunWorker(QThread):
    """Runs configs one after another, each in its own process (engine.process.run_isolated, the engine's one
    run path), and forwards every engine event unchanged.

    `event` carries the engine's events (Started, Warmup, Window, EpochEnd, Notice, Ended); `progress` dataset
    download progress; `output` what each run's process writes; `rejected` the one sentence when the setup cannot
    run at all (nothing is recorded then).
    Stop asks the run to stop (it does at its next warm-up step or measurement window); a run that has not
    ended `STOP_GRACE_S` later has its process ended and is kept as cancelled. `stop(grace_s=...)` allows less
    (closing the window).
    """

    event = Signal(object)
    progress = Signal(str, float)
    rejected = Signal(str)
    output = Signal(str, str)  # device, what its run's process wrote (whole lines, a few times a second)
    all_done = Signal()

    def __init__(self, configs: list, parent=None, spare=None, repeat: list | None = None,
                 save_models: list | None = None):
        super().__init__(parent)
        from ..engine.process import STOP_GRACE_S

        self.configs = list(configs)
        self.repeat = repeat  # env["repeat"] tag per config (engine.analysis.repeat.interleave)
        self.save_models = save_models  # where each run keeps its trained model (engine/models/saved.py), or None
        self.spare = spare
        self._stop = threading.Event()
        self._grace_s = STOP_GRACE_S
        _live.add(self)

    def stop(self, grace_s: float | None = None) -> None:
        if grace_s is not None:
            self._grace_s = min(self._grace_s, grace_s)
        self._stop.set()

    def run(self) -> None:
        from ..engine import process
        from ..engine.basics.errors import UserError

        try:
            process.run_isolated(self.configs, on_event=self.event.emit, should_stop=self._stop.is_set,
                                   progress=self.progress.emit, spare=self.spare, grace_s=lambda: self._grace_s,
                                   repeat=self.repeat, save_models=self.save_models, journal=True,
                                   on_output=self.output.emit)
        except UserError as exc:
            self.rejected.emit(str(exc))
        except Exception as exc:  # a bug must still end in a sentence, never a silent thread death
            from ..engine.basics.formatting import error_line

            self.rejected.emit(f"The run could not start ({error_line(exc)}).")
        finally:
            self.all_done.emit()


class ModelChecker(QThread):
    """Builds a user's model file in a short-lived process (never in the window's) to count its parameters
    and check its output; only started once the user has agreed to run the file's code."""

    checked = Signal(str, object, object)  # path, DataSpec, ModelProbe
    rejected = Signal(str, object, str)  # path, DataSpec, one sentence

    def __init__(self, path: str, spec, parent=None):
        super().__init__(parent)
        self.path, self.spec = path, spec
        self._stop = threading.Event()
        _live.add(self)

    def stop(self) -> None:
        self._stop.set()

    def run(self) -> None:
        from ..engine import process
        from ..engine.basics.errors import UserError

        try:
            self.checked.emit(self.path, self.spec,
                              process.probe_model(self.path, self.spec, should_stop=self._stop.is_set))
        except UserError as exc:
            self.rejected.emit(self.path, self.spec, str(exc))
        except Exception as exc:
            from ..engine.basics.formatting import error_line

            self.rejected.emit(self.path, self.spec, f"{self.path} could not be checked ({error_line(exc)}).")


class ToolWorker(QThread):
    """Runs one measuring tool off the GUI thread: a batch-size sweep (a series of runs, each in its own process)
    or a max-batch search / an inspection (engine.process.run_tool, in a run process), and keeps its result.

    `progress` carries one line of what it is doing; `done` the stored ToolRecord (or one kept in memory when the
    history could not take it, with the sentence why); `rejected` the one sentence when it could not run."""

    progress = Signal(str)
    done = Signal(object, str, str)  # ToolRecord, "" or why it was not kept, "" or where it went instead
    rejected = Signal(str)

    def __init__(self, kind: str, config, devices: list[str], store, parent=None, batch_sizes: list[int] | None = None,
                 payload: dict | None = None):
        super().__init__(parent)
        self.kind, self.config, self.devices, self.store = kind, config, list(devices), store
        self.batch_sizes = batch_sizes  # a sweep's sizes (None: the default powers of two)
        self.payload = payload or {}  # what else the tool takes (an export's format and path, ...)
        self._stop = threading.Event()
        _live.add(self)

    def stop(self) -> None:
        self._stop.set()

    def _result(self) -> dict:
        from ..engine import process
        from ..engine.tools import sweep

        if self.kind == "sweep":
            def on_point(result, done, total):
                sps = result.summary.get("samples_per_s")
                self.progress.emit(f"Sweep: {result.config.device} at batch {result.config.batch_size:,}: "
                                   + (f"{sps:,.0f} samples/s" if sps else result.status) + f" ({done} of up to {total})")
            runs = sweep.run(self.config, self.devices, self.batch_sizes, should_stop=self._stop.is_set, on_point=on_point,
                             run_point=lambda c: process.run_point(c, should_stop=self._stop.is_set),
                             steps=self.payload.get("steps", sweep.DEFAULT_STEPS),
                             warmup=self.payload.get("warmup", sweep.DEFAULT_WARMUP))
            return sweep.analyse(runs, self.config)
        if self.kind == "tune":
            return self._tune()
        if self.kind == "export":  # a stopped export must not land; what it left half-written goes
            from ..engine.basics.files import clear_partials

            from ..engine.basics.errors import UserError
            from ..engine.basics.files import land

            try:
                result = process.run_tool(self.kind, {"config": self.config.to_dict(), **self.payload,
                                                      "staged": True},
                                          should_stop=self._stop.is_set, stop_grace_s=0,
                                          progress=lambda message, fraction: self.progress.emit(message),
                                          mps_fallback=self.config.mps_fallback)
                if self._stop.is_set():  # Stop came with the answer: it does not land
                    raise UserError("The export was stopped; nothing was written.")
                land(result.pop("staged"), result["path"])
                return result
            finally:
                clear_partials(self.payload.get("out") or "")
        return process.run_tool(self.kind, {"config": self.config.to_dict(), **self.payload},
                                  should_stop=self._stop.is_set,
                                  progress=lambda message, fraction: self.progress.emit(message),
                                  mps_fallback=self.config.mps_fallback)

    def _tune(self) -> dict:
        """Best Settings: the engine's tune (the CLI's path), each candidate a run in its own process, the parity
        checks as `inspect` in a run process, Stop keeping what was measured."""
        import os

        from ..engine import process
        from ..engine.basics.errors import UserError
        from ..engine.tools import tune

        p = self.payload
        g = tune.plan(self.config, self.devices, batch_sizes=p.get("batch_sizes"), precisions=p.get("precisions"),
                      channels_last=p.get("channels_last"), compile=p.get("compile"),
                      train_samples=p.get("train_samples"), cores=os.cpu_count())

        def check(cfg):
            try:
                return process.run_tool("inspect", {"config": cfg.to_dict()}, should_stop=self._stop.is_set,
                                        mps_fallback=cfg.mps_fallback)
            except UserError:
                return None

        def layers(cfg):
            try:
                return process.run_tool("diagnose", {"config": cfg.to_dict(), "devices": [cfg.device], "layers": True},
                                        should_stop=self._stop.is_set, mps_fallback=cfg.mps_fallback)
            except UserError:
                return None

        def on_point(cand, result, rnd):
            sps = result.summary.get("samples_per_s")
            self.progress.emit(f"Best settings, round {rnd}: {cand.device} {cand.label()}: "
                               + (f"{sps:,.0f} samples/s" if sps else result.status))
        budget_s = p.get("budget_s", tune.DEFAULT_BUDGET_MIN * 60)
        limit = max(60.0, budget_s)  # no candidate outlasts the whole budget
        with process.Warm() as warm:
            return tune.tune(self.config, g, run_point=lambda c: process.run_point(
                                 c, should_stop=self._stop.is_set, timeout_s=limit, warm=warm),
                             run_check=check, budget_s=budget_s,
                             steps=p.get("steps", tune.DEFAULT_STEPS), warmup=p.get("warmup", tune.DEFAULT_WARMUP),
                             should_stop=self._stop.is_set, on_point=on_point,
                             max_rounds=p.get("max_rounds", tune.MAX_ROUNDS), run_layers=layers,
                             before_checks=warm.close)

    def run(self) -> None:
        from ..engine.basics.errors import UserError
        from ..engine.history.store import ToolRecord

        try:
            record = ToolRecord(kind=self.kind, result=self._result())
        except UserError as exc:
            self.rejected.emit(str(exc))
            return
        except Exception as exc:  # a bug must still end in a sentence
            from ..engine.basics.formatting import error_line

            self.rejected.emit(f"The {self.kind} tool failed ({error_line(exc)}).")
            return
        why = pending = ""
        try:
            if self.store is None or self.store.read_only:
                why = "the history is read-only"
            else:
                from ..engine.history.store import keep_tool

                pending = keep_tool(record, self.store)  # "" when kept in the history
        except UserError as exc:
            why = str(exc)
        self.done.emit(record, why, pending)
