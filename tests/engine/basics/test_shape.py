"""Typed records (basics/shape.py): one declaration gives the shape a stored result is checked by and the
attributes its views read."""

from __future__ import annotations

import subprocess
import sys
from dataclasses import FrozenInstanceError, dataclass

import pytest

from mpsstudio.engine.basics.shape import Record, may, need
from mpsstudio.engine.basics.shape import Flag, Int, List, Map, Num, ShapeError, Text
from mpsstudio.engine.tools import records as shapes
from mpsstudio.engine.tools.records import MaxBatchResult, SweepResult
from tests.support.paths import ROOT


@dataclass(frozen=True, kw_only=True)
class Leaf(Record):
    name: str = need(Text(max=10))
    size: float | None = may(Num(null=True))


@dataclass(frozen=True, kw_only=True)
class Tree(Record):
    leaves: list[Leaf] = need(List(Leaf.declared_shape(), max=3), Leaf)
    top: Leaf | None = may(Leaf.declared_shape(null=True), record=Leaf)
    count: int = may(Int(), 0)
    tags: list[str] = may(List(Text()), list)
    ok: bool | None = may(Flag())
    named: dict[str, Leaf] = may(Map(Leaf.declared_shape()), dict, Leaf)


def test_a_record_is_read_with_its_nested_records_and_its_defaults():
    tree = Tree.read({"leaves": [{"name": "a", "size": 1.5}, {"name": "b"}], "top": {"name": "c"}, "extra": [1]})
    assert tree.leaves == [Leaf(name="a", size=1.5), Leaf(name="b")] and tree.top == Leaf(name="c")
    assert tree.count == 0 and tree.tags == [] and tree.ok is None and tree.named == {}  # the declared defaults
    assert Tree.read({"leaves": [], "named": {"x": {"name": "x", "size": 2}}}).named == {"x": Leaf(name="x", size=2)}
    assert Tree.read({"leaves": [], "top": None}).top is None
    with pytest.raises(FrozenInstanceError):
        tree.count = 3  # type: ignore[misc]


@pytest.mark.parametrize("value, said", [
    ({}, "leaves is missing"),
    ({"leaves": [{"name": 3}]}, "leaves[0].name is 3, not a text"),
    ({"leaves": [{"name": "a"}] * 4}, "leaves has 4 items, more than 3"),
    ({"leaves": [], "count": -1}, "count is -1, below 0"),
    ({"leaves": [], "top": {"size": 1}}, "top.name is missing"),
    ("leaves", "the result is 'leaves', not an object"),
])
def test_a_value_not_of_the_declared_shape_is_refused_naming_the_field(value, said):
    with pytest.raises(ShapeError) as caught:
        Tree.read(value)
    assert str(caught.value) == said


def test_a_field_named_like_a_records_method_is_refused_where_it_is_declared():
    @dataclass(frozen=True, kw_only=True)
    class Tensor(Record):
        read: str | None = may(Text())

    with pytest.raises(TypeError, match="fields named like Record's methods: read"):
        Tensor.declared_shape()


def test_the_tools_records_are_the_shapes_the_history_and_the_import_check_go_by():
    assert shapes.SHAPES["sweep"] is SweepResult.declared_shape() and shapes.SHAPES["max-batch"] is MaxBatchResult.declared_shape()
    sweep = SweepResult.read({"sentence": "s", "best": {"cpu": 8}, "points": [{"device": "cpu", "batch_size": 8}],
                              "crossover": None, "notes": ["n"]})
    assert sweep.points[0].batch_size == 8 and sweep.points[0].samples_per_s is None and sweep.crossover is None
    assert SweepResult.of(sweep) is sweep and sweep.notes == ["n"]


def test_a_view_that_reads_a_renamed_field_is_found_by_the_type_checker(tmp_path):
    view = tmp_path / "view.py"
    view.write_text("from mpsstudio.engine.tools.records import SweepResult\n\n\n"
                    "def cell(r: SweepResult) -> str:\n    return str(r.points[0].samples_per_sec)\n")
    done = subprocess.run([sys.executable, "-m", "mypy", "--config-file", str(ROOT / "pyproject.toml"),
                           "--cache-dir", str(tmp_path / "cache"), str(view)], capture_output=True, text=True,
                          cwd=ROOT)
    assert done.returncode == 1 and '"SweepPoint" has no attribute "samples_per_sec"' in done.stdout, done.stdout
