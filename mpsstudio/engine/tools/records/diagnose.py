"""A diagnosis's result (tools/diagnose/): per device the step's anatomy (its phases, operations, waits), the parity
with the float64 CPU reference and, where asked, the first module beyond tolerance; or why the device was not
diagnosed. A device's bound, its shares and its sentence are derived on every read (analysis/bottleneck.judged),
never taken from a file."""

from __future__ import annotations

from dataclasses import dataclass

from ...basics.shape import Record, derived, may, need
from ...basics.shape import Either, Flag, Int, List, Map, Num, Plain, Share, Text
from .common import BATCH, COUNT, DEVICE, ERR, LONG, MS_OR_NULL, OpCount, ToolResult
from .inspection import FALLBACK_OPS, FallbackOp, Parity

STEP_MS = Num(lo=0.0, hi=1e9)  # a step of up to 11 days, in milliseconds
PHASE_FIELDS = ("step_iqr_ms", "data_ms", "data_iqr_ms", "copy_ms", "copy_iqr_ms", "forward_ms", "forward_iqr_ms",
                "backward_ms", "backward_iqr_ms", "optimizer_ms", "optimizer_iqr_ms", "host_ms", "host_iqr_ms",
                "sync_wait_ms")


@dataclass(frozen=True, kw_only=True)
class LayerRow(Record):
    """One leaf module's call against the float64 CPU reference."""

    module: str = need(Text(max=1_000))
    type: str = need(Text(max=200))
    max_rel_err: float | None = need(ERR)
    cpu_rel_err: float | None = need(ERR)
    ok: bool = need(Flag())
    finite: bool = may(Flag(), True)
    input_range: list[float] | None = may(List(Num(lo=None), max=2, null=True))


@dataclass(frozen=True, kw_only=True)
class Layers(Record):
    """Every leaf module's call in order, and the first beyond tolerance (or holding NaN or Inf)."""

    rows: list[LayerRow] = need(List(LayerRow.declared_shape(), max=100_000), LayerRow)
    precision: str = need(Text(max=16))
    tolerance: float = need(Num(lo=1e-30, hi=1.0))
    first_wrong: LayerRow | None = may(LayerRow.declared_shape(null=True), None, LayerRow)
    first_nonfinite: LayerRow | None = may(LayerRow.declared_shape(null=True), None, LayerRow)
    ok: bool | None = may(Flag(null=True))
    judged: str | None = may(Text(max=32))
    calls: int | None = may(COUNT)
    compared: int | None = may(COUNT)

    @property
    def first(self) -> LayerRow | None:
        return self.first_wrong or self.first_nonfinite


@dataclass(frozen=True, kw_only=True)
class AfterParity(Parity):
    """The parity again after some training steps."""

    steps: int = need(COUNT)


@dataclass(frozen=True, kw_only=True)
class Preflight(Record):
    """What MPS would refuse (float64, complex128) and whether the run casts it."""

    refused: list[str] = may(List(Text(max=1_000), max=10_000), list)
    note: str | None = may(Text(max=20_000, null=True))
    cast: bool | None = may(Flag(null=True))


@dataclass(frozen=True, kw_only=True)
class SyncCall(Record):
    call: str = need(Text(max=400))
    count: int = need(COUNT)


