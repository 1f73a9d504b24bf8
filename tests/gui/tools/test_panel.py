"""The Tools tab and menu (offscreen): stored sweeps, max-batch searches and inspections drawn from what the engine
computed; a tool started from the window lands in the tab and the history; a device that is available but not
working is said where the user looks."""

from __future__ import annotations

import json
import math

import pytest

pytest.importorskip("PySide6")

from mpsstudio.engine.machine import probe
from mpsstudio.engine.tools import sweep
from mpsstudio.engine.basics.config import RunConfig
from mpsstudio.engine.machine.devices import Device
from mpsstudio.engine.history.store import RunStore, ToolRecord
from mpsstudio.gui.tools.panel import EMPTY_HINT, ToolsPanel
from tests.support.gui import open_window
from tests.support.runs import point
from tests.support.results import inspect_result

pytestmark = pytest.mark.usefixtures("no_leftovers")


def sweep_result():
    res = [point("cpu", b, 400.0 * b ** 0.45) for b in (1, 2, 4, 8, 16, 32, 64)]
    res += [point("mps", b, 60.0 * b) for b in (1, 2, 4, 8, 16, 32, 64)]
    return sweep.analyse(res, RunConfig(model="resnet18", dataset="cifar10"))


@pytest.fixture
def store(tmp_path):
    s = RunStore(tmp_path / "h.sqlite3")
    yield s
    s.close()


def test_empty_tools_tab_says_how_to_fill_it(qtbot, store):
    panel = ToolsPanel(store)
    qtbot.addWidget(panel)
    assert panel.detail.currentWidget() is panel.empty and panel.empty.text() == EMPTY_HINT
    assert not panel.export_button.isEnabled()


def test_a_stored_sweep_is_drawn_with_its_crossover(qtbot, store):
    result = sweep_result()
    store.save_tool(ToolRecord(kind="sweep", result=result))
    panel = ToolsPanel(store)
    qtbot.addWidget(panel)
    plot = panel.detail.currentWidget().widget(0)
    assert set(plot.lines) == {"cpu", "mps"}
    xs, ys = plot.lines["mps"].getOriginalDataset()
    assert list(xs) == [math.log2(b) for b in (1, 2, 4, 8, 16, 32, 64)]
    assert list(ys) == pytest.approx([60.0 * b for b in (1, 2, 4, 8, 16, 32, 64)])
    assert plot.marker is not None and plot.marker.value() == math.log2(result["crossover"]["batch_size"])
    assert result["sentence"] in panel.headline.text()


def test_newest_tool_result_first_and_selectable(qtbot, store):
    store.save_tool(ToolRecord(kind="sweep", result=sweep_result(), created_at="2026-01-01T00:00:00+00:00"))
    store.save_tool(ToolRecord(kind="inspect", result=inspect_result(), created_at="2026-01-02T00:00:00+00:00"))
    panel = ToolsPanel(store)
    qtbot.addWidget(panel)
    assert [r.kind for r in panel.records] == ["inspect", "sweep"]
    assert panel.current().kind == "inspect"
    panel.list.setCurrentRow(1)
    assert panel.current().kind == "sweep"


def test_an_inspection_shows_parity_fallbacks_and_flags_a_failure(qtbot, store):
    store.save_tool(ToolRecord(kind="inspect", result=inspect_result(ok=False)))
    panel = ToolsPanel(store)
    qtbot.addWidget(panel)
    from PySide6.QtWidgets import QTableWidget

    tables = panel.detail.currentWidget().findChildren(QTableWidget)
    parity, fallback = tables
    assert parity.item(0, 0).text() == "loss" and parity.item(0, 1).text() == "2.0e-01"
    assert parity.item(0, 2).text() == "1.0e-07" and parity.item(0, 3).text() == "NO"
    assert parity.item(2, 0).text() == "grad 0.weight" and parity.item(2, 3).text() == "NO"
    assert fallback.item(0, 0).text() == "aten::nonzero" and fallback.item(0, 2).text() == "25%"
    assert "⚠︎" in panel.headline.text()


def test_export_and_delete(qtbot, store, tmp_path):
    store.save_tool(ToolRecord(kind="sweep", result=sweep_result()))
    panel = ToolsPanel(store)
    qtbot.addWidget(panel)
    out = tmp_path / "s.json"
    panel.export_json(str(out))
    doc = json.loads(out.read_text())
    assert doc["kind"] == "sweep" and doc["crossover"]["batch_size"] == 32 or doc["crossover"]["batch_size"] == 64
    panel.delete_current()
    assert store.tools() == [] and panel.current() is None


