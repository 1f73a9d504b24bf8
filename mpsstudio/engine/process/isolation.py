"""Every run in its own process: a crash, a hang or a user's model never takes the front end down.

The parent (the CLI, or the window's worker thread) starts one child per run with the `spawn` method, sends it
the config over a pipe and receives the run's events, the plain dataclasses of events.py, as they happen. The
child runs the engine's one run path (session.run_one) and never touches the history: the parent owns the
store, so a dying child cannot damage it.

- Stop: the parent asks the child (the run loop honours it at the next warm-up step or measurement window and
  between setup stages); if the run has not ended `grace_s` later the parent ends the child's whole process
  group (its DataLoader workers too): SIGTERM, then SIGKILL. The run is kept as cancelled with every window the
  parent received.
- A child that dies (a signal, os._exit, an abort in native code, the system's out-of-memory killer) ends its
  run as failed with one sentence naming what happened; the last lines it wrote go to the app's log. The next
  device of a comparison still runs.
- Per-run process settings: PYTORCH_ENABLE_MPS_FALLBACK (read by PyTorch when it loads, so set before the
  child imports torch) comes from the run's config; threads, TF32 and denormal flushing are set by the run
  loop in a process that ends with the run, so nothing leaks into the next run.
- A user's model file is only ever imported in a child: `probe_model` builds it there, with a time limit.
- `Spare` keeps one child with torch already imported, so Run does not wait for `import torch` (~2-5 s).

This module imports no torch: the child must set its environment before torch loads.
"""

from __future__ import annotations

import atexit
import contextlib
import io
import multiprocessing
import os
import pickle
import signal
import tempfile
import threading
import time
from collections.abc import Callable, Sequence

from ..basics.config import RunConfig
from ..basics.errors import UserError
from ..basics.events import Ended, EpochEnd, Event, Started, Warmup, Window
from ..basics.formatting import fmt_duration, one_line
from ..basics.results import RunResult
from ..basics.spec import DataSpec
from ..analysis.summary import RunFacts, memory_measure, summarise

STOP_GRACE_S = 3.0  # after Stop: time a run has to end by itself before its process is ended
TERM_GRACE_S = 0.5  # after SIGTERM: time before SIGKILL
POLL_S = 0.05  # how often the parent looks at Stop while it waits for the child
PROBE_TIMEOUT_S = 60.0  # building a user's model to count its parameters and check its output
LOG_TAIL_LINES = 40
MEMORY_LIMIT_VAR = "MPSSTUDIO_RUN_MEMORY_LIMIT_MB"  # optional cap on a run process's address space (POSIX)
FALLBACK_VAR = "PYTORCH_ENABLE_MPS_FALLBACK"

_SIGNAL_HINTS = {
    "SIGABRT": ("abort", "PyTorch's Metal backend aborts on some errors, and so does a failed check in native "
                "code"),
    "SIGSEGV": ("segmentation fault", "native code (the model's, PyTorch's or a library's) crashed"),
    "SIGBUS": ("bus error", "native code (the model's, PyTorch's or a library's) crashed"),
    "SIGILL": ("illegal instruction", "a library was built for another processor"),
    "SIGFPE": ("arithmetic error", "native code divided by zero"),
    "SIGKILL": ("kill", "the system ends processes this way when memory runs out"),
    "SIGTERM": ("terminate", "another program asked it to end"),
}

# Every run process not yet ended, held strongly: one whose owner forgot it (a window closed before its spare was
# started, say) must still be ended at exit, or multiprocessing would wait for it forever.
_live: "set[RunProcess]" = set()
_live_lock = threading.Lock()
_KINDS = ("ready", "event", "progress", "prepared", "rejected", "probed", "tooled", "done")
_EVENTS = (Started, Warmup, Window, EpochEnd, Ended)


# The only classes a child's message may hold: anything else (a pickle that would call os.system, say) is refused
# before it is built, so a model cannot run code in the front end's process through the pipe.
_ALLOWED = {
    "mpsstudio.engine.basics.events": {"Started", "Warmup", "Window", "EpochEnd", "Ended"},
    "mpsstudio.engine.basics.results": {"RunResult"},
    "mpsstudio.engine.basics.config": {"RunConfig"},
    "mpsstudio.engine.run.session": {"ModelProbe"},
}


