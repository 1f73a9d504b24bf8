"""The child's side of a run process: settings first (the MPS fallback before torch loads, its own process group,
output to a pipe the parent reads, faulthandler, the optional memory cap), then one job from the parent (or,
for a warm worker, finished runs one after another), served by `serve` (also what InProcessRun's thread runs). This module imports no torch at import time."""

from __future__ import annotations

import os
import signal
import threading
from collections.abc import Callable

from ..basics.config import RunConfig
from ..basics.events import Ended
from ..machine.apple import FALLBACK_VAR
from ..basics.errors import UserError
from .messages import ProbeJob, RunJob, Stop, ToolJob

MEMORY_LIMIT_VAR = "MPSSTUDIO_RUN_MEMORY_LIMIT_MB"  # optional cap on a run process's address space (POSIX)


def child_main(conn, mps_fallback: bool, output, device: str | None = None, temp: str | None = None,
                environ: dict | None = None) -> None:
    """Entry point of a run's process: settings first, then torch, then one job from the parent. `environ`: the
    parent's environment when it started this process (a forked child, as the test suite starts them, would
    otherwise have its server's)."""
    if environ is not None:
        os.environ.clear()
        os.environ.update(environ)
    os.environ[FALLBACK_VAR] = "1" if mps_fallback else "0"  # read once, when torch loads
    if hasattr(os, "setsid"):
        os.setsid()  # its own process group: the parent can end it with its DataLoader workers
    from .leftovers import become_subreaper, end_on_sigterm

    become_subreaper()  # Linux: orphans of what the model starts stay this process's (leftovers.py)
    end_on_sigterm()
    _use_temp_folder(temp)
    _send_output_to(output)
    import faulthandler

    faulthandler.enable()  # a crash in native code leaves a Python traceback in the output
    _apply_memory_limit()
    serve(conn, on_parent_gone=_end_own_group, device=device, contain=True)
    _exit_now()


def foreign_main(conn_fd: int, output_fd: int) -> None:
    """Entry point of a run's process in another Python environment (interpreter.py): the pipes are inherited file
    descriptors, the settings the parent's first message; then as any run process."""
    from multiprocessing.connection import Connection

    conn = Connection(conn_fd)
    output = Connection(output_fd, readable=False)
    message = conn.recv()
    if not (isinstance(message, tuple) and len(message) == 5 and message[0] == "settings"):
        os._exit(3)
    _, mps_fallback, device, temp, environ = message
    child_main(conn, mps_fallback, output, device, temp, environ)


def _exit_now() -> None:
    """The job is done and said so: exit without the interpreter's teardown (~0.3 s with torch loaded, paid before
    the parent hands the run on). What the model started was ended (end_leftovers); the DataLoader workers end with
    the process group (RunProcess.end)."""
    import sys

    from .leftovers import multiprocessing_exit_work

    multiprocessing_exit_work()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (AttributeError, OSError, ValueError):
            pass
    os._exit(0)


def serve(conn, on_parent_gone: Callable[[], None], device: str | None = None, contain: bool = False) -> None:
    """The child's side of its jobs, wherever it runs (a run process, or a thread for InProcessRun): says it is
    ready, takes a job, sends its events or answer, then "done". A run job that asks to stay (a warm worker's:
    warm.py) and finished is followed by the next job, its memory given back first; every other job is the last.
    `on_parent_gone` runs when the pipe closes. `device`: a spare's, which it prepares before it says it is ready
    (warm_up). `contain` (a run process, never a thread of another program): processes the job left running are
    ended, and a run's result says so."""
    import queue

    from ..run import session  # imports torch and the engine: the expensive part a spare does ahead of time

    freeze_imports()
    if device is not None:
        warm_up(device)

    try:
        conn.send(("ready",))
        job = conn.recv()
    except (EOFError, OSError):
        return  # the parent went away before giving a job
    stop = threading.Event()
    jobs: queue.Queue = queue.Queue()
    threading.Thread(target=_watch_parent, args=(conn, stop, on_parent_gone, jobs), daemon=True,
                     name="watch-parent").start()
    while job is not None:
        stays = _serve_one(conn, job, stop, session, contain)
        conn.send(("done",))
        if not stays:
            return
        _between_jobs(job)
        stop.clear()
        job = jobs.get()  # None: the parent is gone


