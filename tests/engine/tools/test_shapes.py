"""Tool results as safe as runs (issue 35): every kind's declared shape (engine/tools/records/) against a hostile
corpus: each field of a real result (tests/data/tool_results, written by the tools on this machine) replaced by the
wrong type, null, NaN, infinity, a huge or negative number, a long text, deep nesting, or removed; each mutation
imported as a file, then, when it is kept, rendered by every view (the engine's tables and sentences, the CLI's, the
Tools tab's list, headline and detail, the verdicts' findings). Nothing may raise: a mutation is refused with one
sentence naming the field, or shown."""

from __future__ import annotations

import copy
import json
import math

import pytest

from mpsstudio.engine.basics.results import WindowRow
from mpsstudio.engine.basics.errors import UserError
from mpsstudio.engine.history.rows import ToolRecord
from mpsstudio.engine.history.runfiles import import_tool_json
from mpsstudio.engine.basics.shape import Either, List, Map, Obj, Plain
from mpsstudio.engine.tools import registry, toolview
from mpsstudio.engine.tools.diagnose import view as diagnose_view
from mpsstudio.engine.tools.records import SHAPES
from tests.support.paths import DATA as TESTS_DATA

DATA = TESTS_DATA / "tool_results"
CORPUS = {path.stem: (json.loads(path.read_text())["kind"], json.loads(path.read_text()))
          for path in sorted(DATA.glob("*.json"))}
DEEP = [[[[[[[[[[[[1]]]]]]]]]]]]
REPLACEMENTS = ("text", 7, -3, -3.5, 1e308, math.nan, math.inf, None, True, [], {}, "x" * 30_000, DEEP)


def _paths(value, path=()):
    """Every field's path, lists entered at their first item only (the rest are alike)."""
    yield path
    if isinstance(value, dict):
        for key, inner in value.items():
            if key != "env" or not path:  # a result's env is checked as a record of strings (and entered once)
                yield from _paths(inner, (*path, key))
    elif isinstance(value, list) and value:
        yield from _paths(value[0], (*path, 0))


def _mutations(result: dict):
    for path in _paths(result):
        if not path:
            continue
        for new in REPLACEMENTS:
            mutated = copy.deepcopy(result)
            holder = mutated
            for key in path[:-1]:
                holder = holder[key]
            holder[path[-1]] = new
            yield path, repr(new)[:20], mutated
        if isinstance(path[-1], str):
            mutated = copy.deepcopy(result)
            holder = mutated
            for key in path[:-1]:
                holder = holder[key]
            del holder[path[-1]]
            yield path, "removed", mutated


def render(kind: str, r: dict) -> list:
    """Every engine-side view of a kept result (what the CLI prints and the window shows)."""
    out = [toolview.title(kind, r), toolview.safe_title(kind, r), r["sentence"]]
    if kind == "sweep":
        out.append(toolview.sweep_table(r))
    elif kind == "max-batch":
        out.append(toolview.max_batch_table(r))
    elif kind == "inspect":
        from mpsstudio.engine.analysis.verdict import findings

        out += [toolview.parity_table(r, limit=50), toolview.fallback_table(r), toolview.inspect_sentence(r),
                findings(r)]
    elif kind == "export":
        out.append(toolview.export_table(r))
    elif kind == "generate":
        from mpsstudio.engine.tools.generate import words

        out += [words.table(r), words.legend(r), words.sentence(r), words.section(r)]
    elif kind == "deploy-bench":
        out.append(toolview.deploy_table(r))
    elif kind == "tune":
        from mpsstudio.engine.tools.tune import report

        out += [toolview.tune_table(r), toolview.tune_rows(r), report.recommend(r["candidates"])]
    elif kind == "diagnose":
        from mpsstudio.engine.tools.records.diagnose import Diagnosed

        diagnosis = diagnose_view.read(r)
        out += [diagnose_view.anatomy_table(diagnosis), diagnose_view.title(diagnosis), diagnose_view.rederived(r)]
        for d in diagnosis.devices:
            out.append(diagnose_view.device_sentence(d))
            if isinstance(d, Diagnosed):
                out.append(diagnose_view.memory_cells(d))
                for found in (d.layers, d.after_layers):
                    if found:
                        out.append(diagnose_view.layers_table(found))
    return out