def test_inspect_from_the_window_lands_in_the_tools_tab(qtbot):
    w = open_window(qtbot)
    try:
        assert all(a.isEnabled() for a in w.menus.tool_actions)
        w.setup.apply_config(RunConfig(model="mlp", dataset="synthetic"), ["cpu"])
        w.start_tool("inspect")
        assert not w.menus.run_action.isEnabled() and w.menus.stop_action.isEnabled() and w.setup.footer.run_button.text() == "Stop"
        qtbot.waitUntil(lambda: w.state.tool_job is None, timeout=120_000)
        assert w.tabs.currentWidget() is w.tools
        record = w.tools.current()
        assert record.kind == "inspect" and record.result["parity"]["ok"]
        assert [t.id for t in w.store.tools()] == [record.id]
        assert w.menus.run_action.isEnabled()
    finally:
        w.close()


def fake_run_point(monkeypatch) -> list[tuple[str, int]]:
    """Sweep points answered at once (100 samples/s per sample of batch); the (device, batch) asked, in order."""
    from mpsstudio.engine import process

    seen = []

    def fake_point(cfg, **kwargs):
        seen.append((cfg.device, cfg.batch_size))
        r = point(cfg.device, cfg.batch_size, 100.0 * cfg.batch_size)
        r.config = cfg
        return r
    monkeypatch.setattr(process, "run_point", fake_point)
    return seen


def test_sweep_from_the_window_uses_every_checked_device(qtbot, monkeypatch):
    seen = fake_run_point(monkeypatch)
    w = open_window(qtbot)
    try:
        w.setup.apply_config(RunConfig(model="mlp", dataset="synthetic"), ["cpu"])
        w.start_tool("sweep")
        qtbot.waitUntil(lambda: w.state.tool_job is None, timeout=60_000)
        assert seen == [("cpu", b) for b in sweep.default_batch_sizes()]
        assert w.tools.current().result["best"] == {"cpu": 512}
    finally:
        w.close()


def max_batch_result(device="cpu", largest=94):
    from mpsstudio.engine.tools import maxbatch

    probes = [{"batch_size": b, "fits": b <= largest, "samples_per_s": 10.0 * b if b <= largest else None,
               "step_ms": 1.0, "memory": b << 20, "memory_measure": "allocator_peak",
               "why": "" if b <= largest else "out of memory", "reason": "" if b <= largest else "out of memory (x)"}
              for b in (1, 2, 4, 8, 16, 32, 64, 128, 96, 80, 88, 92, 94, 95) if b <= largest + 1]
    return maxbatch.report(probes, device=device, limit=8 << 30, limit_source="--memory-limit", cap=65536,
                           stopped=False, env={}, config=RunConfig(model="mlp", dataset="synthetic").to_dict())


def test_a_largest_batch_search_offers_to_sweep_its_sizes(qtbot, monkeypatch):
    seen = fake_run_point(monkeypatch)
    w = open_window(qtbot)
    try:
        w.store.save_tool(ToolRecord(kind="max-batch", result=max_batch_result()))
        w.tools.reload()
        assert w.tools.sweep_button.isVisibleTo(w.tools)
        assert "Measure batches 16, 32, 64, 94 on cpu" in w.tools.sweep_button.toolTip()
        w.tools.sweep_button.click()
        qtbot.waitUntil(lambda: w.state.tool_job is None, timeout=60_000)
        assert seen == [("cpu", 16), ("cpu", 32), ("cpu", 64), ("cpu", 94)]
        assert w.tools.current().kind == "sweep" and w.tools.current().result["best"] == {"cpu": 94}
        assert not w.tools.sweep_button.isVisibleTo(w.tools)  # a sweep offers no sweep
    finally:
        w.close()


def test_sweeping_a_search_s_sizes_needs_its_device_here(qtbot, monkeypatch):
    from mpsstudio.engine import process

    monkeypatch.setattr(process, "run_point", lambda *a, **k: pytest.fail("swept on a device this machine lacks"))
    w = open_window(qtbot)
    try:
        w.sweep_sizes_of(max_batch_result(device="cuda:0"))
        assert w.state.tool_job is None
        assert "cuda:0 is not available on this machine" in w.statusBar().currentMessage()
        old = max_batch_result()
        del old["sweep_sizes"]  # a search stored by an earlier version
        w.store.save_tool(ToolRecord(kind="max-batch", result=old))
        w.tools.reload()
        assert not w.tools.sweep_button.isVisibleTo(w.tools)
    finally:
        w.close()