def _serve_one(conn, job: RunJob | ProbeJob | ToolJob, stop: threading.Event, session, contain: bool) -> bool:
    """One job; whether the process may take another (a run that asked to stay, and finished)."""
    from .leftovers import end_leftovers

    stays = False
    if contain:  # a run process of its own: memory set aside to say how the run ended (run/failures.py)
        from ..run.failures import keep_reserve

        keep_reserve()
    try:
        if isinstance(job, RunJob):
            config, position, save_model = job.config, job.position, job.save_model
            who = "The script" if RunConfig.from_dict(config).is_script else "The model"

            def send(event) -> None:
                if contain and isinstance(event, Ended):  # the run is over: what its model left running ends now
                    left = end_leftovers(who=who)
                    if left:
                        event.result.summary = event.result.summary.replaced(leftover_processes=left)
                conn.send(("event", event))
            result = session.run_one(RunConfig.from_dict(config), position=position, save_model=save_model,
                                     on_event=send, should_stop=stop.is_set,
                                     progress=lambda message, fraction: conn.send(("progress", message, fraction)),
                                     prepared=lambda: conn.send(("prepared",)))
            stays = job.stay and getattr(result, "status", None) == "finished" and not stop.is_set()
        elif isinstance(job, ProbeJob):
            conn.send(("probed", session.probe_model(job.model, job.spec)))
        elif isinstance(job, ToolJob):
            from ..tools import registry as tools

            conn.send(("tooled", tools.run(job.name, job.payload, should_stop=stop.is_set,
                                           progress=lambda message, fraction: conn.send(("progress", message,
                                                                                         fraction)),
                                           checkpoint=lambda result, deadline_s: conn.send(("partial", result,
                                                                                            deadline_s)))))
    except UserError as exc:  # found before a run started: one sentence, nothing recorded
        conn.send(("rejected", str(exc)))
    finally:
        if contain:
            end_leftovers()  # a probe's or a tool's too (a run's were ended before its result went out)
    return stays


def _between_jobs(job: RunJob) -> None:
    """What a finished run leaves for the next one in this process: its objects collected and the allocator's
    cached memory given back (tools/memory.free), so the next run's memory figures start where a fresh process's
    would (CUDA's peak is reset by each run; MPS counts live tensors)."""
    try:
        from ..tools.memory import free

        free(str(RunConfig.from_dict(job.config).device).split(":")[0])
    except Exception:
        pass


def freeze_imports() -> None:
    """Torch, the engine and the libraries, once imported, are here for good: the collector need not walk their
    ~400,000 objects in every full collection (~0.13 s each on the build machine, a pause inside a measured window
    or between max-batch probes). Every process that measures calls it once its imports are done: a run's, and each
    rank of a run on several GPUs (process/rank.py), where one rank's pause stalls every rank at the next
    all-reduce."""
    import gc

    gc.freeze()


def warm_up(device: str) -> None:
    """What the first run of a process pays before its first step, paid by a spare while it waits: torch.optim's
    first optimizer imports torch._dynamo (~1.2 s on the 2-core build machine), torchvision's models (~1 s), and the first tensor on a GPU
    creates its context (~3 s for CUDA on an H100; Metal's command queue on MPS). A failure here is left for the
    run to meet and explain."""
    try:
        import torch

        torch.optim.SGD([torch.nn.Parameter(torch.zeros(1))], lr=0.1)
        try:  # the built-in models' module (~0.5-1 s on a first import)
            import torchvision.models  # noqa: F401
        except Exception:
            pass
        if device != "cpu":
            torch.zeros(1, device=device).add_(1).cpu()  # a round trip: the context and the first kernel
    except Exception:
        pass


def _watch_parent(conn, stop: threading.Event, on_parent_gone: Callable[[], None], jobs=None) -> None:
    """Set `stop` when the parent asks; hand a further job to `jobs` (a warm worker's); `on_parent_gone` (end the
    whole process group) when the parent is gone."""
    while True:
        try:
            message = conn.recv()
        except (EOFError, OSError, TypeError, ValueError):  # the parent died (or, in a thread, closed the pipe)
            stop.set()
            if jobs is not None:
                jobs.put(None)
            on_parent_gone()
            return
        if isinstance(message, Stop):
            stop.set()
        elif jobs is not None and isinstance(message, RunJob):
            jobs.put(message)


def _end_own_group() -> None:
    """The parent is gone: end what the model started (also what left the group), then the group itself."""
    try:
        from .leftovers import end_leftovers

        end_leftovers()
    except Exception:
        pass
    try:
        os.killpg(os.getpgid(0), signal.SIGKILL) if hasattr(os, "killpg") else os._exit(1)
    finally:
        os._exit(1)


def _send_output_to(output) -> None:
    """stdout and stderr (Python's and native code's) go to the pipe the parent reads (output.py)."""
    import sys

    for stream in (sys.stdout, sys.stderr):
        try:
            if stream is not None:
                stream.flush()
        except (OSError, ValueError):
            pass
    try:
        fd = output.fileno()
        for target in (1, 2):
            os.dup2(fd, target)
    except (OSError, ValueError):
        return
    finally:
        output.close()
    try:
        sys.stdout.reconfigure(line_buffering=True)  # type: ignore[union-attr]  # a crash keeps the lines printed
    except (AttributeError, OSError, ValueError):
        pass


def _use_temp_folder(temp: str | None) -> None:
    """The run's own temp folder (made by the parent, removed by it when the process has ended): whatever the model,
    torch or multiprocessing leave there goes with the run."""
    if not temp:
        return
    import tempfile

    for name in ("TMPDIR", "TEMP", "TMP"):
        os.environ[name] = temp
    tempfile.tempdir = temp


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
