"""The declared shape of every tool result the history keeps (and of the device check's answer): what the tool's
process may send, what an imported file may hold, what a pending file or a stored row is read as, and what the views
(toolview.py, diagnose/view.py, the Tools tab, the CLI) may read. One declaration: registry.checked goes by it, and
a field a view reads is declared here (tests/engine/tools/test_shapes.py renders every view over mutations of real results).

Ranges are what a tool can produce: times, rates, bytes and counts are finite and not negative; shares 0 to 1;
parity errors finite or null (null: not finite, JSON has no infinity); lists no longer than a tool makes them.
No torch here.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..basics.config import MAX_BATCH
from ..basics.records import Record, may, need
from ..basics.shape import Either, Flag, Int, List, Map, Num, Obj, Plain, Share, Text

NAME = Text(max=200)
DEVICE = Text(max=64)
LONG = Text(max=20_000)  # a sentence, a reason with an error message in it
BATCH = Int(1, MAX_BATCH)
COUNT = Int()
BIG = 1e18  # no measured quantity (a time, a rate, bytes) comes near this (basics/summary_fields.MAX_NUMBER alike)
MS = Num(hi=BIG)  # milliseconds (or seconds, bytes ...): finite, not negative
MS_OR_NULL = Num(hi=BIG, null=True)
ERR = Num(hi=BIG, null=True, nonfinite_is_null=True)  # a relative error: null where it was not finite (JSON has no inf)
NOTES = List(LONG, max=200)

ENV = Obj(may={"machine_label": Text(max=300, null=True), "hostname": Text(max=300, null=True),
               "device_name": Text(max=300, null=True), "os": Text(max=300, null=True)}, null=True)
CONFIG = Obj(may={"model": Text(max=4_096), "dataset": Text(max=4_096), "device": DEVICE,
                  "precision": Text(max=16), "tf32": Flag(null=True), "batch_size": BATCH, "mode": Text(max=16)})
COMMON = {"sentence": LONG, "env": ENV, "config": CONFIG, "imported_from": Text(max=4_096, null=True),
          "stopped": Flag(null=True), "notes": NOTES, "tool": Text(max=32), "kind": Text(max=32)}

# ---------------------------------------------------------------- sweep

@dataclass(frozen=True, kw_only=True)
class ToolRecord(Record):
    """What every tool's result may carry: its sentence, where and with what it ran, whether it was stopped."""

    sentence: str = may(LONG, "")
    env: dict | None = may(ENV)
    config: dict | None = may(CONFIG)
    imported_from: str | None = may(Text(max=4_096, null=True))
    stopped: bool | None = may(Flag(null=True))
    notes: list[str] = may(NOTES, many=True)
    tool: str | None = may(Text(max=32))
    kind: str | None = may(Text(max=32))


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
    ratios: list[Ratio] = need(List(Ratio.shape(), max=200), Ratio)
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
class SweepResult(ToolRecord):
    """A batch-size sweep: every point measured, the best batch per device, each accelerator's crossover."""

    sentence: str = need(LONG)
    best: dict[str, int] = need(Map(BATCH, max=64))
    points: list[SweepPoint] = need(List(SweepPoint.shape(), max=2_000), SweepPoint)
    crossover: Crossover | None = may(Crossover.shape(null=True), record=Crossover)
    crossovers: list[Crossover] = may(List(Crossover.shape(), max=64), record=Crossover, many=True)
    steps: int | None = may(COUNT)


SWEEP = SweepResult.shape()

