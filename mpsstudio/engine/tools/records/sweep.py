"""A batch-size sweep's result (tools/sweep.py makes it)."""

from __future__ import annotations

from dataclasses import dataclass

from ...basics.config import MAX_BATCH
from ...basics.shape import Record, may, need
from ...basics.shape import Flag, Int, List, Map, Num, Text
from .common import BATCH, COUNT, DEVICE, LONG, MS_OR_NULL, ToolResult


@dataclass(frozen=True, kw_only=True)
class Ratio(Record):
    """An accelerator's speed over the CPU's at one batch size, with its interval where there is one."""

    batch_size: int = need(BATCH)
    speedup: float = need(Num())
    low: float | None = may(Num(null=True))
    high: float | None = may(Num(null=True))
    faster: bool | None = may(Flag(null=True))


@dataclass(frozen=True, kw_only=True)
class Crossover(Record):
    """Where an accelerator becomes faster than the CPU (batch_size: null where it never is)."""

    device: str = need(DEVICE)
    batch_size: int | None = need(Int(1, MAX_BATCH, null=True))
    speedup_at_largest: float = need(Num())
    ratios: list[Ratio] = need(List(Ratio.declared_shape(), max=200), Ratio)
    largest_batch: int | None = may(BATCH)
    never_faster: bool | None = may(Flag())
    faster_everywhere: bool | None = may(Flag())
    baseline: str | None = may(DEVICE)


@dataclass(frozen=True, kw_only=True)
class SweepPoint(Record):
    device: str = need(DEVICE)
    batch_size: int = need(BATCH)
    samples_per_s: float | None = may(MS_OR_NULL)
    samples_per_s_iqr: float | None = may(MS_OR_NULL)
    step_ms: float | None = may(MS_OR_NULL)
    status: str | None = may(Text(max=32, null=True))
    stability: str | None = may(Text(max=32, null=True))
    error: str | None = may(Text(max=20_000, null=True))
    run_id: str | None = may(Text(max=64, null=True))


@dataclass(frozen=True, kw_only=True)
class SweepResult(ToolResult):
    """A batch-size sweep: every point measured, the best batch per device, each accelerator's crossover."""

    sentence: str = need(LONG)
    best: dict[str, int] = need(Map(BATCH, max=64))
    points: list[SweepPoint] = need(List(SweepPoint.declared_shape(), max=2_000), SweepPoint)
    crossover: Crossover | None = may(Crossover.declared_shape(null=True), record=Crossover)
    crossovers: list[Crossover] = may(List(Crossover.declared_shape(), max=64), list, Crossover)
    steps: int | None = may(COUNT)


SWEEP = SweepResult.declared_shape()
