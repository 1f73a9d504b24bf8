"""Typed records of stored results: a frozen dataclass whose fields declare their shapes (basics/shape.py), so one
declaration gives both the check and the attributes the views read. No torch.

    @dataclass(frozen=True, kw_only=True)
    class Point(Record):
        device: str = need(Text(max=64))
        samples_per_s: float | None = may(Num(null=True))

`Point.declared_shape()` is the `Obj` the import check, the readers of pending files and the history go by (`need`
fields must be there, `may` fields may be missing, other fields are kept as plain JSON and read by no view);
`Point.read(value)` checks a plain JSON value against it and builds the record, nested records included
(`need(Sub.declared_shape(), Sub)`; a List or a Map of them alike). A view then reads `point.samples_per_s`, and a
renamed field is found by the type checker (`mypy`, run by `make test`), not by a user. The stored value stays the
plain JSON it was.
"""

from __future__ import annotations

from dataclasses import MISSING, field, fields
from typing import Any, ClassVar, TypeVar

from .shape import List, Map, Obj, Shape

R = TypeVar("R", bound="Record")


def need(shape: Shape, record: type[Record] | None = None) -> Any:
    """A field that must be there, of `shape`; `record`: what the value is read as (each item of a List shape, each
    value of a Map shape, else the value itself)."""
    return field(metadata={"shape": shape, "need": True, "record": record})


def may(shape: Shape, default: Any = None, record: type[Record] | None = None) -> Any:
    """A field that may be missing, then `default` (`list` or `dict`: a new empty one), of `shape`."""
    meta = {"shape": shape, "need": False, "record": record}
    if default is list or default is dict:
        return field(default_factory=default, metadata=meta)
    return field(default=default, metadata=meta)


class Record:
    """The base of the typed records (each a `@dataclass(frozen=True, kw_only=True)` subclass)."""

    _shapes: ClassVar[dict[type, Obj]] = {}

    @classmethod
    def declared_shape(cls, null: bool = False) -> Obj:
        """The declared shape of this record's JSON object (`null`: where the object itself may be null)."""
        base = Record._shapes.get(cls)
        if base is None:
            taken = {f.name for f in fields(cls)} & set(vars(Record))  # type: ignore[arg-type]  # a dataclass
            if taken:  # a field named like a method would hide it
                raise TypeError(f"{cls.__name__} has fields named like Record's methods: {', '.join(sorted(taken))}")
            need_: dict[str, Shape] = {}
            may_: dict[str, Shape] = {}
            for f in fields(cls):  # type: ignore[arg-type]  # every subclass is a dataclass
                (need_ if f.metadata["need"] else may_)[f.name] = f.metadata["shape"]
            base = Record._shapes[cls] = Obj(need=need_, may=may_)
        return Obj(need=base.need, may=base.may, null=True) if null else base

    @classmethod
    def read(cls: type[R], value: Any, path: str = "") -> R:
        """`value` checked against the declared shape (ShapeError names the field) and built into the record."""
        return cls.built(cls.declared_shape().check(value, path))

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
            value, record, shape = checked[f.name], f.metadata["record"], f.metadata["shape"]
            if record is not None and value is not None:
                if isinstance(shape, List):
                    value = [record.built(v) for v in value]
                elif isinstance(shape, Map):
                    value = {k: record.built(v) for k, v in value.items()}
                else:
                    value = record.built(value)
            values[f.name] = value
        return cls(**values)