class _Unpickler(pickle.Unpickler):
    def find_class(self, module: str, name: str):
        if name in _ALLOWED.get(module, ()):
            return super().find_class(module, name)
        raise pickle.UnpicklingError(f"{module}.{name} is not allowed")


def _load(data: bytes):
    return _Unpickler(io.BytesIO(data)).load()


class Garbled(Exception):
    """The child sent something that is not one of its messages: it is not trusted any further."""


# -- the child ---------------------------------------------------------------------------------------------

def _child_main(conn, mps_fallback: bool, output_path: str) -> None:
    """Entry point of a run's process: settings first, then torch, then one job from the parent."""
    os.environ[FALLBACK_VAR] = "1" if mps_fallback else "0"  # read once, when torch loads
    if hasattr(os, "setsid"):
        os.setsid()  # its own process group: the parent can end it with its DataLoader workers
    _send_output_to(output_path)
    import faulthandler

    faulthandler.enable()  # a crash in native code leaves a Python traceback in the output
    _apply_memory_limit()
    serve(conn, on_parent_gone=_end_own_group)


def serve(conn, on_parent_gone: Callable[[], None]) -> None:
    """The child's side of one job, wherever it runs (a run process, or a thread for InProcessRun): says it is
    ready, takes one job, sends its events or answer, then "done". `on_parent_gone` runs when the pipe closes."""
    from ..run import session  # imports torch and the engine: the expensive part a spare does ahead of time

    try:
        conn.send(("ready",))
        job = conn.recv()
    except (EOFError, OSError):
        return  # the parent went away before giving a job
    stop = threading.Event()
    threading.Thread(target=_watch_parent, args=(conn, stop, on_parent_gone), daemon=True,
                     name="watch-parent").start()
    kind = job[0]
    try:
        if kind == "run":
            _, config, position, save_model = job
            session.run_one(RunConfig.from_dict(config), position=position, save_model=save_model,
                            on_event=lambda event: conn.send(("event", event)), should_stop=stop.is_set,
                            progress=lambda message, fraction: conn.send(("progress", message, fraction)),
                            prepared=lambda: conn.send(("prepared",)))
        elif kind == "probe":
            _, model, spec = job
            conn.send(("probed", session.probe_model(model, spec)))
        elif kind == "tool":
            from ..tools import registry as tools

            _, name, payload = job
            conn.send(("tooled", tools.run(name, payload, should_stop=stop.is_set,
                                           progress=lambda message, fraction: conn.send(("progress", message,
                                                                                         fraction)))))
    except UserError as exc:  # found before a run started: one sentence, nothing recorded
        conn.send(("rejected", str(exc)))
    conn.send(("done",))


def _watch_parent(conn, stop: threading.Event, on_parent_gone: Callable[[], None]) -> None:
    """Set `stop` when the parent asks; `on_parent_gone` (end the whole process group) when the parent is gone."""
    while True:
        try:
            message = conn.recv()
        except (EOFError, OSError):  # the parent died: nobody is left to read the run, so end it now
            stop.set()
            on_parent_gone()
            return
        if message == ("stop",):
            stop.set()


def _end_own_group() -> None:
    try:
        os.killpg(os.getpgid(0), signal.SIGKILL) if hasattr(os, "killpg") else os._exit(1)
    finally:
        os._exit(1)


def _send_output_to(path: str) -> None:
    """stdout and stderr (Python's and native code's) go to a file the parent reads if the child dies."""
    try:
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    except OSError:
        return
    for target in (1, 2):
        os.dup2(fd, target)
    os.close(fd)


def _apply_memory_limit() -> None:
    """Cap the address space when MPSSTUDIO_RUN_MEMORY_LIMIT_MB is set (tests use it; so can a careful user)."""
    value = os.environ.get(MEMORY_LIMIT_VAR, "").strip()
    if not value:
        return
    try:
        import resource

        limit = int(value) * 1024 * 1024
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    except (ImportError, ValueError, OSError) as exc:  # not POSIX, a bad number, or not allowed here
        print(f"mpsstudio: {MEMORY_LIMIT_VAR}={value!r} was not applied ({exc})", flush=True)


# -- the parent --------------------------------------------------------------------------------------------

