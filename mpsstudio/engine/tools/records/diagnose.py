"""A diagnosis's result (tools/diagnose/)."""

from __future__ import annotations

from ...basics.shape import Either, Flag, Int, List, Map, Num, Obj, Plain, Share, Text
from .common import BATCH, COMMON, CONFIG, COUNT, DEVICE, ERR, LONG, MS_OR_NULL
from .inspection import FALLBACK_OPS, PARITY

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
