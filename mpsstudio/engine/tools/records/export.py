"""An export's result (tools/export.py, tools/coreml.py)."""

from __future__ import annotations

from ...basics.shape import Flag, Int, List, Num, Obj, Plain, Share, Text
from .common import BATCH, COMMON, COUNT, ERR, LONG

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