class RunProcess:
    """One child process for one job (a run or a model probe); start it ahead of time to hide `import torch`."""

    def __init__(self, *, mps_fallback: bool = True):
        ctx = multiprocessing.get_context("spawn")
        self.mps_fallback = mps_fallback
        fd, self.output_path = tempfile.mkstemp(prefix="mpsstudio-run-", suffix=".txt")
        os.close(fd)
        self.conn, child_conn = ctx.Pipe()
        self.process = ctx.Process(target=_child_main, args=(child_conn, mps_fallback, self.output_path),
                                   name="mpsstudio-run")
        self.process.start()
        child_conn.close()
        self.pid = self.process.pid
        self.ready = False
        self.closed = False
        self.exitcode: int | None = None
        with _live_lock:
            _live.add(self)

    def wait_ready(self, timeout: float) -> bool:
        """Wait until the child has imported torch and the engine (True), or `timeout` passed (False)."""
        deadline = time.monotonic() + timeout
        while not self.ready and time.monotonic() < deadline:
            if self.receive(POLL_S) is not None:
                raise RuntimeError("a run process spoke before it was given a job")
        return self.ready

    def alive(self) -> bool:
        return not self.closed and self.process.is_alive()

    def send(self, message: tuple) -> bool:
        try:
            self.conn.send(message)
            return True
        except (OSError, ValueError):  # the child is gone; its exit code says why
            return False

    def receive(self, timeout: float):
        """The child's next message, None when there is none within `timeout`, EOFError when it is gone."""
        try:
            if self.conn.poll(timeout):
                message = _load(self.conn.recv_bytes())  # EOFError when the child closed the pipe
            else:
                message = None
        except (EOFError, OSError):  # closed, or reset by a dying child
            raise EOFError from None
        except Exception as exc:  # bytes that are not one of our messages (a model wrote to the pipe)
            raise Garbled(f"unreadable data ({type(exc).__name__})") from None
        if message is not None and not (isinstance(message, tuple) and message and message[0] in _KINDS):
            raise Garbled(f"a message of type {type(message).__name__}")
        if message is not None:
            if message == ("ready",):
                self.ready = True
                return None
            return message
        if self.process.exitcode is not None:  # dead, though a grandchild may still hold the pipe open
            raise EOFError
        return None

    def end(self, grace_s: float = TERM_GRACE_S, wait_s: float = 0.0) -> None:
        """End the child's whole process group (SIGTERM, then SIGKILL) and reap it; safe to call twice.

        `wait_s`: time the child has to exit by itself first (one that has sent its result is tidying up)."""
        if self.closed:
            return
        self.closed = True
        self.process.join(wait_s)
        if self.process.exitcode is None:
            self._signal_group(signal.SIGTERM)
            self.process.join(grace_s)
        self._signal_group(signal.SIGKILL)  # also any grandchild left after the child itself ended
        self.process.join(5)
        self.exitcode = self.process.exitcode
        self.conn.close()
        try:
            self.process.close()
        except ValueError:
            pass
        with _live_lock:
            _live.discard(self)

    def _signal_group(self, sig: int) -> None:
        """Signal the child's process group (its DataLoader workers too) and the child itself: one ended
        before it called setsid has no group of its own yet."""
        if hasattr(os, "killpg"):
            try:
                os.killpg(self.pid, sig)
            except (ProcessLookupError, PermissionError):
                pass
        if self.process.exitcode is None:
            try:
                os.kill(self.pid, sig)
            except (ProcessLookupError, PermissionError):
                pass

    def output_tail(self, lines: int = LOG_TAIL_LINES) -> list[str]:
        try:
            with open(self.output_path, "rb") as f:
                f.seek(0, os.SEEK_END)
                f.seek(max(0, f.tell() - 64 * 1024))
                text = f.read().decode("utf-8", "replace")
        except OSError:
            return []
        return text.splitlines()[-lines:]

    def discard_output(self) -> None:
        try:
            os.unlink(self.output_path)
        except OSError:
            pass

    def death_sentence(self, subject: str = "The run's process") -> str:
        """One sentence on how the child ended without finishing its job."""
        code = self.exitcode
        log = _log_path()
        where = f"see {log}" if log else "its output was not kept"
        if code is not None and code < 0:
            try:
                name = signal.Signals(-code).name
            except ValueError:
                name = f"signal {-code}"
            what, hint = _SIGNAL_HINTS.get(name, (name, "it crashed"))
            return f"{subject} was killed by signal {-code} ({what}); {hint}: {where}."
        if code is None:
            return f"{subject} stopped answering; {where}."
        hint = " (a model that calls os._exit(0) does this)" if code == 0 else ""
        return f"{subject} exited with code {code} before its work was done{hint}; {where}."