# ---------------------------------------------------------------- max-batch


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
class MaxBatchResult(ToolRecord):
    """The largest batch that trains (and the fastest of those tried), from every probe."""

    sentence: str = need(LONG)
    probes: list[Probe] = need(List(Probe.shape(), max=1_000), Probe)
    largest_batch: int | None = need(Int(1, MAX_BATCH, null=True))
    fastest_batch: int | None = need(Int(1, MAX_BATCH, null=True))
    device: str | None = may(DEVICE)
    smallest_failed: Failed | None = may(Failed.shape(null=True), record=Failed)
    sweep_sizes: list[int] = may(List(BATCH, max=64), many=True)
    limit: int | None = may(Int(null=True))
    limit_source: str | None = may(LONG)
    limit_enforced: str | None = may(LONG)
    cap: int | None = may(BATCH)
    cap_source: str | None = may(LONG)
    capped: bool | None = may(Flag())
    probe_steps: int | None = may(Int(1, 1_000))


MAX_BATCH_RESULT = MaxBatchResult.shape()

# ---------------------------------------------------------------- inspect

PARITY = Obj(need={"ok": Flag(), "tolerance": Num(lo=1e-30, hi=1.0), "precision": Text(max=16),
                   "grads": List(Obj(need={"name": Text(max=1_000), "max_rel_err": ERR},
                                     may={"cpu_rel_err": ERR, "ok": Flag()}), max=100_000),
                   "loss_rel_err": ERR, "logits_max_rel_err": ERR, "worst_rel_err": ERR},
             may={"loss_cpu_rel_err": ERR, "logits_cpu_rel_err": ERR, "loss_ok": Flag(), "logits_ok": Flag(),
                  "cpu_factor": Num(lo=1.0, hi=1_000.0), "cpu_precision": Text(max=16), "batch_size": BATCH,
                  "reference": Text(max=200), "judged": Text(max=32)},
             null=True)
FALLBACK_OPS = List(Obj(need={"op": Text(max=300), "count": COUNT}, may={"share": Share(null=True)}), max=5_000)
CHECK = Obj(need={"ok": Flag(), "detail": LONG})
INSPECT = Obj(need={"sentence": LONG, "probe": CHECK, "fallback_ops": FALLBACK_OPS},
              may={**COMMON, "device": DEVICE, "parity": PARITY, "fallback_share": Share(null=True),
                   "fallback_applies": Flag(null=True), "ops_batch_size": BATCH, "op_count": COUNT,
                   "distinct_ops": COUNT, "missing_ops": List(Text(max=300), max=5_000),
                   "ops": List(Obj(need={"op": Text(max=300), "count": COUNT}, may={"kind": Text(max=32)}),
                               max=5_000),
                   "precision": Text(max=16), "tf32": Flag(null=True)})

DEVICES = Obj(need={"checks": Map(CHECK, max=64)})

# ---------------------------------------------------------------- export

EXPORT = Obj(
    need={"sentence": LONG, "format": Text(max=64), "path": Text(max=4_096), "bytes": COUNT,
          "weights_note": LONG, "classes": List(Text(max=500), max=100_000),
          "check": Obj(need={"ok": Flag(null=True), "reason": LONG},
                       may={"max_abs_err": ERR, "max_rel_err": ERR, "top1_agreement": Share(null=True),
                            "tolerance": Num(null=True), "how": LONG})},
    may={**COMMON, "precision": Text(max=16), "model": Text(max=4_096), "dataset": Text(max=4_096),
         "weights": Text(max=4_096, null=True), "minimum_deployment_target": Text(max=200, null=True),
         "input": Obj(may={"name": Text(max=200, null=True), "shape": List(Int(0, 2**31), max=16, null=True),
                           "dtype": Text(max=32, null=True), "kind": Text(max=32, null=True)}, null=True),
         "output": Obj(may={"name": Text(max=200, null=True), "shape": List(Int(0, 2**31), max=16, null=True)},
                       null=True),
         "batch_sizes": List(BATCH, max=64, null=True),
         "compression": Obj(need={"method": Text(max=64), "bytes": COUNT, "uncompressed_bytes": COUNT}, null=True),
         "normalization": Plain(), "staged": Text(max=4_096)})

# ---------------------------------------------------------------- deploy-bench

