"""What every tool's result is made of: the field shapes they share (a device, a batch, a sentence, a time or a
relative error) and the fields every result may carry (ToolResult). No torch."""

from __future__ import annotations

from dataclasses import dataclass

from ...basics.config import MAX_BATCH
from ...basics.shape import Record, may, need
from ...basics.shape import Flag, Int, List, Num, Obj, Text

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


@dataclass(frozen=True, kw_only=True)
class OpCount(Record):
    """An operator and how many times it was called (or placed)."""

    op: str = need(Text(max=300))
    count: int = need(COUNT)


@dataclass(frozen=True, kw_only=True)
class ToolResult(Record):
    """What every tool's result may carry: its sentence, where and with what it ran, whether it was stopped."""

    sentence: str = may(LONG, "")
    env: dict | None = may(ENV)
    config: dict | None = may(CONFIG)
    imported_from: str | None = may(Text(max=4_096, null=True))
    stopped: bool | None = may(Flag(null=True))
    notes: list[str] = may(NOTES, list)
    tool: str | None = may(Text(max=32))
    kind: str | None = may(Text(max=32))
