"""A device check's result (tools/check/suite.py makes it; tools/check/words.py says it)."""

from __future__ import annotations

from dataclasses import dataclass

from ...basics.shape import Flag, Int, List, Num, Record, Text, may, need
from .common import DEVICE, ERR, LONG, NAME, ToolResult

STATUSES = ("passed", "wrong", "not deterministic", "failed", "skipped")


@dataclass(frozen=True, kw_only=True)
class CheckRow(Record):
    """One case in one dtype on one device: its worst relative error over the states, and the verdict."""

    device: str = need(DEVICE)
    case: str = need(Text(max=64))
    operation: str = need(NAME)
    shape: str = need(NAME)
    dtype: str = need(Text(max=16))
    issue: str = may(LONG, default="")
    tolerance: float = need(Num(hi=1.0))
    error: float | None = may(ERR)
    state: str | None = may(Text(max=64, null=True))
    repeat_error: float | None = may(ERR)
    status: str = need(Text(max=32, choices=STATUSES))
    reason: str = may(LONG, default="")
    seconds: float | None = may(Num(hi=1e9, null=True))


@dataclass(frozen=True, kw_only=True)
class Mode(Record):
    """Processes whose timings of a shape fall together: how many, their median and range (ms)."""

    count: int = need(Int(1, 10_000))
    median_ms: float = need(Num(hi=1e9))
    low_ms: float = need(Num(hi=1e9))
    high_ms: float = need(Num(hi=1e9))


@dataclass(frozen=True, kw_only=True)
class Timing(Record):
    """One shape's product timed in fresh processes (tools/check/timing.py), one median a process, read as modes."""

    device: str = need(DEVICE)
    shape: str = need(NAME)
    ms: list[float] = need(List(Num(hi=1e9), max=10_000))
    modes: list[Mode] = need(List(Mode.declared_shape(), max=2), Mode)
    sentence: str = need(LONG)


@dataclass(frozen=True, kw_only=True)
class Change(Record):
    """A case whose verdict changed since the earlier check, or a product whose time moved beyond both ranges."""

    device: str = need(DEVICE)
    what: str = need(NAME)
    was: str = need(NAME)
    now: str = need(NAME)
    worse: bool = may(Flag(), default=False)  # a case now wrong, a product slower by --fail-over, a slow mode


@dataclass(frozen=True, kw_only=True)
class Since(Record):
    """The newest earlier check of the same machine (its chip or CPU and host), or the baseline named, and what
    changed since (tools/check/since.py)."""

    created_at: str = need(Text(max=64))
    versions: list[str] = need(List(NAME, max=16))  # "torch 2.14.1 -> 2.15.0": what differs of the software
    changes: list[Change] = need(List(Change.declared_shape(), max=10_000), Change)
    compared: int = need(Int(0, 100_000))  # cases and products found in both
    timed: int = may(Int(0, 100_000), default=0)  # products compared of `compared`
    undecided: list[str] = may(List(LONG, max=10_000), list)  # what could not be told, each in words
    same_machine: bool = may(Flag(), default=True)
    name: str = may(Text(max=200), default="")  # a baseline's file
    verdict: str = may(Text(max=32, choices=("", "a real change", "cannot tell", "no real change")), default="")


@dataclass(frozen=True, kw_only=True)
class CheckResult(ToolResult):
    sentence: str = need(LONG)
    suite: str = need(Text(max=32))
    devices: list[str] = need(List(DEVICE, max=64))
    rows: list[CheckRow] = need(List(CheckRow.declared_shape(), max=10_000), CheckRow)
    processes: int = may(Int(0, 1_000), default=0)  # fresh processes asked for the timing (0: none)
    timing: list[Timing] = may(List(Timing.declared_shape(), max=1_000), list, record=Timing)
    since: Since | None = may(Since.declared_shape(null=True), record=Since)
    baseline: Since | None = may(Since.declared_shape(null=True), record=Since)  # check --baseline FILE


CHECK = CheckResult.declared_shape()