class _ThreadHandle:
    """What RunProcess needs of a multiprocessing.Process, for a job served by a thread of this process."""

    def __init__(self, target):
        self.exitcode: int | None = None
        self._target = target
        self._thread = threading.Thread(target=self._main, name="mpsstudio-run-thread", daemon=True)
        self._thread.start()

    def _main(self) -> None:
        code = 0
        try:
            self._target()
        except BaseException:  # what would have ended a run process ends this "process" with code 1
            code = 1
        self.exitcode = code

    def is_alive(self) -> bool:
        return self._thread.is_alive()

    def join(self, timeout: float | None = None) -> None:
        self._thread.join(timeout)

    def close(self) -> None:
        pass


class InProcessRun(RunProcess):
    """A run "process" that is a thread of this one: the same pipe, messages, checks, Stop and time limits as a
    RunProcess, without the process boundary, so without its protection (a crash or a hang is the caller's, and
    process-wide settings are shared). For tests and benchmarks that are not about isolation: they put it in
    `new_process`. `context`: a callable giving a context manager the job runs in (in the serving thread)."""

    def __init__(self, *, mps_fallback: bool = True, context: Callable[[], "contextlib.AbstractContextManager"]
                 | None = None):
        self.mps_fallback = mps_fallback
        self.output_path = ""
        self.conn, child_conn = multiprocessing.Pipe()
        context = context or contextlib.nullcontext

        def target():
            try:
                with context():
                    serve(child_conn, on_parent_gone=lambda: None)
            finally:
                child_conn.close()
        self.pid = None
        self.ready = False
        self.closed = False
        self.exitcode: int | None = None
        self.process = _ThreadHandle(target)

    def _signal_group(self, sig: int) -> None:
        """A thread cannot be signalled: closing the pipe asks it to stop (its watcher sets the stop flag)."""
        self.conn.close()

    def end(self, grace_s: float = TERM_GRACE_S, wait_s: float = 0.0) -> None:
        if self.closed:
            return
        self.closed = True
        self.process.join(wait_s)
        self.conn.close()
        self.process.join(max(grace_s, 5.0))
        self.exitcode = self.process.exitcode

    def output_tail(self, lines: int = LOG_TAIL_LINES) -> list[str]:
        return []

    def discard_output(self) -> None:
        pass


# The seam that makes every run's, probe's and tool's process: RunProcess; tests of everything but isolation put
# InProcessRun here (with monkeypatch), so the parent's whole path runs without starting a process.
new_process: Callable[..., RunProcess] = RunProcess


@atexit.register
def _end_all() -> None:
    """No run process outlives the front end (multiprocessing would otherwise wait for them at exit)."""
    with _live_lock:
        procs = list(_live)
    for proc in procs:
        proc.end(grace_s=0.2)
        proc.discard_output()


def live_processes() -> list[int]:
    """Pids of run processes that are still running (tests check none is left)."""
    with _live_lock:
        procs = list(_live)
    return [p.pid for p in procs if p.alive()]


class Spare:
    """One run process started ahead of time with torch imported; `take` hands it over, `fill` starts the next.

    Thread-safe; a front end calls `fill()` when it is idle (never during a run: importing torch would take
    CPU time from the run being measured) and `close()` when it quits.
    """

    def __init__(self, mps_fallback: bool = True):
        self.mps_fallback = mps_fallback
        self._proc: RunProcess | None = None
        self._lock = threading.Lock()
        self._closed = False

    def fill(self) -> None:
        """Start the spare; nothing once closed (a fill queued before the window closed comes too late)."""
        with self._lock:
            if self._closed:
                return
            if self._proc is None or not self._proc.alive():
                if self._proc is not None:
                    _discard(self._proc)
                self._proc = new_process(mps_fallback=self.mps_fallback)

    def wait_ready(self, timeout: float) -> bool:
        """Wait until the spare has imported torch (benchmarks and tests; a front end never waits for it)."""
        with self._lock:
            proc = self._proc
        return proc is not None and proc.wait_ready(timeout)

    def take(self, mps_fallback: bool) -> RunProcess | None:
        with self._lock:
            proc, self._proc = self._proc, None
        if proc is not None and proc.alive() and proc.mps_fallback == mps_fallback:
            return proc
        if proc is not None:
            _discard(proc)
        return None

    def close(self) -> None:
        with self._lock:
            proc, self._proc, self._closed = self._proc, None, True
        if proc is not None:
            _discard(proc)


