"""The parent's handle on a run process (RunProcess), the seam that makes one (`new_process`: tests put
in_process.InProcessRun there), and the processes still alive.

Every run in its own process: a crash, a hang or a user's model never takes the front end down.

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
import multiprocessing
import os
import signal
import threading
import time
from typing import Protocol
from collections.abc import Callable

from ..basics.formatting import one_line, printable
from .child import child_main
from .interpreter import ForeignProcess, child_environment
from .ending import holding_signals
from .messages import KINDS, Garbled, load
from .leftovers import Tree
from .output import Output, remove_temp_folder, run_temp_folder

TERM_GRACE_S = 0.5  # after SIGTERM: time before SIGKILL
POLL_S = 0.05  # how often the parent looks at Stop while it waits for the child
LOG_TAIL_LINES = 40
TREE_S = 0.5  # how often the parent notes a live child's descendants

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


# How run processes start: "spawn" (a fresh interpreter: torch loads after the child's settings, and a process that
# touched Metal is never forked). The test suite starts them from a forkserver with torch already imported instead
# (tests/conftest.py), except where the order of settings and torch is what is tested.
START_METHOD = "spawn"


class ProcessLike(Protocol):
    """What RunProcess needs of its child once started: a multiprocessing.Process, an interpreter.ForeignProcess or,
    for a job served in this process, a _ThreadHandle."""

    @property
    def exitcode(self) -> int | None: ...

    def is_alive(self) -> bool: ...

    def join(self, timeout: float | None = None) -> None: ...

    def close(self) -> None: ...


class RunProcess:
    """One child process for one job (a run or a model probe); start it ahead of time to hide `import torch`."""

    def __init__(self, *, mps_fallback: bool = True, device: str | None = None, python: str | None = None):
        """`python`: another interpreter to run the job (interpreter.py; checked by the caller), else this one's."""
        ctx = multiprocessing.get_context(START_METHOD)
        self.mps_fallback, self.device, self.python = mps_fallback, device, python
        self.conn, child_conn = ctx.Pipe()
        out_read, out_write = ctx.Pipe(duplex=False)  # the child's stdout and stderr (output.py)
        self.temp = run_temp_folder()  # the child's temp folder, removed with it
        settings = (mps_fallback, device, self.temp, dict(os.environ))
        started: ForeignProcess | multiprocessing.process.BaseProcess
        if python:
            started = ForeignProcess(python, child_conn.fileno(), out_write.fileno())
        else:  # (every context has Process; typeshed declares it on the concrete ones only)
            started = getattr(ctx, "Process")(target=child_main, name="mpsstudio-run",
                                              args=(child_conn, mps_fallback, out_write, *settings[1:]))
        with _interrupts_blocked():  # the child is in the terminal's process group until its setsid: a Ctrl-C
            started.start()  # there is the front end's to answer, never a traceback of the child's start-up
        self.process: ProcessLike = started
        if python:  # the child's first read (child.foreign_main)
            self.conn.send(("settings", *settings[:3], child_environment(settings[3])))
        child_conn.close()
        out_write.close()
        self.output: Output | None = Output(os.dup(out_read.fileno()))
        out_read.close()
        if started.pid is None:  # (start() gives it a pid or raises)
            raise OSError("the run process did not start")
        self.pid: int | None = started.pid
        self.tree = Tree(started.pid)  # its descendants, for those a crash of the child would orphan
        self.orphans = ""  # the sentence when some were still running after the child ended (end)
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

    def send(self, message: object) -> bool:
        try:
            self.conn.send(message)
            return True
        except (OSError, ValueError):  # the child is gone; its exit code says why
            return False

    def receive(self, timeout: float):
        """The child's next message, None when there is none within `timeout`, EOFError when it is gone."""
        try:
            if self.conn.poll(timeout):
                message = load(self.conn.recv_bytes())  # EOFError when the child closed the pipe
            else:
                message = None
        except (EOFError, OSError):  # closed, or reset by a dying child
            raise EOFError from None
        except Exception as exc:  # bytes that are not one of our messages (a model wrote to the pipe)
            raise Garbled(f"unreadable data ({type(exc).__name__})") from None
        if message is not None and not (isinstance(message, tuple) and message and message[0] in KINDS):
            raise Garbled(f"a message of type {type(message).__name__}")
        if message is not None:
            if message == ("ready",):
                self.ready = True
                return None
            return message
        # dead, though a grandchild may still hold the pipe open; what it sent (or the pipe's end) is read next time
        if self.process.exitcode is not None and not self._readable():
            raise EOFError
        return None

    def _readable(self) -> bool:
        try:
            return self.conn.poll(0)
        except (OSError, ValueError):
            return False

    def end(self, grace_s: float = TERM_GRACE_S, wait_s: float = 0.0) -> None:
        """End the child's whole process group (SIGTERM, then SIGKILL) and reap it; safe to call twice. A Ctrl-C
        meanwhile waits until it has (holding_signals): its temp folder and its processes never stay behind.

        `wait_s`: time the child has to exit by itself first (one that has sent its result is tidying up)."""
        if self.closed:
            return
        self.closed = True
        with holding_signals():
            self._end(grace_s, wait_s)

    def _end(self, grace_s: float, wait_s: float) -> None:
        self.process.join(wait_s)
        if self.process.exitcode is None:
            self._signal_group(signal.SIGTERM)
            self.process.join(grace_s)
        self._signal_group(signal.SIGKILL)  # also any grandchild left after the child itself ended
        self.process.join(5)
        self.exitcode = self.process.exitcode
        self.orphans = self.tree.end_orphans()  # those that left its group (setsid) and outlived it
        remove_temp_folder(self.temp)
        self.conn.close()
        try:
            self.process.close()
        except ValueError:
            pass
        with _live_lock:
            _live.discard(self)

    def look_at_tree(self) -> None:
        """Note the child's descendants now (the job loops call this every TREE_S)."""
        self.tree.look()

    def _signal_group(self, sig: int) -> None:
        """Signal the child's process group (its DataLoader workers too) and the child itself: one ended
        before it called setsid has no group of its own yet."""
        if self.pid is None:
            return
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
        """The last lines the process wrote (all it wrote is read first when it has ended)."""
        if self.output is None:
            return []
        if self.closed or self.process.exitcode is not None:
            self.output.close()
        return self.output.last_lines(lines)

    def keep_output(self, run_id: str) -> str:
        """Keep what the ended process wrote for the run `run_id` (output.py); one sentence, "" when it wrote
        nothing."""
        if self.output is None:
            return ""
        self.output.close()
        return self.output.keep_for(run_id)

    def discard_output(self) -> None:
        """Stop reading the process's output (what it wrote is dropped)."""
        if self.output is not None:
            self.output.close(drain_s=0.0)

    def death_sentence(self, subject: str = "The run's process") -> str:
        """One sentence on how the child ended without finishing its job."""
        code = self.exitcode
        log = log_path()
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
        python = getattr(self, "python", None)
        if python:  # another Python environment's interpreter: it, or what ran in it, ended the process
            subject = f"{subject} (the Python at {printable(python)[:200]})"
            hint = " (that Python, or the model's code in it, ended it)" if code == 0 else ""
        else:
            hint = " (a model that calls os._exit(0) does this)" if code == 0 else ""
        return f"{subject} exited with code {code} before its work was done{hint}; {where}."