DEPLOY_ROW = Obj(
    need={"model": NAME, "label": NAME, "runtime": Text(max=64), "where": Text(max=64), "batch_size": BATCH,
          "reason": LONG},
    may={"repetitions": Int(null=True), "load_s": MS_OR_NULL, "convert_s": MS_OR_NULL, "first_s": MS_OR_NULL,
         "latency_ms": MS_OR_NULL, "latency_iqr_ms": MS_OR_NULL, "samples_per_s": MS_OR_NULL, "max_abs_err": ERR,
         "max_rel_err": ERR, "top1_agreement": Share(null=True), "agrees": Flag(null=True),
         "stability": Text(max=16, null=True, choices=("stable", "noisy")), "energy_mj_per_sample": MS_OR_NULL,
         "energy_s": MS_OR_NULL, "energy_parts_mj": Map(MS_OR_NULL, max=16),
         "energy_measure": Text(max=32, null=True), "energy_source": Text(max=300, null=True),
         "energy_reason": Text(max=2_000, null=True)})
PLACEMENT = Obj(may={"reason": LONG, "sentence": LONG, "compute_units": Text(max=32), "operations": COUNT,
                     "share_of_operations": Map(Share(null=True), max=8), "share_of_cost": Map(Share(null=True), max=8),
                     "not_on_neural_engine": List(Obj(need={"op": Text(max=300), "count": COUNT}), max=5_000),
                     "undetermined": COUNT})
DEPLOY = Obj(need={"sentence": LONG, "rows": List(DEPLOY_ROW, max=5_000), "models": List(NAME, max=64)},
             may={**COMMON, "batch_sizes": List(BATCH, max=64), "placement": Map(PLACEMENT, max=64),
                  "coreml_runs_here": Flag(null=True)})

# ---------------------------------------------------------------- diagnose

LAYER_ROW = Obj(need={"module": Text(max=1_000), "type": Text(max=200), "max_rel_err": ERR, "cpu_rel_err": ERR,
                      "ok": Flag()},
                may={"finite": Flag(), "input_range": List(Num(lo=None), max=2, null=True)})
LAYERS = Obj(need={"rows": List(LAYER_ROW, max=100_000), "precision": Text(max=16), "tolerance": Num(lo=1e-30, hi=1.0)},
             may={"first_wrong": Obj(need=LAYER_ROW.need, may=LAYER_ROW.may, null=True),
                  "first_nonfinite": Obj(need=LAYER_ROW.need, may=LAYER_ROW.may, null=True),
                  "ok": Flag(null=True), "judged": Text(max=32), "calls": COUNT, "compared": COUNT},
             null=True)
STEP_MS = Num(lo=0.0, hi=1e9)  # a step of up to 11 days, in milliseconds
DIAGNOSED = Obj(
    need={"device": DEVICE, "kind": Text(choices=("cpu", "mps", "cuda")),
          "step_ms": Num(lo=1e-9, hi=1e9), **{k: STEP_MS for k in (
              "step_iqr_ms", "data_ms", "data_iqr_ms", "copy_ms", "copy_iqr_ms", "forward_ms", "forward_iqr_ms",
              "backward_ms", "backward_iqr_ms", "optimizer_ms", "optimizer_iqr_ms", "host_ms", "host_iqr_ms",
              "sync_wait_ms")},
          "batch_size": BATCH, "workers": Int(0, 1_024)},
    may={"ops": Int(null=True), "sync_count": Int(null=True), "distinct_ops": Int(null=True),
         "launch_us": Num(hi=1e12, null=True), "device_ms": Num(hi=1e9, null=True),
         "empty_op_us": Num(hi=1e12, null=True), "fallback_share": Share(null=True),
         "sync_ops": List(Obj(need={"op": Text(max=300), "count": COUNT}), max=5_000),
         "nosync_step_ms": Num(hi=1e9, null=True), "sync_cost_ms": Num(hi=1e9, null=True),
         "sync_calls": List(Obj(need={"call": Text(max=400), "count": COUNT}), max=64),
         "sync_method": Text(max=400, null=True),
         "fallback_ops": FALLBACK_OPS, "missing_ops": List(Text(max=300), max=5_000),
         "launch_measure": Text(null=True, choices=("measured", "estimated")),
         "op_clock": Text(max=2_000, null=True), "op_timing_error": Text(max=2_000, null=True),
         "device_name": Text(max=300, null=True), "precision": Text(max=16), "mode": Text(max=16),
         "samples_per_s": MS_OR_NULL, "layers": LAYERS, "after_layers": LAYERS, "parity": PARITY,
         "after": Obj(need={"steps": COUNT, **PARITY.need}, may=PARITY.may, null=True),
         "memory": Map(COUNT, max=16), "memory_measure": Text(max=32),
         "preflight": Obj(may={"refused": List(Text(max=1_000), max=10_000), "note": Text(max=20_000, null=True),
                               "cast": Flag(null=True)}),
         "parity_error": Text(max=2_000), "passes": Plain()})
