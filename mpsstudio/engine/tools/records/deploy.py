"""The deploy benchmark's result (tools/deploybench.py)."""

from __future__ import annotations

from ...basics.shape import Flag, Int, List, Map, Obj, Share, Text
from .common import BATCH, COMMON, COUNT, ERR, LONG, MS_OR_NULL, NAME

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
