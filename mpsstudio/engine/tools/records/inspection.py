"""An inspection's result (tools/inspection.py: parity with the CPU, operations that fell back) and the device
check's answer."""

from __future__ import annotations

from ...basics.shape import Flag, List, Map, Num, Obj, Share, Text
from .common import BATCH, COMMON, COUNT, DEVICE, ERR, LONG

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
