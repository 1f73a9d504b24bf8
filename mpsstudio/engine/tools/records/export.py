"""An export's result (tools/deploy/export.py, tools/deploy/coreml.py)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ...basics.shape import Record, may, need
from ...basics.shape import Flag, Int, List, Num, Plain, Share, Text
from .common import BATCH, COUNT, ERR, LONG, ToolResult


@dataclass(frozen=True, kw_only=True)
class ExportCheck(Record):
    """The exported model run against PyTorch on the same batch (ok None: not run here, `reason` says why)."""

    ok: bool | None = need(Flag(null=True))
    reason: str = need(LONG)
    max_abs_err: float | None = may(ERR)
    max_rel_err: float | None = may(ERR)
    top1_agreement: float | None = may(Share(null=True))
    tolerance: float | None = may(Num(null=True))
    how: str | None = may(LONG)


@dataclass(frozen=True, kw_only=True)
class Tensor(Record):
    name: str | None = may(Text(max=200, null=True))
    shape: list[int] | None = may(List(Int(0, 2**31), max=16, null=True))
    dtype: str | None = may(Text(max=32, null=True))
    kind: str | None = may(Text(max=32, null=True))


@dataclass(frozen=True, kw_only=True)
class Output(Record):
    name: str | None = may(Text(max=200, null=True))
    shape: list[int] | None = may(List(Int(0, 2**31), max=16, null=True))


@dataclass(frozen=True, kw_only=True)
class Compression(Record):
    method: str = need(Text(max=64))
    bytes: int = need(COUNT)
    uncompressed_bytes: int = need(COUNT)


@dataclass(frozen=True, kw_only=True)
class ExportResult(ToolResult):
    """What an export wrote, where, how large, and whether it agrees with PyTorch."""

    sentence: str = need(LONG)
    format: str = need(Text(max=64))
    path: str = need(Text(max=4_096))
    bytes: int = need(COUNT)
    weights_note: str = need(LONG)
    classes: list[str] = need(List(Text(max=500), max=100_000))
    check: ExportCheck = need(ExportCheck.declared_shape(), ExportCheck)
    precision: str | None = may(Text(max=16))
    model: str | None = may(Text(max=4_096))
    dataset: str | None = may(Text(max=4_096))
    weights: str | None = may(Text(max=4_096, null=True))
    minimum_deployment_target: str | None = may(Text(max=200, null=True))
    input: Tensor | None = may(Tensor.declared_shape(null=True), record=Tensor)
    output: Output | None = may(Output.declared_shape(null=True), record=Output)
    batch_sizes: list[int] | None = may(List(BATCH, max=64, null=True))
    compression: Compression | None = may(Compression.declared_shape(null=True), record=Compression)
    normalization: Any = may(Plain())
    staged: str | None = may(Text(max=4_096))


EXPORT = ExportResult.declared_shape()
