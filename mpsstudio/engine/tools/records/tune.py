"""A tune's result (tools/tune/)."""

from __future__ import annotations

from dataclasses import dataclass

from ...basics.shape import Record, may, need
from ...basics.shape import Flag, Int, List, Map, Num, Text
from .common import BATCH, BIG, COUNT, DEVICE, ERR, LONG, MS, MS_OR_NULL, ToolResult

STATUSES = ("measured", "dropped", "failed", "unusable", "refused", "not measured")
LOSS = Num(lo=None, hi=BIG, null=True, nonfinite_is_null=True)


@dataclass(frozen=True, kw_only=True)
class TuneRow(Record):
    """One candidate setting: what it is, what it measured against the current setting on its device, and why it
    is or is not usable."""

    key: str = need(Text(max=300))
    label: str = need(Text(max=300))
    device: str = need(DEVICE)
    precision: str = need(Text(max=16))
    channels_last: bool = need(Flag())
    compile: bool = need(Flag())
    batch_size: int = need(BATCH)
    status: str = need(Text(max=32, choices=STATUSES))
    baseline: bool = need(Flag())
    threads: int | None = may(Int(1, 4096, null=True))
    tf32: str | None = may(Text(max=8, null=True, choices=("off", "conv", "all")))
    round_samples_per_s: list[float] | None = may(List(MS, max=100, null=True))
    rounds: int | None = may(COUNT)
    run_ids: list[str] = may(List(Text(max=64), max=1_000), list)
    reason: str | None = may(Text(max=20_000, null=True))
    samples_per_s: float | None = may(MS_OR_NULL)
    samples_per_s_low: float | None = may(MS_OR_NULL)
    samples_per_s_high: float | None = may(MS_OR_NULL)
    samples_per_s_iqr: float | None = may(MS_OR_NULL)
    interval: str | None = may(Text(max=200, null=True))
    speedup: float | None = may(MS_OR_NULL)
    speedup_low: float | None = may(MS_OR_NULL)
    speedup_high: float | None = may(MS_OR_NULL)
    peak_memory: float | None = may(MS_OR_NULL)
    warmup_s: float | None = may(MS_OR_NULL)
    final_loss: float | None = may(LOSS)
    loss_vs_fp32: float | None = may(LOSS)
    parity_ok: bool | None = may(Flag(null=True))
    parity_worst: float | None = may(ERR)
    first_wrong_layer: str | None = may(Text(max=1_200, null=True))


@dataclass(frozen=True, kw_only=True)
class TuneResult(ToolResult):
    """Every candidate measured in rounds against the current setting, and the one to use per device (None: keep
    the current one)."""

    sentence: str = need(LONG)
    candidates: list[TuneRow] = need(List(TuneRow.declared_shape(), max=1_000), TuneRow)
    recommendation: dict[str, str | None] = need(Map(Text(max=300, null=True), max=64))
    devices: list[str] = may(List(DEVICE, max=64), list)
    rounds: int | None = may(COUNT)
    steps: int | None = may(COUNT)
    warmup: int | None = may(COUNT)
    budget_s: float | None = may(MS)
    elapsed_s: float | None = may(MS)
    out_of_budget: bool | None = may(Flag())
    dropped_count: int | None = may(COUNT)
    leader_rounds: int | None = may(COUNT)  # rounds only the fastest (tied) and the current settings had


TUNE = TuneResult.declared_shape()