DIAGNOSE = Obj(need={"sentence": LONG, "config": CONFIG,
                     "devices": List(Either(lambda d: isinstance(d, dict) and "error" in d,
                                            Obj(need={"device": DEVICE, "error": LONG}), DIAGNOSED), max=16)},
               may={**COMMON, "layers_asked": Flag(null=True), "after_steps": Int(0, 100_000)})

# ---------------------------------------------------------------- tune

TUNE_ROW = Obj(
    need={"key": Text(max=300), "label": Text(max=300), "device": DEVICE, "precision": Text(max=16),
          "channels_last": Flag(), "compile": Flag(), "batch_size": BATCH, "status": Text(max=32, choices=(
              "measured", "dropped", "failed", "unusable", "refused", "not measured")),
          "baseline": Flag()},
    may={"threads": Int(1, 4096, null=True), "tf32": Text(max=8, null=True, choices=("off", "conv", "all")),
         "round_samples_per_s": List(MS, max=100, null=True), "rounds": COUNT, "run_ids": List(Text(max=64), max=1_000),
         "reason": Text(max=20_000, null=True), "samples_per_s": MS_OR_NULL, "samples_per_s_low": MS_OR_NULL,
         "samples_per_s_high": MS_OR_NULL, "samples_per_s_iqr": MS_OR_NULL, "interval": Text(max=200, null=True),
         "speedup": MS_OR_NULL, "speedup_low": MS_OR_NULL, "speedup_high": MS_OR_NULL,
         "peak_memory": MS_OR_NULL, "warmup_s": MS_OR_NULL, "final_loss": Num(lo=None, hi=BIG, null=True,
                                                                              nonfinite_is_null=True),
         "loss_vs_fp32": Num(lo=None, hi=BIG, null=True, nonfinite_is_null=True), "parity_ok": Flag(null=True),
         "parity_worst": ERR, "first_wrong_layer": Text(max=1_200, null=True)})
TUNE = Obj(need={"sentence": LONG, "candidates": List(TUNE_ROW, max=1_000),
                 "recommendation": Map(Text(max=300, null=True), max=64)},
           may={**COMMON, "devices": List(DEVICE, max=64), "rounds": COUNT, "steps": COUNT, "warmup": COUNT,
                "budget_s": MS, "elapsed_s": MS, "out_of_budget": Flag(), "dropped_count": COUNT})

SHAPES = {"sweep": SWEEP, "max-batch": MAX_BATCH_RESULT, "inspect": INSPECT, "devices": DEVICES, "export": EXPORT,
          "deploy-bench": DEPLOY, "diagnose": DIAGNOSE, "tune": TUNE}
MAX_STORED_BYTES = 8 * 1024 * 1024  # the JSON of one stored tool result (a 100-layer diagnosis is ~50 KB)