def test_a_tool_that_cannot_run_says_why_in_the_banner(qtbot, monkeypatch):
    from mpsstudio.engine import process
    from mpsstudio.engine.basics.errors import UserError

    def refuse(*a, **k):
        raise UserError("The max-batch tool could not run: a reason.")
    monkeypatch.setattr(process, "run_tool", refuse)
    w = open_window(qtbot)
    try:
        w.start_tool("max-batch")
        qtbot.waitUntil(lambda: w.state.tool_job is None, timeout=30_000)
        assert w.banner.isVisible() and "a reason" in w.banner.text()
        assert w.store.tools() == []
    finally:
        w.close()


def test_a_device_available_but_not_working_is_said(qtbot, monkeypatch):
    from mpsstudio.engine.machine import devices
    from mpsstudio.engine import process

    mps = Device(id="mps", kind="mps", available=True, name="Apple M1 (faked)")
    real = devices.discover_devices
    monkeypatch.setattr(devices, "discover_devices", lambda: [*real()[:1], mps])
    monkeypatch.setattr(process, "check_devices", lambda found: {
        "mps": probe.Check(False, "a 16 MiB test allocation failed (RuntimeError: MPS backend out of memory)")})
    w = open_window(qtbot)
    try:
        row = next(r for r in w.setup.devices.rows if r.device.id == "mps")
        assert not row.checkbox.isEnabled()
        assert row.device.reason.startswith("available but not working: a 16 MiB test allocation failed")
        assert w.banner.isVisible() and "mps reports itself available but is not working" in w.banner.text()
        assert "mps works" in dict(w.state.catalog["doctor"])
    finally:
        w.close()


def test_a_tool_without_a_view_of_its_own_shows_its_rows_section(qtbot):
    """A new tool is its module and its row: the Tools tab shows the tables of the row's section, each legend under
    its table; a result whose section has no table says so."""
    from PySide6.QtWidgets import QLabel, QTableWidget

    from mpsstudio.engine.basics.formatting import Table
    from mpsstudio.gui.tools.views import section_view

    tables = [Table(["a", "b"], [["1", "2"]], [False, True], legend="What a and b are."), Table(["c"], [["3"]], [True])]
    view = section_view(tables)
    qtbot.addWidget(view)
    grids = view.findChildren(QTableWidget)
    assert [g.item(0, 0).text() for g in grids] == ["1", "3"]
    assert [label.text() for label in view.findChildren(QLabel)] == ["What a and b are."]
    alone = section_view([Table(["c"], [["3"]], [True])])
    qtbot.addWidget(alone)
    assert isinstance(alone, QTableWidget)  # one table without a legend is the table itself
    empty = section_view([])
    qtbot.addWidget(empty)
    assert "no table" in empty.findChildren(QLabel)[0].text()


def test_a_check_from_the_window_lands_in_the_tools_tab_as_its_table(qtbot):
    """The check is a module and a row: the Tools menu's item, the run and the Tools tab's view come from the row."""
    from PySide6.QtWidgets import QTableWidget

    w = open_window(qtbot)
    try:
        [item] = [a for a in w.menus.tool_actions if a.text() == "Check Devices (Correct Results)…"]
        assert item.shortcut().toString() == "Ctrl+Shift+K"
        w.setup.apply_config(RunConfig(model="mlp", dataset="synthetic"), ["cpu"])
        w.start_tool("check")
        qtbot.waitUntil(lambda: w.state.tool_job is None, timeout=120_000)
        record = w.tools.current()
        assert record.kind == "check" and record.result["devices"] == ["cpu"]
        [grid] = w.tools.findChildren(QTableWidget)[-1:]
        assert grid.horizontalHeaderItem(4).text() == "verdict" and grid.item(0, 4).text() == "passed"
        assert "cpu: all " in w.tools.headline.text()
    finally:
        w.close()


def test_push_to_team_server_sends_the_shown_result_and_is_off_for_one_that_cannot_be_shown(qtbot, store):
    record = ToolRecord(kind="sweep", result=sweep_result())
    store.save_tool(record)
    panel = ToolsPanel(store)
    qtbot.addWidget(panel)
    asked = []
    panel.push_requested.connect(asked.append)
    assert panel.push_button.isEnabled()
    panel.push_button.click()
    assert asked == [[record.id]]
    store.save_tool(ToolRecord(kind="sweep", result={"points": "broken"}, id="bad",
                               created_at="2099-01-01T00:00:00+00:00"))
    panel.reload(select_id="bad")
    assert panel.current().id == "bad" and not panel.push_button.isEnabled()
