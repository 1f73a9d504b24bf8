"""The window's side of "did something else change my numbers": Compare by environment, setting or selection with a
baseline, Copy as Markdown and Export Report…, Preferences' other PyTorch and the setup's checkbox for it, and the
environment in Details."""

from __future__ import annotations

import sys

from PySide6.QtWidgets import QApplication

from mpsstudio.engine.basics.results import WindowRow
from mpsstudio.gui.results.run_details import environment_line
from tests.support.environments import make_venv
from tests.support.gui import open_panel
from tests.support.runs import MAC, make_run
from tests.support.paths import DATA


def runs_of_two_torches():
    old = make_run("mps", 1000.0, created="2026-11-21T08:00:00+00:00", env={**MAC, "torch": "2.14.1"})
    new = make_run("mps", 850.0, created="2026-11-22T08:00:00+00:00", env={**MAC, "torch": "2.15.0"})
    new.windows = [WindowRow(samples_per_s=850.0 * f) for f in (0.98, 1.02) * 20]
    bigger = make_run("mps", 1300.0, created="2026-11-23T08:00:00+00:00", env={**MAC, "torch": "2.14.1"},
                      batch_size=256)
    return old, new, bigger


def test_compare_by_environment_with_a_chosen_baseline(qtbot, store):
    old, new, bigger = runs_of_two_torches()
    panel = open_panel(qtbot, store, [old, new, bigger])
    panel.select_ids([new.id])
    keys = [panel.compare_combo.itemData(i) for i in range(panel.compare_combo.count())]
    assert keys == ["environment:"]  # no device comparison; the batch-256 run has another torch than `new`
    assert panel.compare_bar.isVisible() or not panel.isVisible()
    chart = panel.contrast_chart
    assert panel._chart_stack.currentWidget() is chart
    assert chart.heights() == [1.0, 0.85]
    assert "torch 2.15.0: 15 % slower [" in chart.verdict_text()
    assert "than 2.14.1" in chart.verdict_text() and "nothing else differs" in chart.verdict_text()
    ticks = chart.plot.getAxis("left")._tickLevels[0]
    assert [label for _, label in ticks] == ["baseline", "torch 2.15.0"]
    chart.baseline_chosen.emit(new.id)  # the newer run as the baseline: the older one is faster than it
    assert chart.heights()[1] > 1.1 and chart.contrast.baseline.id == new.id
    panel.select_ids([old.id])
    keys = [panel.compare_combo.itemData(i) for i in range(panel.compare_combo.count())]
    assert keys == ["environment:", "setting:batch_size"]
    panel.compare_combo.setCurrentIndex(1)
    panel._update_chart()
    assert "batch 256 is 30 % faster [" in chart.verdict_text()


def test_any_selected_runs_compared_and_reported(qtbot, store, tmp_path):
    old, new, bigger = runs_of_two_torches()
    cpu = make_run("cpu", 200.0, created="2026-11-24T08:00:00+00:00", model="mlp")
    panel = open_panel(qtbot, store, [old, new, bigger, cpu])
    panel.select_ids([new.id, bigger.id])
    assert panel.compare_combo.currentData() == "selected"
    assert "differ in batch and torch: the cause cannot be told apart" in panel.contrast_chart.verdict_text()
    text = panel.reports.copy_markdown()
    assert text == QApplication.clipboard().text()
    assert "| run | time |" in text and "<details><summary>Environment</summary>" in text
    out = tmp_path / "r.html"
    assert panel.reports.export_report(str(out)) and "<svg" in out.read_text()
    panel.select_ids([cpu.id])  # a run with nothing to compare: its own report
    assert not panel.compare_bar.isVisible() and panel.chart.is_showing_hint()
    assert "Run: mlp on cifar10" in panel.reports.copy_markdown()


def test_tools_tab_copies_and_exports_its_result(qtbot, tmp_path):
    from mpsstudio.engine.history.store import RunStore
    from mpsstudio.gui.tools.panel import ToolsPanel

    tools = ToolsPanel(RunStore(tmp_path / "h.sqlite3"))
    qtbot.addWidget(tools)
    said = []
    tools.message.connect(said.append)
    assert tools.copy_markdown() == "" and not tools.markdown_button.isEnabled()
    tools.import_file(str(DATA / "tool_results" / "sweep.json"))
    assert tools.markdown_button.isEnabled()
    text = tools.copy_markdown()
    assert text.startswith("## Batch-size sweep") and "| device | batch |" in text and said


def test_preferences_add_another_python_and_the_setup_runs_in_it(qtbot, tmp_path, monkeypatch):
    from mpsstudio.gui.preferences import Preferences, PreferencesDialog

    from mpsstudio.engine.process import interpreter

    python = make_venv(tmp_path / "torch-env")
    real_check = interpreter.check
    # the check itself is tested with real environments (test_other_python.py); here its answer, from its thread
    monkeypatch.setattr(interpreter, "check", lambda path, max_age_s=None: interpreter.Interpreter(
        str(python.absolute()), "3.11.7", "2.15.0", None, "torch-env") if path == str(python) else real_check(path))
    dialog = PreferencesDialog(tmp_path / "runs.sqlite3")
    qtbot.addWidget(dialog)
    dialog.add_python(str(python))
    qtbot.waitUntil(lambda: dialog.pythons.count() == 1, timeout=60_000)
    assert "(torch-env)" in dialog.pythons.item(0).text()
    bad = tmp_path / "nothing"
    dialog.add_python(str(bad))
    qtbot.waitUntil(lambda: "No Python at" in dialog.python_note.text(), timeout=30_000)
    dialog.accept()
    prefs = Preferences.load()
    assert [p["path"] for p in prefs.pythons] == [str(python.absolute())]

    from mpsstudio.gui.setup.panel import SetupPanel

    setup = SetupPanel()
    qtbot.addWidget(setup)
    assert setup.pythons.checked() == [None]
    setup.pythons.set_environments(prefs.pythons, "torch 2.14.1")
    labels = [c.text() for c, _ in setup.pythons.checks]
    assert labels[0] == "This app's torch 2.14.1" and labels[1].endswith("(torch-env)")
    setup.pythons.checks[1][0].setChecked(True)
    assert setup.pythons.checked() == [None, str(python.absolute())]
    setup.pythons.checks[0][0].setChecked(False)
    assert setup.pythons.checked() == [str(python.absolute())]


