"""What a run's process leaves behind: processes its model started (a helper server, a daemon that called setsid, a
double fork) are ended when the run ends, and the run says so in one sentence.

On Linux the run's process makes itself a child subreaper (prctl PR_SET_CHILD_SUBREAPER), so an orphan among its
descendants is re-parented to it instead of init and stays findable; at the run's end every descendant still alive
is ended, except the run's own data-loader workers (multiprocessing's, which end with the process). On macOS there
is no subreaper: the descendants still in the run's tree at its end are ended, and those still in its process group
when the process is ended (RunProcess.end); a daemon that left both earlier is out of reach there. Only the run's
own descendants are ever signalled: the run's process reads them from its own tree.
"""

from __future__ import annotations

import multiprocessing
import os
import signal
import sys
import time

import psutil

from ..basics.formatting import one_line, plural
from ..machine.energy.cpu import descendants

PR_SET_CHILD_SUBREAPER = 36  # linux/prctl.h
END_GRACE_S = 0.3  # after SIGTERM: time the leftovers have to end before SIGKILL
SHOWN = 3  # processes named in the sentence
DATA_WORKER = "pt_data_worker"  # the name torch gives a DataLoader's worker process


def become_subreaper() -> bool:
    """Linux: orphans among this process's descendants are re-parented to it. False elsewhere or when refused."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        return libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0
    except Exception:
        return False


def _descendants() -> list[psutil.Process]:
    me = os.getpid()
    pids = descendants(me)
    try:
        if pids is None:
            return psutil.Process(me).children(recursive=True)
        return [psutil.Process(pid) for pid in pids]
    except psutil.Error:
        return []


def _name(proc: psutil.Process) -> str:
    try:
        return one_line(proc.name(), 40) or "a process"
    except psutil.Error:
        return "a process"


def end_leftovers(grace_s: float = END_GRACE_S, who: str = "The model") -> str:
    """End every descendant of this process still alive but the multiprocessing children still in its process group
    (the run's DataLoader workers among them: they end with the group); one sentence when there were any ("" when
    none): "The model left 2 processes running (python, pid 4242; sleep, pid 4243); they were ended."."""
    ours = _in_group_children()
    _reap()  # a process that already ended is not left running (its parent never waited for it)
    left = [p for p in _descendants() if p.pid not in ours and _running(p)]
    return end_processes(left, who, "when the run ended", grace_s=grace_s)


def _in_group_children() -> set[int]:
    """The pids of this process's multiprocessing children still in its process group: the DataLoader's workers
    (multiprocessing forgets a child's target once it starts, so they cannot be told apart by it) and any the
    model made that stayed; all end with the group. One that left it (setsid) is ended here."""
    try:
        group = os.getpgid(0)
    except OSError:
        return set()
    ours: set[int] = set()
    for p in multiprocessing.active_children():
        try:
            if p.pid is not None and os.getpgid(p.pid) == group:
                ours.add(p.pid)
        except OSError:  # ended meanwhile
            continue
    # a DataLoader's worker (torch names it "pt_data_worker") that its loader is still shutting down: once seen
    # leaving multiprocessing's list while alive on a loaded machine; it ends with the group too
    try:
        for child in psutil.Process().children():
            if child.pid not in ours and child.name() == DATA_WORKER and os.getpgid(child.pid) == group:
                ours.add(child.pid)
    except (psutil.Error, OSError):
        pass
    return ours


def end_processes(left: list[psutil.Process], who: str, when: str, reap: bool = True,
                  grace_s: float = END_GRACE_S) -> str:
    """End `left` (SIGTERM, then SIGKILL); one sentence naming them ("" when there are none). `reap`: collect the
    status of those that are this process's children (a subreaper's), never in a front end (its other children's
    statuses belong to whoever started them)."""
    left = [p for p in left if _running(p)]
    if not left:
        return ""
    named = [f"{_name(p)}, pid {p.pid}" for p in left]
    _signal(left, signal.SIGTERM if grace_s > 0 else signal.SIGKILL)
    if _wait(left, grace_s, reap):
        _signal(left, signal.SIGKILL)
        _wait(left, 2.0, reap)
    shown = "; ".join(named[:SHOWN]) + (f"; and {len(named) - SHOWN} more" if len(named) > SHOWN else "")
    return (f"{who} left {plural(len(named), 'process', 'processes')} running ({shown}) {when}; "
            f"{'it was' if len(named) == 1 else 'they were'} ended.")


class Tree:
    """A run process's descendants as its parent sees them while it lives (pid and start time, so a reused pid is
    never taken for one of them): what is left of them after the process died is ended (`end_orphans`). The
    process ends its own leftovers when it can (end_leftovers); this is for when it cannot: a crash, a kill."""

    def __init__(self, pid: int):
        self.pid = pid
        self.seen: dict[int, float] = {}

    def look(self) -> None:
        pids = descendants(self.pid)
        try:
            found = pids if pids is not None else [p.pid for p in psutil.Process(self.pid).children(recursive=True)]
        except psutil.Error:
            return
        for pid in found:
            if pid not in self.seen:
                try:
                    self.seen[pid] = psutil.Process(pid).create_time()
                except psutil.Error:
                    pass

    def end_orphans(self) -> str:
        """End the descendants seen that still run (the process itself has ended); one sentence, "" if none."""
        left = []
        for pid, started in self.seen.items():
            try:
                p = psutil.Process(pid)
                if abs(p.create_time() - started) < 0.01:
                    left.append(p)
            except psutil.Error:
                continue
        self.seen.clear()
        return end_processes(left, "The run's process", "when it ended", reap=False)


def _signal(procs: list[psutil.Process], sig: int) -> None:
    for p in procs:
        try:
            p.send_signal(sig)  # psutil checks the pid still names the process it found (no reused pid)
        except psutil.Error:
            pass


def _wait(procs: list[psutil.Process], seconds: float, reap: bool = True) -> list[psutil.Process]:
    """Wait up to `seconds` for `procs` to end, reaping those re-parented to this process; those still running."""
    deadline = time.monotonic() + seconds
    while True:
        if reap:
            _reap()
        running = [p for p in procs if _running(p)]
        if not running or time.monotonic() >= deadline:
            return running
        time.sleep(0.01)


def _running(p: psutil.Process) -> bool:
    try:
        return p.is_running() and p.status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


def multiprocessing_exit_work() -> None:
    """multiprocessing's own exit work of priority >= 0, for a process that leaves without the interpreter's teardown
    (os._exit, a signal): a semaphore (tqdm makes one) is unregistered from the front end's resource tracker, which
    would otherwise warn of a leak on the user's terminal."""
    try:
        from multiprocessing import util

        getattr(util, "_run_finalizers")(0)  # multiprocessing's own exit step, not public
    except Exception:
        pass


def end_on_sigterm() -> None:
    """In a run's process: SIGTERM (its parent ending it, or another program) first ends what the model started, even
    what left the process group, then ends the process by the signal as before."""
    def handler(signum, frame):
        try:
            end_leftovers(grace_s=0.0)
            multiprocessing_exit_work()
        except Exception:
            pass
        finally:
            signal.signal(signum, signal.SIG_DFL)
            os.kill(os.getpid(), signum)
    try:
        signal.signal(signal.SIGTERM, handler)
    except (ValueError, OSError):
        pass


def _reap() -> None:
    """Collect the exit status of re-parented orphans that ended (a subreaper's zombies), leaving multiprocessing's
    own children to it."""
    ours = {p.pid for p in multiprocessing.active_children()}
    try:
        children = psutil.Process().children()
    except psutil.Error:
        return
    for child in children:
        if child.pid in ours:
            continue
        try:
            os.waitpid(child.pid, os.WNOHANG)
        except ChildProcessError:
            pass
        except OSError:
            pass
