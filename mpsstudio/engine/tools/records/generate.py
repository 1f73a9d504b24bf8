"""A generation-speed result (tools/generate/timing.py makes it; tools/generate/words.py says it)."""

from __future__ import annotations

from dataclasses import dataclass

from ...basics.shape import Int, List, Num, Record, Text, may, need
from .common import BIG, DEVICE, MS, NAME, ToolResult

FIGURE = List(Num(hi=BIG), max=3, null=True)  # [median, low, high]


@dataclass(frozen=True, kw_only=True)
class GenerateRow(Record):
    """One device x precision x context: the repetitions' times (s) and the figures made of them."""

    device: str = need(DEVICE)
    precision: str = need(Text(max=16, choices=("fp32", "bf16", "fp16")))
    framework: str = may(Text(max=8, choices=("torch", "mlx")), "torch")  # transformers' generate, or mlx-lm's
    context: int = need(Int(1, 1 << 20))
    new_tokens: int = need(Int(2, 1 << 16))
    batch: int = need(Int(1, 1 << 16))
    repeats: int = need(Int(0, 1000))
    first_s: list[float] = need(List(MS, max=1000))
    whole_s: list[float] = need(List(MS, max=1000))
    first_tokens: list[int] = may(List(Int(0, 1 << 40), max=64), list)
    peak_memory: float | None = may(Num(hi=BIG, null=True))
    memory_measure: str = may(Text(max=64), "")
    ttft_ms: list[float] | None = may(FIGURE)
    prefill_tps: list[float] | None = may(FIGURE)
    decode_tps: list[float] | None = may(FIGURE)
    decode_note: str = may(Text(max=400), "")  # why there is no decode figure


@dataclass(frozen=True, kw_only=True)
class GenerateResult(ToolResult):
    model: str = may(NAME, "")
    architecture: str = may(NAME, "")
    rows: list[GenerateRow] = need(List(GenerateRow.declared_shape(), max=10_000), GenerateRow)


GENERATE = GenerateResult.declared_shape()
