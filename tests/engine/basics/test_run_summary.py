"""A run's summary is a typed record (basics/summary_fields.RunSummary): every figure the engine writes is one of
its declared fields, a figure of the wrong kind read back is refused naming it, what a file holds is kept key for
key, and no module reads a summary by key."""

from __future__ import annotations

import ast
import json
import re
from pathlib import Path

import pytest

from mpsstudio.engine.analysis import energy
from mpsstudio.engine.analysis.runcheck import run_from_dict
from mpsstudio.engine.basics.config import RunConfig
from mpsstudio.engine.basics.errors import UserError
from mpsstudio.engine.basics.results import RunResult
from mpsstudio.engine.basics.summary_fields import RunSummary

PACKAGE = Path(__file__).resolve().parents[3] / "mpsstudio"
DECLARED = {name for name in RunSummary.declared_shape().may}


def _keys_written(path: Path, function: str | None = None, dicts: bool = False) -> set[str]:
    """The summary keys a module (or one of its functions) writes: `.replaced(key=...)`, and with `function`, the
    keys of its `name["key"] = ...` assignments, and with `dicts`, of its dict literals."""
    tree = ast.parse(path.read_text())
    keys = {k.arg for node in ast.walk(tree) if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
            and node.func.attr == "replaced" for k in node.keywords if k.arg}
    if function is None:
        return keys
    bodies = [n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef) and n.name == function]
    for node in (node for body in bodies for node in ast.walk(body)):
        if dicts and isinstance(node, ast.Dict):
            keys |= {k.value for k in node.keys if isinstance(k, ast.Constant) and isinstance(k.value, str)}
        targets = node.targets if isinstance(node, ast.Assign) else []
        for target in targets:
            for t in (target.elts if isinstance(target, ast.Tuple) else [target]):
                if (isinstance(t, ast.Subscript) and isinstance(t.value, ast.Name)
                        and isinstance(t.slice, ast.Constant)):
                    keys.add(t.slice.value)
    return keys


def test_every_figure_the_engine_writes_is_a_declared_field():
    engine = PACKAGE / "engine"
    written = set(energy.SUMMARY_KEYS)
    for path in PACKAGE.rglob("*.py"):
        written |= _keys_written(path)
    for module, function, dicts in [("analysis/summary.py", "summarise", False),  # (its facts' names)
                                    ("analysis/memory.py", "summary_fields", True), ("run/epochs.py", "summary", True),
                                    ("run/ranks.py", "summary_of", True), ("run/trainer.py", "save_model", True),
                                    ("run/script/tracker.py", "finish", False)]:
        found = _keys_written(engine / module, function, dicts)
        assert found, f"{module}: {function} writes no summary key any more: this test reads the wrong place"
        written |= found
    assert written - DECLARED == set(), "written to a run's summary but not declared in RunSummary"
    assert {"samples_per_s", "stopped_early_reason", "ranks_world", "saved_model", "memory_flag", "batch_from",
            "tracked", "parity", "output_note"} <= written  # (each writer above was read)


def test_the_package_reads_no_summary_by_key():
    """Figures are read by attribute, so that a renamed one is found by mypy; only the two modules that build a
    summary from plain JSON handle it as a dict."""
    builders = {PACKAGE / "engine" / "analysis" / "summary.py", PACKAGE / "engine" / "analysis" / "runcheck.py"}
    by_key = re.compile(r"summary(\.get\(|\[)[\"']")
    found = [f"{p.relative_to(PACKAGE)}:{i}" for p in PACKAGE.rglob("*.py") if p not in builders
             for i, line in enumerate(p.read_text().splitlines(), 1) if by_key.search(line)]
    assert found == []


def test_a_summary_keeps_the_object_it_was_read_from_key_for_key():
    written = {"windows": 3, "from_a_later_version": {"x": [1, 2]}, "samples_per_s": 12.5, "values": "a key"}
    s = RunSummary.checked(written)
    assert s.as_dict() == written and list(s.as_dict()) == list(written)  # its order too
    assert s.samples_per_s == 12.5 and s.windows == 3 and s.values == written  # "values" in a file is a key
    more = s.replaced(samples_per_s=13.0, stability="stable")
    assert list(more.as_dict()) == [*written, "stability"] and more.samples_per_s == 13.0
    assert s.samples_per_s == 12.5  # the first is unchanged
    run = RunResult(config=RunConfig(), summary=written)
    assert json.loads(json.dumps(run.to_dict()))["summary"] == written


def _file(summary: dict) -> dict:
    run = RunResult(config=RunConfig(model="mlp", dataset="synthetic", device="cpu", steps=2, epochs=None),
                    status="failed", error="x")
    data = json.loads(json.dumps(run.to_dict()))
    data["summary"] = summary
    return data


@pytest.mark.parametrize("field, value, why", [
    ("samples_per_s", -3.0, "is -3.0, below 0"),
    ("peak_memory", 1e30, "above 1e+18"),
    ("windows", 2.5, "not a whole number"),
    ("val_accuracy", 1.5, "above 1"),
    ("final_loss", "low", "not a number"),
    ("dataset", 5, "not a text"),
    ("stability", "x" * 41, "more than 40"),
    ("epoch_s", [1.0, -1.0], "epoch_s[1]"),
    ("input_shapes", 0, "below 1"),
    ("utilization", 140.0, "above 100"),
    ("energy_parts", {"gpu": -1.0}, "energy_parts.gpu"),
    ("script_settings", {"lr": [0.1]}, "script_settings.lr"),
    ("script_settings_words", ["w"] * 41, "more than 40"),
    ("batch_sizes", [8, -1], "batch_sizes[1]"),
])
def test_a_figure_of_the_wrong_kind_is_refused_naming_it(field, value, why):
    with pytest.raises(UserError) as refused:
        run_from_dict(_file({field: value}), "run.json")
    said = str(refused.value)
    assert f"'summary.{field}" in said and why in said and "nothing was imported" in said


def test_what_a_script_set_may_be_a_text_a_number_true_or_false_or_null():
    settings = {"optimizer": "AdamW", "lr": 3e-4, "compiled": False, "weights": None}
    run = run_from_dict(_file({"script_settings": settings, "script_settings_words": ["lr 0.0003"]}), "run.json")
    assert run.summary.script_settings == settings and run.summary.script_settings_words == ["lr 0.0003"]


def test_a_note_keeps_what_was_written_and_a_verdict_is_re_derived():
    note = "line one\n\tline two"  # a script's output: tabs and line breaks as they were
    run = run_from_dict(_file({"output_note": note, "stability": "stable", "windows": 0}), "run.json")
    assert run.summary.output_note == note
    assert run.summary.stability is None  # no windows: a file cannot call a run stable