def _discard(proc: RunProcess) -> None:
    proc.end(grace_s=0.2)
    proc.discard_output()


# -- runs --------------------------------------------------------------------------------------------------

def run_isolated(configs: Sequence[RunConfig], *, on_event: Callable[[Event], None] | None = None,
                 should_stop: Callable[[], bool] | None = None,
                 progress: Callable[[str, float], None] | None = None, spare: Spare | None = None,
                 timeout_s: float | None = None, grace_s: Callable[[], float] | float = STOP_GRACE_S,
                 repeat: Sequence[dict | None] | None = None,
                 save_models: Sequence[str | None] | None = None) -> list[RunResult]:
    """Run each config in turn, each in a fresh process; returns the results of the runs that started.

    Raises UserError when the first run's process finds the setup cannot run at all (nothing is recorded);
    KeyboardInterrupt after keeping the interrupted run as cancelled (an Ended event carries it).
    `grace_s` may be a callable, read when Stop is seen (a closing window allows less time than Stop).
    `repeat[i]` (repeat.interleave) is recorded as env["repeat"] of run i before its Ended event goes out.
    `save_models[i]`: where run i, if it finishes training, writes its trained model (savedmodel.py).
    """
    forward = on_event or (lambda event: None)
    stop = should_stop or (lambda: False)
    results: list[RunResult] = []
    for i, cfg in enumerate(configs, start=1):
        if stop():
            break
        tag = repeat[i - 1] if repeat is not None and i <= len(repeat) else None

        def emit(event, tag=tag):
            if tag is not None and isinstance(event, Ended):
                event.result.env["repeat"] = dict(tag)
            forward(event)
        proc = (spare.take(cfg.mps_fallback) if spare else None) or new_process(mps_fallback=cfg.mps_fallback)
        save = save_models[i - 1] if save_models is not None and i <= len(save_models) else None
        job = _RunJob(proc, cfg, (i, len(configs)), emit, stop, progress, timeout_s, grace_s, save)
        try:
            result = job.run()
        finally:
            proc.end(wait_s=2.0)
            proc.discard_output()
        if result is None:  # rejected before the run started
            if not results:
                raise UserError(job.rejected)
            result = job.recorder.finish("failed", job.rejected)
            emit(Ended(result))
        results.append(result)
    return results


def run_point(config: RunConfig, **kwargs) -> RunResult:
    """One config in its own process (run_isolated's keywords); a config refused before it started comes back as a
    failed run holding the sentence, so a series of runs (a sweep) can go on and show why."""
    try:
        results = run_isolated([config], **kwargs)
    except UserError as exc:
        return RunResult(config=config, status="failed", error=str(exc))
    return results[0] if results else RunResult(config=config, status="cancelled")


