"""An inspection's result (tools/inspection.py: parity with the CPU, operations that fell back) and the device
check's answer."""

from __future__ import annotations

from dataclasses import dataclass

from ...basics.shape import Record, may, need
from ...basics.shape import Flag, List, Map, Num, Share, Text
from .common import BATCH, COUNT, DEVICE, ERR, LONG, ToolResult

CPU_FACTOR = 4.0  # where a stored parity does not say: a device may err this many times the CPU's own error


@dataclass(frozen=True, kw_only=True)
class GradError(Record):
    """One parameter's gradient against the float64 CPU reference (None: not finite)."""

    name: str = need(Text(max=1_000))
    max_rel_err: float | None = need(ERR)
    cpu_rel_err: float | None = may(ERR)
    ok: bool = may(Flag(), True)


@dataclass(frozen=True, kw_only=True)
class Parity(Record):
    """Loss, logits and gradients on a device against the float64 CPU reference, beside the CPU's own error in the
    same precision; `ok` where every one is within tolerance."""

    ok: bool = need(Flag())
    tolerance: float = need(Num(lo=1e-30, hi=1.0))
    precision: str = need(Text(max=16))
    grads: list[GradError] = need(List(GradError.declared_shape(), max=100_000), GradError)
    loss_rel_err: float | None = need(ERR)
    logits_max_rel_err: float | None = need(ERR)
    worst_rel_err: float | None = need(ERR)
    loss_cpu_rel_err: float | None = may(ERR)
    logits_cpu_rel_err: float | None = may(ERR)
    loss_ok: bool = may(Flag(), True)
    logits_ok: bool = may(Flag(), True)
    cpu_factor: float = may(Num(lo=1.0, hi=1_000.0), CPU_FACTOR)
    cpu_precision: str | None = may(Text(max=16))
    batch_size: int | None = may(BATCH)
    reference: str | None = may(Text(max=200))
    judged: str | None = may(Text(max=32))


@dataclass(frozen=True, kw_only=True)
class FallbackOp(Record):
    """An operation that ran on the CPU during one training step: its calls and its share of the time in operations."""

    op: str = need(Text(max=300))
    count: int = need(COUNT)
    share: float | None = may(Share(null=True))


@dataclass(frozen=True, kw_only=True)
class Check(Record):
    ok: bool = need(Flag())
    detail: str = need(LONG)


@dataclass(frozen=True, kw_only=True)
class OpCount(Record):
    op: str = need(Text(max=300))
    count: int = need(COUNT)
    kind: str | None = may(Text(max=32))


PARITY = Parity.declared_shape(null=True)
FALLBACK_OPS = List(FallbackOp.declared_shape(), max=5_000)
CHECK = Check.declared_shape()


@dataclass(frozen=True, kw_only=True)
class InspectResult(ToolResult):
    """Whether a device works, computes what the CPU computes, and which operations fall back to the CPU."""

    sentence: str = need(LONG)
    probe: Check = need(CHECK, Check)
    fallback_ops: list[FallbackOp] = need(FALLBACK_OPS, FallbackOp)
    device: str | None = may(DEVICE)
    parity: Parity | None = may(PARITY, record=Parity)
    fallback_share: float | None = may(Share(null=True))
    fallback_applies: bool | None = may(Flag(null=True))
    ops_batch_size: int | None = may(BATCH)
    op_count: int | None = may(COUNT)
    distinct_ops: int | None = may(COUNT)
    missing_ops: list[str] = may(List(Text(max=300), max=5_000), list)
    ops: list[OpCount] = may(List(OpCount.declared_shape(), max=5_000), list, OpCount)
    precision: str | None = may(Text(max=16))
    tf32: bool | None = may(Flag(null=True))


INSPECT = InspectResult.declared_shape()


@dataclass(frozen=True, kw_only=True)
class DeviceChecks(Record):
    checks: dict[str, Check] = need(Map(CHECK, max=64))


DEVICES = DeviceChecks.declared_shape()
