"""The deploy benchmark's result (tools/deploy/deploybench.py)."""

from __future__ import annotations

from dataclasses import dataclass

from ...basics.shape import Record, may, need
from ...basics.shape import Flag, Int, List, Map, Share, Text
from .common import BATCH, COUNT, ERR, LONG, MS_OR_NULL, NAME, OpCount, ToolResult


@dataclass(frozen=True, kw_only=True)
class DeployRow(Record):
    """One model, at one place (a runtime on a compute unit), at one batch size: measured latency, throughput,
    agreement with PyTorch and energy, or the reason it did not run."""

    model: str = need(NAME)
    label: str = need(NAME)
    runtime: str = need(Text(max=64))
    where: str = need(Text(max=64))
    batch_size: int = need(BATCH)
    reason: str = need(LONG)
    repetitions: int | None = may(Int(null=True))
    load_s: float | None = may(MS_OR_NULL)
    convert_s: float | None = may(MS_OR_NULL)
    first_s: float | None = may(MS_OR_NULL)
    latency_ms: float | None = may(MS_OR_NULL)
    latency_iqr_ms: float | None = may(MS_OR_NULL)
    samples_per_s: float | None = may(MS_OR_NULL)
    max_abs_err: float | None = may(ERR)
    max_rel_err: float | None = may(ERR)
    top1_agreement: float | None = may(Share(null=True))
    agrees: bool | None = may(Flag(null=True))
    stability: str | None = may(Text(max=16, null=True, choices=("stable", "noisy")))
    energy_mj_per_sample: float | None = may(MS_OR_NULL)
    energy_s: float | None = may(MS_OR_NULL)
    energy_parts_mj: dict[str, float | None] = may(Map(MS_OR_NULL, max=16), dict)
    energy_measure: str | None = may(Text(max=32, null=True))
    energy_source: str | None = may(Text(max=300, null=True))
    energy_reason: str | None = may(Text(max=2_000, null=True))


@dataclass(frozen=True, kw_only=True)
class Placement(Record):
    """Where Core ML put a model's operations (CPU, GPU, Neural Engine), or why that is not known."""

    reason: str | None = may(LONG)
    sentence: str | None = may(LONG)
    compute_units: str | None = may(Text(max=32))
    operations: int | None = may(COUNT)
    share_of_operations: dict[str, float | None] = may(Map(Share(null=True), max=8), dict)
    share_of_cost: dict[str, float | None] = may(Map(Share(null=True), max=8), dict)
    not_on_neural_engine: list[OpCount] = may(List(OpCount.declared_shape(), max=5_000), list, OpCount)
    undetermined: int | None = may(COUNT)


@dataclass(frozen=True, kw_only=True)
class DeployResult(ToolResult):
    sentence: str = need(LONG)
    rows: list[DeployRow] = need(List(DeployRow.declared_shape(), max=5_000), DeployRow)
    models: list[str] = need(List(NAME, max=64))
    batch_sizes: list[int] = may(List(BATCH, max=64), list)
    placement: dict[str, Placement] = may(Map(Placement.declared_shape(), max=64), dict, Placement)
    coreml_runs_here: bool | None = may(Flag(null=True))


DEPLOY = DeployResult.declared_shape()
