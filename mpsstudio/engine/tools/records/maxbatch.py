"""The largest-batch search's result (tools/maxbatch.py makes it)."""

from __future__ import annotations

from dataclasses import dataclass

from ...basics.config import MAX_BATCH
from ...basics.shape import Record, may, need
from ...basics.shape import Flag, Int, List, Text
from .common import BATCH, DEVICE, LONG, MS_OR_NULL, ToolResult


@dataclass(frozen=True, kw_only=True)
class Probe(Record):
    """One batch size tried: whether it trained, its rough speed and memory, and why not."""

    batch_size: int = need(BATCH)
    fits: bool = need(Flag())
    reason: str = need(LONG)
    samples_per_s: float | None = may(MS_OR_NULL)
    step_ms: float | None = may(MS_OR_NULL)
    memory: int | None = may(Int(null=True))
    memory_measure: str | None = may(Text(max=32, null=True))
    why: str | None = may(Text(max=64))


@dataclass(frozen=True, kw_only=True)
class Failed(Record):
    batch_size: int = need(BATCH)
    why: str = need(Text(max=64))
    reason: str = need(LONG)


@dataclass(frozen=True, kw_only=True)
class MaxBatchResult(ToolResult):
    """The largest batch that trains (and the fastest of those tried), from every probe."""

    sentence: str = need(LONG)
    probes: list[Probe] = need(List(Probe.declared_shape(), max=1_000), Probe)
    largest_batch: int | None = need(Int(1, MAX_BATCH, null=True))
    fastest_batch: int | None = need(Int(1, MAX_BATCH, null=True))
    device: str | None = may(DEVICE)
    smallest_failed: Failed | None = may(Failed.declared_shape(null=True), record=Failed)
    sweep_sizes: list[int] = may(List(BATCH, max=64), list)
    limit: int | None = may(Int(null=True))
    limit_source: str | None = may(LONG)
    limit_enforced: str | None = may(LONG)
    cap: int | None = may(BATCH)
    cap_source: str | None = may(LONG)
    capped: bool | None = may(Flag())
    probe_steps: int | None = may(Int(1, 1_000))
    axis: str = may(Text(max=16, choices=("batch", "seq_len")), "batch")  # what a probe's size is
    at_batch: int | None = may(Int(1, MAX_BATCH, null=True))  # the sequence axis's batch
    ceiling: str = may(LONG, "")  # the device's memory ceilings in words (tools/memory.ceiling)


MAX_BATCH_RESULT = MaxBatchResult.declared_shape()
