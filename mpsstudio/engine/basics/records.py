"""Typed records of stored results: a frozen dataclass whose fields declare their shapes (basics/shape.py), so one
declaration gives both the check and the attributes the views read. No torch.

    @dataclass(frozen=True, kw_only=True)
    class Point(Record):
        device: str = need(Text(max=64))
        samples_per_s: float | None = may(Num(null=True))

`Point.shape()` is the `Obj` the import check, the readers of pending files and the history go by (`need` fields must
be there, `may` fields may be missing, other fields are kept as plain JSON and read by no view); `Point.read(value)`
checks a plain JSON value against it and builds the record, nested records (`need(Sub.shape(), Sub)`, a list of them:
`need(List(Sub.shape()), Sub)`) included. A view then reads `point.samples_per_s`, and a renamed field is found by the
type checker (`mypy`, run by `make test`), not by a user. The stored value stays the plain JSON it was.
"""

from __future__ import annotations

from dataclasses import MISSING, field, fields
from typing import Any, ClassVar, TypeVar

from .shape import Obj, Shape

R = TypeVar("R", bound="Record")


def need(shape: Shape, record: type[Record] | None = None) -> Any:
    """A field that must be there, of `shape`; `record`: the record each value (or each item of a list) is read as."""
    return field(metadata={"shape": shape, "need": True, "record": record})


def may(shape: Shape, default: Any = None, record: type[Record] | None = None, *, many: bool = False) -> Any:
    """A field that may be missing (then `default`; an empty list where `many`), of `shape`."""
    if many:
        return field(default_factory=list, metadata={"shape": shape, "need": False, "record": record})
    return field(default=default, metadata={"shape": shape, "need": False, "record": record})


class Record:
    """The base of the typed records (each a `@dataclass(frozen=True, kw_only=True)` subclass)."""

    _shapes: ClassVar[dict[type, Obj]] = {}

    @classmethod
    def shape(cls, null: bool = False) -> Obj:
        """The declared shape of this record's JSON object (`null`: where the object itself may be null)."""
        base = Record._shapes.get(cls)
        if base is None:
            need_: dict[str, Shape] = {}
            may_: dict[str, Shape] = {}
            for f in fields(cls):  # type: ignore[arg-type]  # every subclass is a dataclass
                (need_ if f.metadata["need"] else may_)[f.name] = f.metadata["shape"]
            base = Record._shapes[cls] = Obj(need=need_, may=may_)
        return Obj(need=base.need, may=base.may, null=True) if null else base

    @classmethod
    def read(cls: type[R], value: Any, path: str = "") -> R:
        """`value` checked against the declared shape (ShapeError names the field) and built into the record."""
        return cls.built(cls.shape().check(value, path))

    @classmethod
    def of(cls: type[R], value: Any) -> R:
        """`value` itself where it is already this record, else read (a view takes either)."""
        return value if isinstance(value, cls) else cls.read(value)

    @classmethod
    def built(cls: type[R], checked: dict) -> R:
        """The record of a value its shape has already checked."""
        values = {}
        for f in fields(cls):  # type: ignore[arg-type]
            if f.name not in checked:
                if f.default is MISSING and f.default_factory is MISSING:  # pragma: no cover - the shape refused it
                    raise ValueError(f"{f.name} is missing")
                continue
            value, record = checked[f.name], f.metadata["record"]
            if record is not None and isinstance(value, list):
                value = [record.built(v) for v in value]
            elif record is not None and isinstance(value, dict):
                value = record.built(value)
            values[f.name] = value
        return cls(**values)
