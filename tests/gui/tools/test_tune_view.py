"""Best Settings in the window (offscreen): its sheet gives the CLI's options, a tune started from the Tools menu
lands in the Tools tab as its chart and table, and Apply puts the chosen candidate into the setup."""

from __future__ import annotations

import html

import pytest

pytest.importorskip("PySide6")

from mpsstudio.engine.basics.config import RunConfig
from mpsstudio.engine.history.store import RunStore, ToolRecord
from mpsstudio.engine.tools import tune
from mpsstudio.gui.tools.panel import ToolsPanel
from tests.support.tune import BASE, fake_runs, grid_of, no_check

pytestmark = pytest.mark.usefixtures("no_leftovers")


def tune_result():
    speeds = {("fp32", False, 64): 100.0, ("fp32", True, 64): 101.0, ("bf16", False, 64): 150.0,
              ("bf16", True, 64): 180.0}
    run_point, _ = fake_runs(speeds, losses={("bf16", False, 64): 9.0})
    return tune.tune(BASE, grid_of(), run_point=run_point, run_check=no_check, budget_s=600.0)


def test_the_sheet_gives_the_clis_options(qtbot):
    from mpsstudio.gui.tools.sheet import ToolSheet

    sheet = ToolSheet("tune", RunConfig(model="mnist_cnn", dataset="synthetic", batch_size=64), ["cpu", "mps"], [],
                      1024)
    qtbot.addWidget(sheet)
    payload = sheet.chosen()["payload"]
    assert payload["batch_sizes"] == [32, 64, 128] and payload["precisions"] == ["fp32", "bf16", "fp16"]
    assert (payload["channels_last"], payload["compile"]) == ("both", "off")
    assert payload["budget_s"] == tune.DEFAULT_BUDGET_MIN * 60 and payload["steps"] == tune.DEFAULT_STEPS
    assert sheet.plan.text().startswith("Up to 18 candidates on each of cpu, mps")
    for box in sheet.fields["precisions"].values():
        box.setChecked(False)
    assert not sheet.start_button.isEnabled() and "at least one precision" in sheet.problem.text()


def test_a_stored_tune_draws_its_candidates_and_apply_puts_the_choice_into_the_setup(qtbot, tmp_path):
    store = RunStore(tmp_path / "h.sqlite3")
    try:
        result = tune_result()
        store.save_tool(ToolRecord(kind="tune", result=result))
        panel = ToolsPanel(store)
        qtbot.addWidget(panel)
        view = panel.detail.currentWidget()
        assert view.__class__.__name__ == "TuneView" and html.escape(result["sentence"]) in panel.headline.text()
        measured = [r for r in result["candidates"] if r["status"] in ("measured", "dropped", "unusable")]
        assert set(view.plot.points) == {r["key"] for r in measured}  # one point per measured candidate
        chosen = result["recommendation"]["cpu"]
        assert view.selected_row().key == chosen and view.apply_button.isEnabled()
        applied = []
        panel.apply_requested.connect(lambda res, row: applied.append(row.key))
        view.apply_button.click()
        assert applied == [chosen]
        unusable = next(r for r in result["candidates"] if r["status"] == "unusable")
        view.select_key(unusable["key"])
        assert not view.apply_button.isEnabled() and "diverged" in view.apply_button.toolTip()
        view.table.sortItems(2)  # by samples/s: numbers sort as numbers, a missing one last
        texts = [view.table.item(i, 2).text() for i in range(view.table.rowCount())]
        numbers = [float(t.replace(",", "")) for t in texts if t != "—"]
        assert numbers == sorted(numbers) and texts[:len(numbers)] == [t for t in texts if t != "—"]
    finally:
        store.close()


def test_best_settings_from_the_menu_runs_the_tune_and_apply_changes_the_setup(qtbot, monkeypatch):
    from tests.support.gui import open_window

    w = open_window(qtbot)
    try:
        w.setup.apply_config(RunConfig(model="mlp", dataset="synthetic", batch_size=16), ["cpu"])
        monkeypatch.setattr(w, "ask_tool_settings", lambda kind, config, devices, train, trained=None: {
            "config": config, "batch_sizes": None, "payload": {
                "batch_sizes": [8, 16], "precisions": ["fp32"], "channels_last": "off", "compile": "off",
                "budget_s": 60.0, "steps": 8, "warmup": 1, "max_rounds": 2}})
        [action] = [a for a in w.menus.tool_actions if a.text().startswith("Best Settings")]
        action.trigger()
        qtbot.waitUntil(lambda: w.state.tool_job is None, timeout=120_000)
        record = w.tools.current()
        assert record is not None and record.kind == "tune"
        rows = {r["batch_size"]: r for r in record.result["candidates"]}
        assert set(rows) == {8, 16} and rows[16]["baseline"]
        w.apply_tuned_settings(record.result, rows[8])
        assert w.setup.configs()[0].batch_size == 8 and "Applied fp32, batch 8" in w.statusBar().currentMessage()
    finally:
        w.close()