class _RunJob:
    def __init__(self, proc, cfg, position, emit, stop, progress, timeout_s, grace_s, save_model=None):
        self.proc, self.cfg, self.position, self.save_model = proc, cfg, position, save_model
        self.emit, self.stop, self.progress = emit, stop, progress or (lambda message, fraction: None)
        self.timeout_s, self.grace_s = timeout_s, grace_s
        self.recorder = _Recorder(cfg)
        self.rejected = ""
        self.timed_out = False
        self.garbled = ""
        self.prepared = False

    def _timeout_sentence(self) -> str:
        return (f"The run did not end within the time limit of {fmt_duration(self.timeout_s)}, so it was stopped; "
                f"what it measured until then is kept.")

    def run(self) -> RunResult | None:
        """The run's result (from the child, or rebuilt from its events); None when the child rejected it."""
        proc = self.proc
        started = time.monotonic()
        stop_at: float | None = None
        why = ""
        proc.send(("run", self.cfg.to_dict(), self.position, self.save_model))
        try:
            while True:
                try:
                    message = proc.receive(POLL_S)
                    ended = self._handle(message) if message is not None else None
                except EOFError:
                    why = "died"
                    break
                except Garbled as exc:
                    why, self.garbled = "garbled", str(exc)
                    break
                if message is not None:
                    if ended is not None or message[0] == "rejected":
                        return ended
                    if message[0] == "done":  # finished without an Ended event: cannot happen, but say so
                        why = "died"
                        break
                now = time.monotonic()  # also between messages: a flood of them must not hide Stop
                if stop_at is None and self.stop():
                    proc.send(("stop",))
                    grace = self.grace_s() if callable(self.grace_s) else self.grace_s
                    stop_at = now + grace
                if stop_at is not None and now >= stop_at:
                    why = "stopped"
                    break
                if self.timeout_s is not None and now - started > self.timeout_s and stop_at is None:
                    proc.send(("stop",))
                    stop_at, self.timed_out = now + min(STOP_GRACE_S, self.timeout_s), True
        except KeyboardInterrupt:  # Ctrl-C in the CLI: keep the run so far as cancelled, then go on up
            proc.end()
            self.emit(Ended(self.recorder.finish("cancelled", "")))
            raise
        proc.end()
        if why == "garbled":
            result = self.recorder.finish("failed", f"The run's process sent {self.garbled} instead of its "
                                          "measurements, so it was ended (a model that writes to file "
                                          "descriptors it inherited can do this); what it measured until then "
                                          "is kept.")
        elif self.timed_out:
            result = self.recorder.finish("failed", self._timeout_sentence())
        elif why == "stopped" or (why == "died" and stop_at is not None):
            result = self.recorder.finish("cancelled", "")
        else:
            result = self.recorder.finish("failed", proc.death_sentence())
            _log_child_output(proc, result)
        self.emit(Ended(result))
        return result

    def _handle(self, message: tuple) -> RunResult | None:
        kind = message[0]
        try:
            if kind == "event":
                event = _checked_event(message[1])
                if isinstance(event, Ended) and self.timed_out and event.result.status == "cancelled":
                    event.result.status, event.result.error = "failed", self._timeout_sentence()  # it stopped
                self.recorder.add(event)
                self.emit(event)
                if isinstance(event, Ended):
                    return event.result
            elif kind == "progress":
                self.progress(one_line(str(message[1]), 200), float(message[2]))
            elif kind == "prepared":  # from here on the model's code runs: a "rejection" would be forged
                self.prepared = True
            elif kind == "rejected":
                if self.prepared:
                    raise ValueError("a rejection after the setup checks had passed")
                self.rejected = one_line(str(message[1]), 2000)
        except (IndexError, TypeError, ValueError, UserError) as exc:
            raise Garbled(f"a malformed '{kind}' message ({one_line(str(exc), 200)})") from None
        return None


def _checked_event(event):
    """The child's events are untrusted: the right classes, numbers where numbers belong, and an Ended run
    checked field by field as an imported run is (runcheck.py)."""
    if not isinstance(event, _EVENTS):
        raise TypeError(f"not an event: {type(event).__name__}")
    if isinstance(event, Ended):
        from ..analysis.runcheck import checked_result

        return Ended(checked_result(event.result, "The run's process"))
    numbers = {
        Started: ("parameters", "total_steps", "warmup_steps", "run_index", "run_count", "train_size"),
        Warmup: ("steps", "seconds"),
        Window: ("index", "first_step", "seconds", "samples", "samples_per_s", "data_wait_s", "memory",
                 "steps_done", "total_steps", "elapsed_s"),
        EpochEnd: ("epoch", "seconds"),  # step: an int or None, checked below
    }[type(event)]
    for name in numbers:
        value = getattr(event, name)
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise TypeError(f"{name} is not a number")
    for name in ("losses",):
        values = getattr(event, name, [])
        if not isinstance(values, list) or any(isinstance(v, bool) or not isinstance(v, (int, float))
                                               for v in values):
            raise TypeError(f"{name} is not a list of numbers")
    if isinstance(event, Started) and not (isinstance(event.env, dict) and isinstance(event.config, dict)
                                           and isinstance(event.run_id, str)):
        raise TypeError("a malformed start")
    if isinstance(event, EpochEnd) and event.step is not None and (isinstance(event.step, bool)
                                                                   or not isinstance(event.step, int)):
        raise TypeError("step is not a whole number")
    if isinstance(event, Window):
        if not isinstance(event.memory_detail, dict):
            raise TypeError("memory_detail is not a mapping")
        for name in ("energy_j", "energy_s", "utilization", "eta_s", "recent_samples_per_s"):
            value = getattr(event, name)
            if value is not None and (isinstance(value, bool) or not isinstance(value, (int, float))):
                raise TypeError(f"{name} is not a number")
        if event.energy_windows is not None and (isinstance(event.energy_windows, bool)
                                                 or not isinstance(event.energy_windows, int)):
            raise TypeError("energy_windows is not a count")
        parts = event.energy_parts
        if parts is not None and not (isinstance(parts, dict) and all(
                isinstance(k, str) and isinstance(v, (int, float)) and not isinstance(v, bool)
                for k, v in parts.items())):
            raise TypeError("energy_parts is not a mapping of numbers")
    return event