@dataclass(frozen=True, kw_only=True)
class Diagnosed(Record):
    """One device diagnosed: milliseconds per step (medians and IQRs of the phases), what the per-operation timing
    found, the parity and the layers; bound, shares, sentence and phase_sum_ratio derived on read."""

    device: str = need(DEVICE)
    kind: str = need(Text(choices=("cpu", "mps", "cuda")))
    step_ms: float = need(Num(lo=1e-9, hi=1e9))
    step_iqr_ms: float = need(STEP_MS)
    data_ms: float = need(STEP_MS)
    data_iqr_ms: float = need(STEP_MS)
    copy_ms: float = need(STEP_MS)
    copy_iqr_ms: float = need(STEP_MS)
    forward_ms: float = need(STEP_MS)
    forward_iqr_ms: float = need(STEP_MS)
    backward_ms: float = need(STEP_MS)
    backward_iqr_ms: float = need(STEP_MS)
    optimizer_ms: float = need(STEP_MS)
    optimizer_iqr_ms: float = need(STEP_MS)
    host_ms: float = need(STEP_MS)
    host_iqr_ms: float = need(STEP_MS)
    sync_wait_ms: float = need(STEP_MS)
    batch_size: int = need(BATCH)
    workers: int = need(Int(0, 1_024))
    ops: int | None = may(Int(null=True))
    sync_count: int | None = may(Int(null=True))
    distinct_ops: int | None = may(Int(null=True))
    launch_us: float | None = may(Num(hi=1e12, null=True))
    device_ms: float | None = may(Num(hi=1e9, null=True))
    empty_op_us: float | None = may(Num(hi=1e12, null=True))
    fallback_share: float | None = may(Share(null=True))
    sync_ops: list[OpCount] = may(List(OpCount.declared_shape(), max=5_000), list, OpCount)
    nosync_step_ms: float | None = may(Num(hi=1e9, null=True))
    sync_cost_ms: float | None = may(Num(hi=1e9, null=True))
    sync_calls: list[SyncCall] = may(List(SyncCall.declared_shape(), max=64), list, SyncCall)
    sync_method: str | None = may(Text(max=400, null=True))
    fallback_ops: list[FallbackOp] = may(FALLBACK_OPS, list, FallbackOp)
    missing_ops: list[str] = may(List(Text(max=300), max=5_000), list)
    launch_measure: str | None = may(Text(null=True, choices=("measured", "estimated")))
    op_clock: str | None = may(Text(max=2_000, null=True))
    op_timing_error: str | None = may(Text(max=2_000, null=True))
    device_name: str | None = may(Text(max=300, null=True))
    precision: str | None = may(Text(max=16))
    mode: str | None = may(Text(max=16))
    samples_per_s: float | None = may(MS_OR_NULL)
    layers: Layers | None = may(Layers.declared_shape(null=True), None, Layers)
    after_layers: Layers | None = may(Layers.declared_shape(null=True), None, Layers)
    parity: Parity | None = may(Parity.declared_shape(null=True), None, Parity)
    after: AfterParity | None = may(AfterParity.declared_shape(null=True), None, AfterParity)
    memory: dict[str, int] = may(Map(COUNT, max=16), dict)
    memory_measure: str | None = may(Text(max=32))
    preflight: Preflight = may(Preflight.declared_shape(), Preflight(), Preflight)
    parity_error: str | None = may(Text(max=2_000))
    passes: object = may(Plain())
    bound: str = derived("?")  # compute, launch, sync, data, fallback (analysis/bottleneck.classify)
    shares: dict = derived(dict)  # each cause's share of the step
    sentence: str = derived("")  # the bound in words
    phase_sum_ratio: float | None = derived()  # the synchronized phases' sum over the step

    def phase_ms(self, phase: str) -> float:
        return float(getattr(self, f"{phase}_ms"))


@dataclass(frozen=True, kw_only=True)
class DeviceFailed(Record):
    """A device the diagnosis could not measure, and why."""

    device: str = need(DEVICE)
    error: str = need(LONG)


def _device_record(value: dict) -> type[Record]:
    return DeviceFailed if "error" in value else Diagnosed


@dataclass(frozen=True, kw_only=True)
class Diagnosis(ToolResult):
    """A diagnosis of one setup on each device asked."""

    sentence: str = need(LONG)
    config: dict = need(ToolResult.declared_shape().may["config"])
    devices: list[Diagnosed | DeviceFailed] = need(List(Either(lambda d: isinstance(d, dict) and "error" in d,
                                                             DeviceFailed.declared_shape(), Diagnosed.declared_shape()),
                                                      max=16), _device_record)
    layers_asked: bool | None = may(Flag(null=True))
    after_steps: int = may(Int(0, 100_000), 0)


DIAGNOSE = Diagnosis.declared_shape()