def test_details_say_the_environment():
    line = environment_line({**MAC, "torch": "2.14.1", "torch_git": "5c4886908584029761b5", "macos_build": "23F79",
                             "python_executable": sys.executable})
    assert "torch 2.14.1" in line and "torch build 5c4886908584" in line and "macOS build 23F79" in line
    assert sys.executable not in line
    assert "not recorded" in environment_line({})


def test_curves_of_two_torches_are_told_apart():
    from mpsstudio.gui.plots.stored import legend_labels

    old, new, _ = runs_of_two_torches()
    assert legend_labels([old, new]) == ["mps · torch 2.14.1", "mps · torch 2.15.0"]
    assert legend_labels([old]) == ["mps"]


def test_a_chosen_comparison_stays_and_a_failed_run_is_never_the_baseline(qtbot, store):
    cpu = make_run("cpu", 100.0, created="2026-11-20T08:00:00+00:00")
    mps = make_run("mps", 450.0, created="2026-11-20T08:01:00+00:00")
    failed = make_run("mps", 300.0, created="2026-11-20T08:02:00+00:00", status="failed", batch_size=256)
    panel = open_panel(qtbot, store, [cpu, mps, failed])
    panel.select_ids([cpu.id, mps.id])
    combo = panel.compare_combo
    assert combo.currentData() == "selected"
    combo.setCurrentIndex(combo.findData("devices"))
    panel.picker._picked(combo.currentIndex())
    assert combo.currentData() == "devices" and panel._chart_stack.currentWidget() is panel.chart
    panel._update_chart()  # a redraw keeps what the user chose for this selection
    assert combo.currentData() == "devices"
    panel.select_ids([cpu.id, mps.id, failed.id])  # another selection: its default again
    assert combo.currentData() == "selected"
    chart = panel.contrast_chart
    offered = [chart.baseline.itemData(i) for i in range(chart.baseline.count())]
    assert failed.id not in offered and chart.contrast.baseline.id == cpu.id
    chart.baseline_chosen.emit(failed.id)  # never possible from the menu; even so, not taken
    assert chart.contrast.baseline.id == cpu.id
    assert any(label.startswith(f"run {failed.id[:8]}: failed") for label in contrast_labels(chart))
    panel.table.clearSelection()
    assert not panel.run_actions.report.isEnabled() and not panel.run_actions.markdown.isEnabled()


def contrast_labels(chart):
    return [label for _, label in chart.plot.getAxis("left")._tickLevels[0]]


def test_long_differences_are_cut_on_the_bars():
    from mpsstudio.engine.analysis import contrast
    from mpsstudio.gui.results.contrast_chart import LABEL_CHARS, bar_labels

    a = make_run("cpu", 100.0, created="2026-11-20T08:00:00+00:00")
    b = make_run("mps", 450.0, created="2026-11-20T08:01:00+00:00", env={**MAC, "torch": "2.15.0"}, batch_size=8,
                 precision="bf16", channels_last=True)
    labels = bar_labels(contrast.of_runs([a, b]))
    assert len(labels[1]) == LABEL_CHARS and labels[1].endswith("\u2026")


def test_no_pytorch_checked_keeps_run_off_and_own_python_is_not_another(qtbot, tmp_path):
    from mpsstudio.gui.preferences import PreferencesDialog
    from mpsstudio.gui.setup.panel import SetupPanel

    setup = SetupPanel()
    qtbot.addWidget(setup)
    setup.pythons.set_environments([{"path": "/x/bin/python", "label": "torch 2.15.0 · Python 3.12.1 (x)"}], "torch 2.14.1")
    setup.pythons.checks[0][0].setChecked(False)
    assert setup.pythons.checked() == [] and not setup.footer.run_button.isEnabled()
    dialog = PreferencesDialog(tmp_path / "runs.sqlite3")
    qtbot.addWidget(dialog)
    dialog.add_python(sys.executable)
    assert "MPS Studio's own Python" in dialog.python_note.text() and dialog.pythons.count() == 0


def test_a_broken_environment_is_a_failed_run_naming_it_and_the_others_run(tmp_path):
    from mpsstudio.engine.basics.config import RunConfig
    from mpsstudio.engine.process import run_isolated

    broken = make_venv(tmp_path / "lost-torch")
    base = RunConfig(model="mlp", dataset="synthetic", device="cpu", steps=6, epochs=None, warmup_steps=1,
                     batch_size=16)
    from dataclasses import replace

    ran = run_isolated([replace(base, python=str(broken)), base])
    assert [r.status for r in ran] == ["failed", "finished"]
    assert "has no PyTorch" in ran[0].error and ran[0].env["python_env"] == "lost-torch"