@pytest.fixture(scope="module")
def panel():
    pytest.importorskip("pytestqt")
    from PySide6.QtWidgets import QApplication

    from mpsstudio.gui.tools.panel import ToolsPanel, _list_label

    app = QApplication.instance() or QApplication([])
    p = ToolsPanel(None)
    p.resize(1000, 600)

    def show(kind, result):
        record = ToolRecord(kind=kind, result=result)
        _list_label(record, "now")
        p._headline(record)
        widget = p._view(kind, result)
        widget.deleteLater()
    yield show
    p.deleteLater()
    app.processEvents()


def test_every_real_result_passes_its_shape_and_every_view_renders_it(panel):
    for name, (kind, result) in CORPUS.items():
        body = {k: v for k, v in result.items() if k not in ("kind", "id", "created_at")}
        kept = registry.checked(kind, body)
        render(kind, kept)
        panel(kind, kept)


def _declared(shape, path) -> bool:
    """Whether the field at `path` is one the shape declares (a view may read it), not kept as plain JSON."""
    if not path:
        return not isinstance(shape, Plain)
    key, rest = path[0], path[1:]
    if isinstance(shape, Obj):
        inner = shape.need.get(key) or shape.may.get(key)
        return inner is not None and _declared(inner, rest)
    if isinstance(shape, (List, Map)):
        return _declared(shape.item if isinstance(shape, List) else shape.value, rest)
    if isinstance(shape, Either):
        return _declared(shape.when_true, path) or _declared(shape.otherwise, path)
    return False


CLASSES = {"-3.5": "-3", "inf": "nan"}  # a negative number, a number that is not finite: one drawing each


def _kind_of(how: str) -> str:
    return "removed" if how == "removed" else how[:1] if how[:1] in "'[{" else CLASSES.get(how, how)


@pytest.mark.parametrize("name", sorted(CORPUS))
def test_no_mutation_of_a_real_result_breaks_a_view(name, panel):
    """Each mutation is read as an imported file is (registry.checked, what import_tool_json calls after
    json.loads: NaN and Infinity arrive as Python writes them); a kept one goes through every engine view and, for a
    declared field, once per kind of value, through the Tools tab's widgets."""
    kind, result = CORPUS[name]
    body = {k: v for k, v in result.items() if k not in ("kind", "id", "created_at")}
    refused = shown = 0
    drawn: set = set()
    for where, how, mutated in _mutations(body):
        try:
            kept = registry.checked(kind, mutated, where="The file")
        except UserError as exc:
            said = str(exc)
            assert "\n" not in said and "Traceback" not in said and said.startswith("The file holds a"), said
            refused += 1
            continue
        try:
            render(kind, kept)
            key = (where, _kind_of(how))
            if _declared(SHAPES[kind], where) and key not in drawn:
                drawn.add(key)
                panel(kind, kept)
        except Exception as exc:  # pragma: no cover - the failure is the report
            raise AssertionError(f"{name}: {'.'.join(map(str, where))} = {how} was kept and broke a view: "
                                 f"{type(exc).__name__}: {exc}") from None
        shown += 1
    assert refused and shown


def test_a_mutated_file_is_refused_as_a_file_with_its_name(tmp_path):
    kind, result = CORPUS["inspect"]
    path = tmp_path / "odd.json"
    path.write_text(json.dumps({**result, "parity": {**result["parity"], "tolerance": 2.0}}))
    with pytest.raises(UserError, match=r"^odd\.json holds an inspect result whose parity\.tolerance is 2\.0, above 1, "
                                        r"so it was not kept\. Choose a file a tool exported\.$"):
        import_tool_json(path)