class _Recorder:
    """Rebuilds a run from its events, for a child that died or was ended before its Ended event."""

    def __init__(self, cfg: RunConfig):
        self.result = RunResult(config=cfg)
        self.facts = RunFacts(batch_size=cfg.batch_size, memory_measure=memory_measure(cfg.device))

    def add(self, event: Event) -> None:
        r, f = self.result, self.facts
        if isinstance(event, Started):
            r.id, r.env = event.run_id, event.env
            f.parameters, f.dataset, f.train_size = event.parameters, event.dataset, event.train_size
            f.warmup_steps = event.warmup_steps
        elif isinstance(event, Warmup):
            r.losses.extend(event.losses)
            f.warmup_s = event.seconds
        elif isinstance(event, Window):
            r.losses.extend(event.losses)
            r.windows.append(event.record())
            f.peak_memory = max(f.peak_memory, event.memory, event.memory_detail.get("peak_allocated", 0) or 0)
        elif isinstance(event, EpochEnd):
            r.epochs.append({"epoch": event.epoch, "seconds": event.seconds, "val_loss": event.val_loss,
                             "val_accuracy": event.val_accuracy,
                             **({"step": event.step} if isinstance(event.step, int) else {})})
            if event.val_loss is not None and event.val_accuracy is not None:
                f.val = (event.val_loss, event.val_accuracy)

    def finish(self, status: str, error: str) -> RunResult:
        r = self.result
        r.status, r.error = status, error
        summarise(r, self.facts)
        return r


def _log_path():
    try:
        from ..basics.paths import log_file

        return log_file()
    except Exception:
        return None


def _log_child_output(proc: RunProcess, result: RunResult) -> None:
    """Append the dead child's last output lines to the app's log, under one line naming the run."""
    _log_output(proc, f"run {result.id} ({result.config.model} on {result.config.device}): {result.error}")


def _log_output(proc: RunProcess, heading: str) -> None:
    """Append a dead child's last output lines to the app's log under `heading` (what it was doing, how it ended)."""
    path = _log_path()
    if path is None:
        return
    lines = proc.output_tail()
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with open(path, "a", encoding="utf-8") as log:
            log.write(f"\n--- {time.strftime('%Y-%m-%d %H:%M:%S')} {heading}\n")
            log.write("    last output of its process:\n" if lines else "    its process wrote nothing.\n")
            for line in lines:
                log.write(f"    {one_line(line, 2000)}\n")
    except OSError:
        pass


# -- model probes ------------------------------------------------------------------------------------------

def probe_model(model: str, spec: DataSpec, *, timeout_s: float = PROBE_TIMEOUT_S,
                should_stop: Callable[[], bool] | None = None, spare: Spare | None = None):
    """Build `model` for `spec` in a short-lived process, count its parameters and check one forward pass:
    the session.ModelProbe that session.probe_model returns there.

    Raises UserError (one sentence) when the model cannot be built, returns the wrong shape, takes longer
    than `timeout_s`, or its process dies. The caller must have the user's consent to run the file's code.
    """
    name = os.path.basename(model)
    proc = (spare.take(True) if spare else None) or new_process(mps_fallback=True)
    late = (f"{name} took longer than {fmt_duration(timeout_s)} to build and check, so it was stopped; make "
            f"build_model and forward quicker, or check the file for a loop that never ends.")
    answer = _ask(proc, ("probe", model, spec), "probed", f"checking {name}", timeout_s=timeout_s,
                  should_stop=should_stop, late=late, stop_grace_s=0.0)
    return _checked_probe(answer, name)


