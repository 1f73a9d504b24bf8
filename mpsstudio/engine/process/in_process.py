"""A run "process" that is a thread of this one (InProcessRun): the same pipe, messages, checks, Stop and time limits
as handles.RunProcess, without the process boundary. The seam handles.new_process takes it in tests and benchmarks
that are not about isolation (tests/conftest.py)."""

from __future__ import annotations

import contextlib
import multiprocessing
import threading
from collections.abc import Callable

from .child import serve
from .handles import TERM_GRACE_S, RunProcess


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

    def __init__(self, *, mps_fallback: bool = True, device: str | None = None,
                 context: Callable[[], "contextlib.AbstractContextManager"] | None = None):
        self.mps_fallback, self.device = mps_fallback, device
        self.output = None
        self.conn, child_conn = multiprocessing.Pipe()
        context = context or contextlib.nullcontext

        def target():
            try:
                with context():
                    serve(child_conn, on_parent_gone=lambda: None, device=device)
            finally:
                child_conn.close()
        self.pid = None
        self.temp = None
        self.orphans = ""
        self.ready = False
        self.closed = False
        self.exitcode: int | None = None
        self.process = _ThreadHandle(target)

    def look_at_tree(self) -> None:
        pass

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