@pytest.mark.parametrize("kind, change, field", [
    ("deploy-bench", lambda r: r["rows"][0].update(latency_ms=-3), "rows[0].latency_ms is -3, below 0"),
    ("inspect", lambda r: r["parity"].update(tolerance=-3), "parity.tolerance is -3, below 1e-30"),
    ("sweep", lambda r: r["points"][0].update(samples_per_s=1e300), "points[0].samples_per_s is 1e+300, above 1e+18"),
    ("export", lambda r: r["check"].update(top1_agreement=-3), "check.top1_agreement is -3, below 0"),
    ("deploy-bench", lambda r: r.update(models=[3]), "models[0] is 3, not a text"),
    ("export", lambda r: r.update(classes=[None]), "classes[0] is missing or null"),
    ("export", lambda r: r.update(input="x"), "input is 'x', not an object"),
    ("sweep", lambda r: r["points"][0].update(status=5), "points[0].status is 5, not a text"),
    ("sweep", lambda r: r.update(config="x"), "config is 'x', not an object"),
    ("sweep", lambda r: r.update(env={"machine_label": 5}), "env.machine_label is 5, not a text"),
    ("sweep", lambda r: r.update(points=[r["points"][0]] * 2_001), "points has 2,001 items, more than 2,000"),
])
def test_a_value_no_tool_can_produce_is_refused_naming_the_field(tmp_path, kind, change, field):
    result = copy.deepcopy(CORPUS[kind][1])
    change(result)
    path = tmp_path / f"{kind}.json"
    path.write_text(json.dumps(result))
    with pytest.raises(UserError) as err:
        import_tool_json(path)
    assert f"{kind}.json holds a{'n' if kind[0] in 'aeiou' else ''} {kind} result whose {field}" in str(err.value)


def test_an_inspection_whose_parity_was_not_finite_leaves_history_and_the_window_working(tmp_path, qtbot, capsys):
    """The case that needed no fuzzing: a server's runs and its own inspect --json, whose worst_rel_err is null (NaN
    parity), imported; `history`, `history --json` and the window then work, the verdict saying "not finite"."""
    from mpsstudio import cli
    from mpsstudio.engine.basics.config import RunConfig
    from mpsstudio.engine.basics.results import RunResult
    from mpsstudio.engine.history.runfiles import export_json

    env = {"machine_label": "H100 server", "hostname": "gpu-07"}
    runs = [RunResult(RunConfig(device=d, steps=10, epochs=None), env=env,
                      summary={"samples_per_s": s, "samples_per_s_iqr": 9.0, "final_loss": 0.5}, losses=[2.0, 1.0],
                      windows=[WindowRow(samples_per_s=s, seconds=0.1)] * 6, id=d[:2] * 16,
                      created_at="2026-01-01T00:00:00+00:00") for d, s in (("cpu", 100.0), ("cuda", 900.0))]
    export_json(runs, tmp_path / "server.json")
    inspect = copy.deepcopy(CORPUS["inspect"][1])
    inspect.update(device="cuda", env=env, config={**inspect["config"], **RunConfig(device="cuda").to_dict()})
    inspect["parity"].update(ok=False, worst_rel_err=None, loss_ok=False, loss_rel_err=None)
    (tmp_path / "inspect.json").write_text(json.dumps(inspect))
    for name in ("server.json", "inspect.json"):
        assert cli.main(["history", "--import", str(tmp_path / name)]) == cli.EXIT_OK
    capsys.readouterr()
    assert cli.main(["history"]) == cli.EXIT_OK
    out = capsys.readouterr().out
    assert "relative error not finite" in out and "Traceback" not in out
    assert cli.main(["history", "--json", str(tmp_path / "all.json")]) == cli.EXIT_OK
    from mpsstudio.gui.window import MainWindow

    w = MainWindow()
    qtbot.addWidget(w)
    assert len(w.results.results()) == 2 and w.tools.records[0].kind == "inspect"
    w.close()


def test_history_delete_takes_tool_result_ids(tmp_path, capsys):
    from mpsstudio import cli
    from mpsstudio.engine.history.store import RunStore

    path = tmp_path / "sweep.json"
    path.write_text(json.dumps({**CORPUS["sweep"][1], "id": "sweep-1"}))
    assert cli.main(["history", "--import", str(path)]) == cli.EXIT_OK
    assert cli.main(["history", "--import", str(path)]) == cli.EXIT_OK  # the same file again: kept once
    assert "already in the history" in capsys.readouterr().err
    assert [t.id for t in RunStore().tools()] == ["sweep-1"]
    assert cli.main(["history", "--delete", "sweep-1", "nope"]) == cli.EXIT_OK
    assert "deleted 1 tool result (1 not found)" in capsys.readouterr().err
    assert RunStore().tools() == []