def run_tool(name: str, payload: dict, *, progress: Callable[[str, float], None] | None = None,
             should_stop: Callable[[], bool] | None = None, timeout_s: float | None = None,
             mps_fallback: bool = True) -> dict:
    """Run one measuring tool (tools.TOOLS: max-batch, inspect, device checks) in a fresh run process and return
    its result, a dict of plain JSON values checked here (the child runs a user's model: it is not trusted).

    Stop asks the tool to end (it returns what it found so far); a tool that does not within STOP_GRACE_S, or
    runs past `timeout_s`, is ended and raises UserError, as does one that dies or sends something else.
    """
    from ..tools import registry as tools

    proc = new_process(mps_fallback=mps_fallback)
    late = (f"The {name} tool did not end within the time limit of {fmt_duration(timeout_s)}, so it was stopped."
            if timeout_s is not None else "")
    answer = _ask(proc, ("tool", name, payload), "tooled", f"running the {name} tool", timeout_s=timeout_s,
                  should_stop=should_stop, late=late, stop_grace_s=STOP_GRACE_S, progress=progress)
    return tools.checked(name, answer)


def check_devices(devices_list: list, timeout_s: float = PROBE_TIMEOUT_S) -> dict:
    """probe.check of every available accelerator among `devices_list`, done in a run process (the front end's
    own process never starts a GPU context); a check whose process dies or hangs fails every accelerator."""
    from ..machine import probe

    wanted = [d.id for d in devices_list if d.available and d.kind != "cpu"]
    if not wanted:
        return {}
    try:
        answer = run_tool("devices", {}, timeout_s=timeout_s)["checks"]
    except UserError as exc:
        return {d: probe.Check(False, f"the check itself failed: {exc}") for d in wanted}
    return {d: probe.Check(bool(answer[d]["ok"]), answer[d]["detail"]) if d in answer
            else probe.Check(False, "the check's process did not find it") for d in wanted}


def _ask(proc: RunProcess, job: tuple, answer_kind: str, subject: str, *, timeout_s: float | None,
         should_stop: Callable[[], bool] | None, late: str, stop_grace_s: float,
         progress: Callable[[str, float], None] | None = None):
    """Send `job` to `proc`, wait for its `answer_kind` message and return what it holds; UserError otherwise.

    With `stop_grace_s` the child is asked to stop and given that long to answer first; with 0 it is ended."""
    stop = should_stop or (lambda: False)
    try:
        proc.send(job)
        deadline = time.monotonic() + timeout_s if timeout_s is not None else None
        stop_at: float | None = None
        while True:
            try:
                message = proc.receive(POLL_S)
            except EOFError:
                proc.end()
                sentence = proc.death_sentence(f"The process {subject}")
                _log_output(proc, sentence)
                raise UserError(sentence) from None
            except Garbled as exc:
                raise UserError(f"The process {subject} sent {exc} instead of its answer; check the "
                                "model file.") from None
            if message is not None:
                kind = message[0]
                if kind == answer_kind and len(message) == 2:
                    return message[1]
                if kind == "rejected" and len(message) == 2:
                    raise UserError(one_line(str(message[1]), 2000))
                if kind == "progress" and progress is not None and len(message) == 3:
                    try:
                        progress(one_line(str(message[1]), 200), float(message[2]))
                    except (TypeError, ValueError):
                        raise UserError(f"The process {subject} sent a malformed progress message.") from None
                if kind == "done":
                    raise UserError(f"{subject[0].upper()}{subject[1:]} ended without an answer; see the log.")
                continue
            now = time.monotonic()
            if stop_at is None and stop():
                if stop_grace_s <= 0:
                    raise UserError(f"{subject[0].upper()}{subject[1:]} was stopped.")
                proc.send(("stop",))
                stop_at = now + stop_grace_s
            if stop_at is not None and now >= stop_at:
                raise UserError(f"{subject[0].upper()}{subject[1:]} was stopped.")
            if deadline is not None and now > deadline:
                raise UserError(late)
    finally:
        proc.end()
        proc.discard_output()


def _checked_probe(probe, name: str):
    parameters = getattr(probe, "parameters", None)
    if isinstance(parameters, bool) or not isinstance(parameters, int) or parameters < 0:
        raise UserError(f"The process checking {name} sent an answer that could not be read; check the file.")
    return probe
