"""Declared shapes of stored results: one declaration per kind that the import check, the readers of pending files
and journals, and the views all go by (engine/tools/records/ declares the tools' results, as typed records where
their views read them). No torch.

A shape checks a plain JSON value (what json.loads gives) and returns it, or raises ShapeError naming the field
("rows[2].latency_ms: -3 is below 0"). Numbers are finite unless a shape says otherwise (JSON has no infinity: a
tool writes null where a value was not finite, and the shape says where null may stand); counts are whole and
not negative; lists and texts have the lengths a tool can produce. Fields a shape does not declare are kept, as plain
JSON within the limits, and read by no view.

Typed records: a frozen dataclass whose fields declare their shapes, so one declaration gives both the check and
the attributes the views read.

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

import math
from collections.abc import Callable
from dataclasses import MISSING, dataclass, field, fields
from typing import Any, ClassVar, TypeVar

from .formatting import one_line, printable

# The limits of plain JSON read from disk or from a child, the same for runs and tool results (plain() checks them).
MAX_TEXT = 20_000  # characters of one text
MAX_DEPTH = 8  # nesting
MAX_ITEMS = 100_000  # items of a list, keys of an object
MAX_KEY = 1_000  # characters of an object's key
MAX_WHOLE = 2**63  # a whole number's magnitude
ANY_FINITE = 1.7976931348623157e308  # the largest finite float: NaN and the infinities lie outside


class ShapeError(ValueError):
    """A value that is not of its declared shape: `path` names the field, `why` what is wrong with it."""

    def __init__(self, path: str, why: str):
        super().__init__(f"{path or 'the result'} {why}")
        self.path, self.why = path, why


def _at(path: str, key) -> str:
    return f"{path}[{key}]" if isinstance(key, int) else (f"{path}.{key}" if path else str(key))


def _shown(value) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


class Shape:
    null: bool = False

    def check(self, value, path: str = ""):
        if value is None:
            if self.null:
                return None
            raise ShapeError(path, "is missing or null")
        return self._check(value, path)

    def _check(self, value, path: str):  # pragma: no cover - every shape has its own
        raise NotImplementedError


@dataclass(frozen=True)
class Num(Shape):
    """A number (int or float, never a bool), finite, within [lo, hi]."""

    lo: float | None = 0.0
    hi: float | None = None
    null: bool = False
    whole: bool = False
    nonfinite_is_null: bool = False  # a value that may not be finite (a parity error), kept as JSON keeps it: null

    def _check(self, value, path):
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise ShapeError(path, f"is {_shown(value)}, not a number")
        if self.whole and not isinstance(value, int):
            raise ShapeError(path, f"is {_shown(value)}, not a whole number")
        if isinstance(value, float) and not math.isfinite(value):
            if self.nonfinite_is_null:
                return None
            raise ShapeError(path, f"is {value}, not a finite number")
        if self.lo is not None and value < self.lo:
            raise ShapeError(path, f"is {_shown(value)}, below {self.lo:g}")
        if self.hi is not None and value > self.hi:
            raise ShapeError(path, f"is {_shown(value)}, above {self.hi:g}")
        return value


def Int(lo: int | None = 0, hi: int | None = 2**62, null: bool = False) -> Num:  # a shape's name
    """A whole number within [lo, hi]."""
    return Num(lo=lo, hi=hi, null=null, whole=True)


def Share(null: bool = False) -> Num:
    """A share from 0 to 1."""
    return Num(lo=0.0, hi=1.0, null=null)


@dataclass(frozen=True)
class Text(Shape):
    """A string of at most `max` characters (one of `choices` when given), read back with its control and format
    characters (a terminal's escapes, a right-to-left override, a zero-width joiner) shown as "?": every front end
    then shows what was written, in the order it was written (a line break is kept)."""

    max: int = 2_000
    null: bool = False
    choices: tuple = ()
    as_written: bool = False  # kept with its control characters (a run's notes: every view shows them printable)

    def _check(self, value, path):
        if not isinstance(value, str):
            raise ShapeError(path, f"is {_shown(value)}, not a text")
        if len(value) > self.max:
            raise ShapeError(path, f"is a text of {len(value):,} characters, more than {self.max:,}")
        if self.choices and value not in self.choices:
            raise ShapeError(path, f"is {_shown(value)}, not one of {', '.join(map(repr, self.choices))}")
        if self.as_written or value.isprintable():
            return value
        return "".join(c if c.isprintable() or c == "\n" else "?" for c in value)


@dataclass(frozen=True)
class Flag(Shape):
    null: bool = False

    def _check(self, value, path):
        if not isinstance(value, bool):
            raise ShapeError(path, f"is {_shown(value)}, not true or false")
        return value


@dataclass(frozen=True)
class List(Shape):
    """A list of at most `max` items, each of shape `item`."""

    item: Shape
    max: int = 1_000
    null: bool = False

    def _check(self, value, path):
        if not isinstance(value, list):
            raise ShapeError(path, f"is {_shown(value)}, not a list")
        if len(value) > self.max:
            raise ShapeError(path, f"has {len(value):,} items, more than {self.max:,}")
        return [self.item.check(v, _at(path, i)) for i, v in enumerate(value)]


@dataclass(frozen=True)
class Map(Shape):
    """An object of at most `max` text keys, each value of shape `value`."""

    value: Shape
    max: int = 1_000
    null: bool = False

    def _check(self, value, path):
        if not isinstance(value, dict):
            raise ShapeError(path, f"is {_shown(value)}, not an object")
        if len(value) > self.max:
            raise ShapeError(path, f"has {len(value):,} keys, more than {self.max:,}")
        out = {}
        for k, v in value.items():
            if not isinstance(k, str) or len(k) > 200:
                raise ShapeError(path, f"has a key {_shown(k)} that is not a short text")
            out[k] = self.value.check(v, _at(path, k))
        return out


@dataclass(frozen=True)
class Obj(Shape):
    """An object: `need` fields must be there, `may` fields may be missing; each of its declared shape. Other fields
    are kept as plain JSON (no view reads them)."""

    need: dict = field(default_factory=dict)
    may: dict = field(default_factory=dict)
    null: bool = False

    def _check(self, value, path):
        if not isinstance(value, dict):
            raise ShapeError(path, f"is {_shown(value)}, not an object")
        if len(value) > MAX_ITEMS or not all(isinstance(k, str) for k in value):
            raise ShapeError(path, "is an object with keys that are not texts, or too many of them")
        out = dict(value)
        for key, shape in self.need.items():
            if key not in value:
                raise ShapeError(_at(path, key), "is missing")
            out[key] = shape.check(value[key], _at(path, key))
        for key, shape in self.may.items():
            if key in value:
                out[key] = shape.check(value[key], _at(path, key))
        for key in value.keys() - self.need.keys() - self.may.keys():
            out[key] = plain(value[key], _at(path, key))
        return out


@dataclass(frozen=True)
class Either(Shape):
    """`when_true` where `test(value)` holds (an object with an "error" field, say), else `otherwise`."""

    test: object
    when_true: Shape
    otherwise: Shape
    null: bool = False

    def _check(self, value, path):
        return (self.when_true if self.test(value) else self.otherwise).check(value, path)


@dataclass(frozen=True)
class Plain(Shape):
    """Any plain JSON within the limits (an environment record's extra fields, a note's details)."""

    null: bool = True

    def _check(self, value, path):
        return plain(value, path)


def plain(value, path: str | tuple = "", depth: int = 0, *, finite: bool = False):
    """`value` when it holds only JSON values within the limits (texts, keys, items, nesting, whole numbers), and with
    `finite`, no NaN or infinity; ShapeError naming the field otherwise. The one check of plain JSON read from disk or
    from a child (a run's env, summary, options and rows: analysis/runcheck; a tool result's extra fields)."""
    _plain(value, path, depth, finite)
    return value


def _plain(value, where, depth: int, finite: bool) -> None:
    """`where` is the field's path: text, or (parent path, key or index), spelled out only for an error (a history of
    10,000 runs has millions of values, and almost never a bad one)."""
    if depth > MAX_DEPTH:
        raise ShapeError(_spelled(where), f"is nested more than {MAX_DEPTH} levels deep")
    if isinstance(value, list):
        if len(value) > MAX_ITEMS:
            raise ShapeError(_spelled(where), f"has {len(value):,} items, more than {MAX_ITEMS:,}")
        for i, item in enumerate(value):
            if not _flat(item, finite):
                _plain(item, (where, i), depth + 1, finite)
        return
    if isinstance(value, dict):
        if len(value) > MAX_ITEMS:
            raise ShapeError(_spelled(where), f"has {len(value):,} keys, more than {MAX_ITEMS:,}")
        for key, item in value.items():
            if type(key) is not str or len(key) > MAX_KEY:
                raise ShapeError(_spelled(where), f"has a key that is not a text of at most {MAX_KEY:,} characters")
            if not _flat(item, finite):
                _plain(item, (where, key), depth + 1, finite)
        return
    if _flat(value, finite):
        return
    if isinstance(value, str):
        raise ShapeError(_spelled(where), f"is a text of {len(value):,} characters, more than {MAX_TEXT:,}")
    if isinstance(value, int):
        raise ShapeError(_spelled(where), "is a whole number out of range")
    if isinstance(value, float):
        raise ShapeError(_spelled(where), "is not a finite number")
    raise ShapeError(_spelled(where), f"is a value of type {type(value).__name__}, not JSON")


def _flat(item, finite: bool) -> bool:
    """A valid text, number, boolean or null: the common case, checked without a call per value; anything else
    goes through _plain, which says what is wrong."""
    kind = type(item)
    return (item is None or kind is bool or (kind is str and len(item) <= MAX_TEXT)
            or (kind is int and -MAX_WHOLE <= item <= MAX_WHOLE)
            or (kind is float and (not finite or -ANY_FINITE <= item <= ANY_FINITE)))  # NaN fails the comparison


def _spelled(where) -> str:
    """env.gpu.name or windows[3] from the (parent, key) pairs _plain builds."""
    if isinstance(where, str):
        return where
    parent, key = where
    return _at(_spelled(parent), key if isinstance(key, int) else one_line(printable(key), 40))


# ---------------------------------------------------------------- typed records

R = TypeVar("R", bound="Record")


Chooser = Callable[[Any], "type[Record]"]  # the record a checked value is read as, where an Either allows several


def need(shape: Shape, record: type[Record] | Chooser | None = None) -> Any:
    """A field that must be there, of `shape`; `record`: what the value is read as (each item of a List shape, each
    value of a Map shape, else the value itself), or a function of the value that says which record (an Either)."""
    return field(metadata={"shape": shape, "need": True, "record": record})


def derived(default: Any = None) -> Any:
    """A field no file holds: worked out from the others each time a result is read (a diagnosis's bound and its
    sentence), taken where the dict being built has it. Not part of the declared shape."""
    if default is list or default is dict:
        return field(default_factory=default, metadata={"derived": True})
    return field(default=default, metadata={"derived": True})


def _made(record: Any, value: Any) -> Any:
    """`value` built as `record` (a Record class, or a chooser of one)."""
    chosen = record if isinstance(record, type) and issubclass(record, Record) else record(value)
    return chosen.built(value)


def may(shape: Shape, default: Any = None, record: type[Record] | Chooser | None = None) -> Any:
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
                if f.metadata.get("derived"):
                    continue
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
            if f.metadata.get("derived"):
                values[f.name] = checked[f.name]
                continue
            value, record, shape = checked[f.name], f.metadata["record"], f.metadata["shape"]
            if record is not None and value is not None:
                if isinstance(shape, List):
                    value = [_made(record, v) for v in value]
                elif isinstance(shape, Map):
                    value = {k: _made(record, v) for k, v in value.items()}
                else:
                    value = _made(record, value)
            values[f.name] = value
        return cls(**values)
