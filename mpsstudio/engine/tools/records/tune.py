"""A tune's result (tools/tune/)."""

from __future__ import annotations

from ...basics.shape import Flag, Int, List, Map, Num, Obj, Text
from .common import BATCH, BIG, COMMON, COUNT, DEVICE, ERR, LONG, MS, MS_OR_NULL

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
