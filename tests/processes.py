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
    assert process.live_processes() == []


def process_group(pid: int) -> int | None:
    try:
        return os.getpgid(pid)
    except OSError:
        return None
