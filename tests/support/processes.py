"""Helpers for tests of run processes: what a leftover process looks like."""

from __future__ import annotations

import os
import time

import psutil

from mpsstudio.engine import process

MEMORY_CAP_MB = "4500"  # a run process's address space in tests (torch takes ~3.5 GB of it): a model that
# hoards memory fails there instead of pushing the test machine into swap


def assert_gone(pids: list[int]) -> None:
    deadline = time.monotonic() + 10  # grandchildren reparented to init are reaped by it, not by us
    while True:
        left = [p.pid for p in psutil.process_iter(["pid"]) if process_group(p.pid) in pids or p.pid in pids]
        if not left or time.monotonic() > deadline:
            break
        time.sleep(0.1)
    assert left == [], f"processes left behind: {left}"
    assert live_processes() == []


def live_processes() -> list[int]:
    """Run processes alive, but for those the warm pool keeps for the next tests."""
    waiting = POOL.waiting() if POOL is not None else set()
    return [pid for pid in process.live_processes() if pid not in waiting]


POOL: "WarmPool | None" = None  # the session's pool (conftest sets it)

# what the suite's forkserver imports once, so that a run process forked from it starts in milliseconds instead of
# ~3 s of `import torch` (spent on the machine's 2 cores beside the tests that run meanwhile)
PRELOAD = ["torch", "torchvision", "torchvision.models", "torch._dynamo", "mpsstudio.engine.run.session",
           "mpsstudio.engine.process.child", "mpsstudio.engine.tools.registry"]  # torch._dynamo: a first optimizer's


def use_forkserver() -> None:
    """Run processes of the suite start from a forkserver that has imported torch and the engine (Linux, macOS);
    tests about what a fresh interpreter does before torch loads mark themselves `spawn`. The app itself spawns."""
    import multiprocessing

    from mpsstudio.engine.process import handles

    if "forkserver" not in multiprocessing.get_all_start_methods():
        return
    multiprocessing.get_context("forkserver").set_forkserver_preload(PRELOAD)
    handles.START_METHOD = "forkserver"


def process_group(pid: int) -> int | None:
    try:
        return os.getpgid(pid)
    except OSError:
        return None


class WarmPool:
    """Run processes started ahead of time for the tests about run processes (marker `processes`, fixture
    `run_pids`): a process a test takes was started during earlier tests and has imported torch meanwhile, so the
    test does not wait ~2-3 s for it. Each process is still used for one job, as in the app.

    It is refilled at the start of every test (conftest), before that test's environment is set: a pooled process
    sees the session's folders (MPSSTUDIO_*_DIR) and memory cap, never another test's."""

    SIZES = {True: 2, False: 1}  # processes kept per MPS-fallback setting

    def __init__(self):
        self._ready: dict[bool, list] = {True: [], False: []}
        self.wanted = False  # set by the first test that takes one: until then nothing is started
        self.made: set[int] = set()  # pids of every process the pool started

    def take(self, *, mps_fallback: bool = True, device: str | None = None):
        self.wanted = True
        ready = self._ready[mps_fallback]
        while ready and device is None:  # pooled processes are prepared for no device (a spare asks for one)
            proc = ready.pop(0)
            if proc.alive():
                return proc
            proc.end(grace_s=0.1)
            proc.discard_output()
        return process.RunProcess(mps_fallback=mps_fallback, device=device)

    def refill(self) -> None:
        if not self.wanted:
            return
        for setting, size in self.SIZES.items():
            while len(self._ready[setting]) < size:
                proc = process.RunProcess(mps_fallback=setting)
                self.made.add(proc.pid)
                self._ready[setting].append(proc)

    def waiting(self) -> set[int]:
        return {p.pid for procs in self._ready.values() for p in procs}

    def close(self) -> None:
        for procs in self._ready.values():
            for proc in procs:
                proc.end(grace_s=0.1)
                proc.discard_output()
            procs.clear()