@contextlib.contextmanager
def _interrupts_blocked():
    """A child started with SIGINT ignored (from the main thread, where a front end takes Ctrl-C): the disposition
    is kept across its exec (the signal mask is not: _posixsubprocess resets it), and Python leaves an ignored SIGINT
    ignored, so a Ctrl-C aimed at the terminal's process group never interrupts the child's start-up with a
    traceback; the front end answers it and ends the child. SIGINT is blocked in this thread meanwhile, so one that
    comes while the child starts waits for the restored handler instead of being lost."""
    if threading.current_thread() is not threading.main_thread() or not hasattr(signal, "pthread_sigmask"):
        yield
        return
    mask = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
    try:
        handler = signal.signal(signal.SIGINT, signal.SIG_IGN)
    except (ValueError, OSError):
        signal.pthread_sigmask(signal.SIG_SETMASK, mask)
        yield
        return
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, handler if handler is not None else signal.SIG_DFL)
        signal.pthread_sigmask(signal.SIG_SETMASK, mask)


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
    return [p.pid for p in procs if p.pid is not None and p.alive()]



def log_path():
    try:
        from ..basics.paths import log_file

        return log_file()
    except Exception:
        return None


def log_output(proc: RunProcess, heading: str) -> None:
    """Append a dead child's last output lines to the app's log under `heading` (what it was doing, how it ended)."""
    path = log_path()
    if path is None:
        return
    lines = proc.output_tail()
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with open(path, "a", encoding="utf-8") as log:
            log.write(f"\n--- {time.strftime('%Y-%m-%d %H:%M:%S')} {heading}\n")
            log.write("    last output of its process:\n" if lines else "    its process wrote nothing.\n")
            for line in lines:
                log.write(f"    {printable(one_line(line, 2000))}\n")  # no escape sequence reaches a terminal
    except OSError:
        pass
