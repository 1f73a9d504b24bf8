"""The results panel: runs from the history, speedups, sorting, deletion, exports, imports, the chart and the PNG."""

import csv
import html
import json
from datetime import datetime

import pytest

pytest.importorskip("pytestqt")

from PySide6.QtCore import Qt
from PySide6.QtGui import QImage
from PySide6.QtWidgets import QApplication, QLabel

from mpsstudio.engine.basics.errors import UserError
from mpsstudio.engine.history.store import RunStore
from mpsstudio.gui.export import MARGIN, export_scale, png_scale, render_png
from mpsstudio.gui.results.panel import COL
from mpsstudio.gui.style import warning_color
from tests.support.gui import open_panel
from tests.support.runs import make_run

H100 = {"machine_label": "NVIDIA H100 80GB HBM3 on gpu-node-07", "os": "Linux 5.15", "torch": "2.8.0"}


def text(panel, run_id, column, role=Qt.ItemDataRole.DisplayRole):
    return panel.model.index(panel.model.row_of(run_id), COL[column]).data(role)


def visible_order(panel):
    return [panel.proxy.index(row, 0).data(Qt.ItemDataRole.UserRole + 2) for row in range(panel.proxy.rowCount())]


def test_rows_come_from_the_store_and_survive_a_restart(qtbot, tmp_path, no_leftovers):
    path = tmp_path / "history.sqlite3"
    runs = [make_run("cpu", 412.3), make_run("mps", 1941.7, created="2026-11-21T08:05:00+00:00")]
    first = RunStore(path)
    panel = open_panel(qtbot, first, runs)
    assert panel.model.rowCount() == 2
    assert {r.id for r in panel.results()} == {r.id for r in runs}
    assert text(panel, runs[1].id, "Samples/s") == "1,942 \u00b11 %"  # median ± half the IQR (39)
    local = datetime.fromisoformat(runs[1].created_at).astimezone()
    shown = text(panel, runs[1].id, "Time")  # "21 Nov 08:05" in local time (the year only when not this year)
    assert shown.startswith(f"{local.day} {local:%b}") and shown.endswith(f"{local:%H:%M}")
    panel.close()
    first.close()

    again = RunStore(path)
    reopened = open_panel(qtbot, again)
    assert sorted(r.id for r in reopened.results()) == sorted(r.id for r in runs)
    assert text(reopened, runs[0].id, "Device") == "cpu"
    again.close()


def test_speedups_against_the_cpu_run_of_the_same_setup(qtbot, store):
    cpu, mps = make_run("cpu", 100.0), make_run("mps", 450.0)
    lone = make_run("mps", 300.0, batch_size=256)
    panel = open_panel(qtbot, store, [cpu, mps, lone])
    assert text(panel, mps.id, "Speedup vs CPU") == "4.50\u00d7 (4.41\u20134.59)"  # with its 95 % interval
    assert text(panel, cpu.id, "Speedup vs CPU") == "1.00\u00d7"
    assert text(panel, lone.id, "Speedup vs CPU") == "\u2014"
    assert text(panel, cpu.id, "Comparison") == text(panel, mps.id, "Comparison") == "A"
    assert text(panel, lone.id, "Comparison") == ""
    assert text(panel, mps.id, "Val. acc.") == "97.8 %"
    assert text(panel, mps.id, "Peak memory") == "1.2 GiB"
    assert text(panel, mps.id, "Warm-up") == "0.84 s"
    right = Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter
    assert text(panel, mps.id, "Samples/s", Qt.ItemDataRole.TextAlignmentRole) == int(right)


def test_numeric_columns_sort_by_value_not_by_text(qtbot, store):
    runs = [make_run("cpu", 9_000.0, batch_size=1), make_run("cpu", 10_000.0, batch_size=2),
            make_run("cpu", 950.0, batch_size=3), make_run("cpu", None, status="failed", batch_size=4)]
    panel = open_panel(qtbot, store, runs)
    panel.table.sortByColumn(COL["Samples/s"], Qt.SortOrder.AscendingOrder)
    assert visible_order(panel) == [runs[3].id, runs[2].id, runs[0].id, runs[1].id]
    panel.table.sortByColumn(COL["Samples/s"], Qt.SortOrder.DescendingOrder)
    assert visible_order(panel)[:3] == [runs[1].id, runs[0].id, runs[2].id]


def test_a_failed_run_shows_its_reason_on_every_cell(qtbot, store):
    reason = "The Apple GPU ran out of memory at batch size 256; try batch size 128."
    failed = make_run("mps", None, status="failed", error=reason)
    panel = open_panel(qtbot, store, [failed])
    assert text(panel, failed.id, "Status") == "failed"
    assert text(panel, failed.id, "Samples/s") == "\u2014"
    for column in ("Time", "Machine", "Samples/s", "Status"):
        assert text(panel, failed.id, column, Qt.ItemDataRole.ToolTipRole) == reason
    colour = text(panel, failed.id, "Status", Qt.ItemDataRole.ForegroundRole)
    assert colour == warning_color(QApplication.palette())
    panel.select_ids([failed.id])
    assert panel.chart.is_showing_hint() and "failed" in panel.chart.hint.text()


def test_delete_selected_removes_from_table_and_store(qtbot, store):
    keep, gone = make_run("cpu", 100.0), make_run("mps", 450.0)
    panel = open_panel(qtbot, store, [keep, gone])
    panel.select_ids([gone.id])
    assert panel.selected_ids() == [gone.id]
    with qtbot.waitSignal(panel.message) as said:
        panel.deleter.delete_selected()
    assert said.args == ["Deleted 1 run."]
    assert [r.id for r in panel.results()] == [keep.id]
    assert store.get(gone.id) is None and store.get(keep.id) is not None
    assert text(panel, keep.id, "Speedup vs CPU") == "\u2014"  # its comparison is gone too


def test_exports_write_the_right_rows(qtbot, store, tmp_path):
    cpu, mps = make_run("cpu", 100.0), make_run("mps", 450.0, created="2026-11-21T08:01:00+00:00")
    other = make_run("cpu", 50.0, model="mlp", dataset="shapes")
    panel = open_panel(qtbot, store, [cpu, mps, other])

    assert panel.files.export_csv(str(tmp_path / "all.csv")) == 3  # nothing selected: every run
    with open(tmp_path / "all.csv", newline="") as f:
        rows = {r["id"]: r for r in csv.DictReader(f)}
    assert set(rows) == {cpu.id, mps.id, other.id}
    assert float(rows[mps.id]["speedup_vs_cpu"]) == pytest.approx(4.5)
    assert rows[other.id]["speedup_vs_cpu"] == ""

    panel.select_ids([mps.id])
    with qtbot.waitSignal(panel.message) as said:
        assert panel.files.export_csv(str(tmp_path / "one.csv")) == 1
    assert said.args == ["Exported 1 run to one.csv."]
    with open(tmp_path / "one.csv", newline="") as f:
        [row] = list(csv.DictReader(f))
    assert row["id"] == mps.id and float(row["speedup_vs_cpu"]) == pytest.approx(4.5)  # the table's speedup

    assert panel.files.export_json(str(tmp_path / "pair.json"), ids=[cpu.id, mps.id]) == 2
    doc = json.loads((tmp_path / "pair.json").read_text())
    assert [r["id"] for r in doc["runs"]] == [cpu.id, mps.id]
    assert doc["comparisons"][0]["devices"][1]["speedup_vs_cpu"] == pytest.approx(4.5)


def test_import_marks_runs_and_a_bad_file_loses_nothing(qtbot, store, tmp_path):
    cuda = make_run("cuda:0", 9412.4, env=H100)
    source = RunStore(tmp_path / "server.sqlite3")
    server = open_panel(qtbot, source, [cuda])
    server.files.export_json(str(tmp_path / "server.json"))
    source.close()

    mac = make_run("cpu", 412.3)
    panel = open_panel(qtbot, store, [mac])
    assert panel.files.import_json(str(tmp_path / "server.json")) == 1
    assert text(panel, cuda.id, "Machine") == "NVIDIA H100 80GB HBM3 on gpu-node-07 (imported)"
    assert store.get(cuda.id).origin == "imported"
    # never divided by this Mac's CPU: the server's own CPU run is missing, and the cell says so
    assert text(panel, cuda.id, "Speedup vs CPU") == "\u2014"
    assert "no CPU run from NVIDIA H100" in text(panel, cuda.id, "Speedup vs CPU", Qt.ItemDataRole.ToolTipRole)
    assert panel.selected_ids() == [cuda.id]
    assert panel.files.import_json(str(tmp_path / "server.json")) == 0  # already there: kept as it is

    bad = tmp_path / "notes.json"
    bad.write_text("{ this is not json")
    with qtbot.waitSignal(panel.message) as said:
        assert panel.files.import_json(str(bad)) == 0
    [sentence] = said.args
    assert "not valid JSON" in sentence and "\n" not in sentence and sentence.endswith(".")
    assert panel.model.rowCount() == 2 and len(store) == 2


def test_chart_has_one_bar_per_run_of_the_selected_comparison(qtbot, store):
    cpu, mps = make_run("cpu", 100.0), make_run("mps", 450.0)
    cuda = make_run("cuda:0", 2000.0, env=H100)
    lone = make_run("mps", 300.0, batch_size=256)
    panel = open_panel(qtbot, store, [cpu, mps, cuda, lone])
    panel.select_ids([mps.id])
    assert not panel.chart.is_showing_hint()
    # this Mac's runs first, the server's apart: it has no CPU run of its own, so no speedup
    assert panel.chart.heights() == pytest.approx([1.0, 4.5, 0.0])  # cpu, mps, cuda:0
    ticks = panel.chart.plot.getAxis("bottom")._tickLevels[0]
    assert [label for _, label in ticks] == ["cpu \u2014 Apple M2 Pro", "mps \u2014 Apple M2 Pro",
                                             "cuda:0 \u2014 H100 80GB HBM3 on gpu-node-07"]
    assert [t.toPlainText() for t in panel.chart._labels][:2] == ["1.0\u00d7", "4.5\u00d7"]
    assert "no CPU run" in panel.chart._labels[2].toPlainText()
    assert "Apple GPU (mps) is 4.5x faster than the CPU" in panel.chart.headline.text()
    assert "different machines" in panel.chart.details.text() and not panel.chart.details.isVisible()
    assert "different machines" in panel.chart.verdict_text()
    panel.select_ids([lone.id])
    assert panel.chart.is_showing_hint() and panel.chart.heights() == []


def test_add_result_adds_the_row_refreshes_speedups_and_selects_it(qtbot, store):
    cpu = make_run("cpu", 100.0)
    panel = open_panel(qtbot, store, [cpu])
    mps = make_run("mps", 250.0)
    store.save(mps)
    with qtbot.waitSignal(panel.selection_changed) as changed:
        panel.add_result(mps)
    assert changed.args == [[mps.id]]
    assert panel.selected_ids() == [mps.id]
    assert text(panel, mps.id, "Speedup vs CPU").startswith("2.50\u00d7 (")
    assert panel.chart.heights() == pytest.approx([1.0, 2.5])
    panel.add_result(mps)  # the same run again replaces its row
    assert panel.model.rowCount() == 2


def test_render_png_is_sharp_and_has_a_title(qtbot, tmp_path):
    label = QLabel("9,412 samples/s")
    qtbot.addWidget(label)
    label.resize(300, 120)
    out = render_png(label, str(tmp_path / "label.png"), "A title", "a subtitle")
    assert png_scale(out) == export_scale(label) >= 2  # the file says its scale, at least 2x (Retina)
    for scale in (2, 3):  # exactly the widget plus its margins, times the scale
        image = QImage(render_png(label, str(tmp_path / f"label@{scale}x.png"), "A title", scale=scale))
        assert image.width() == scale * (300 + 2 * MARGIN)
        assert image.height() > scale * (120 + 2 * MARGIN)
        assert image.text("Title") == "A title"
    with pytest.raises(UserError, match="does not exist"):
        render_png(label, str(tmp_path / "nowhere" / "x.png"), "A title")


def test_export_comparison_png_is_large_and_not_blank(qtbot, store, tmp_path):
    cpu, mps = make_run("cpu", 100.0), make_run("mps", 450.0)
    cuda = make_run("cuda:0", 2000.0, env=H100)
    panel = open_panel(qtbot, store, [cpu, mps, cuda])
    panel.select_ids([mps.id])
    title, subtitle = panel.comparison_title()
    assert title == "resnet18 on cifar10 \u00b7 batch 128 \u00b7 fp32"
    assert "Apple M2 Pro, macOS 14.5" in subtitle and "H100" in subtitle and "2026" in subtitle
    out = panel.export_comparison_png(str(tmp_path / "comparison.png"))
    image = QImage(out)
    assert not image.isNull()
    assert png_scale(out) >= 2
    assert image.width() >= png_scale(out) * (720 + 2 * MARGIN)  # the sheet is at least 720 logical pixels wide
    colours = {image.pixel(x, y) for x in range(0, image.width(), 23) for y in range(0, image.height(), 23)}
    assert len(colours) >= 6  # text, bars, background: not a blank image

    panel.select_ids([])
    empty = open_panel(qtbot, RunStore(tmp_path / "empty.sqlite3"))
    with pytest.raises(UserError, match="comparison"):
        empty.export_comparison_png(str(tmp_path / "none.png"))


def test_delete_key_deletes_with_undo_and_asks_only_beyond_what_undo_holds(qtbot, store, monkeypatch):
    from mpsstudio.gui.results import deleting

    a, b, c = make_run("cpu", 100.0), make_run("mps", 450.0), make_run("cpu", 90.0, model="mlp")
    panel = open_panel(qtbot, store, [a, b, c])
    panel.show()
    panel.table.setFocus()
    panel.select_ids([a.id])
    asked = []
    monkeypatch.setattr(panel.deleter, "confirm_delete", lambda n: asked.append(n) or False)
    qtbot.keyClick(panel.table, Qt.Key.Key_Delete)
    assert asked == [] and store.get(a.id) is None and panel.undo_bar.can_undo()  # at once, with Undo
    monkeypatch.setattr(deleting, "UNDO_UP_TO", 1)  # more runs than Undo holds: asked first
    panel.select_ids([b.id, c.id])
    qtbot.keyClick(panel.table, Qt.Key.Key_Backspace)
    assert asked == [2] and panel.model.rowCount() == 2  # declined: nothing deleted
    monkeypatch.setattr(panel.deleter, "confirm_delete", lambda n: asked.append(n) or True)
    qtbot.keyClick(panel.table, Qt.Key.Key_Backspace)
    assert asked == [2, 2] and panel.results() == []


def test_a_bar_whose_interval_contains_one_says_no_clear_difference(qtbot, store):
    cpu = make_run("cpu", 100.0)
    mps = make_run("mps", 100.5)  # windows 99.5 and 101.5 against 99 and 101: the interval straddles 1.0
    panel = open_panel(qtbot, store, [cpu, mps])
    panel.select_ids([mps.id])
    assert "no clear difference" in panel.chart._labels[1].toPlainText()
    # the answer in one large line, then the sentence in full
    assert panel.chart.headline.text().startswith("<span style='font-size:15pt; font-weight:600'>No clear difference: "
                                                  "mps ")
    assert "<br>No clear difference between Apple GPU (mps) and the CPU" in panel.chart.headline.text()
    assert panel.chart.whiskers is not None


def test_a_verdict_shows_its_answer_and_one_sentence_and_folds_the_rest(qtbot, store):
    from mpsstudio.engine.analysis.verdict import brief

    assert brief(["Apple GPU (mps) is 1.67x faster (1.50x-1.81x): 0.08 s vs 0.12 s per epoch (measured). The cpu "
                  "run was noisy: spread ±8 %.", "Across machines, x."]) == (
        "Apple GPU (mps) is 1.67x faster (1.50x-1.81x): 0.08 s vs 0.12 s per epoch (measured).",
        ["The cpu run was noisy: spread ±8 %.", "Across machines, x."])
    assert brief([]) == ("", [])
    cpu, mps = make_run("cpu", 100.0, precision="bf16"), make_run("mps", 300.0, precision="bf16")
    panel = open_panel(qtbot, store, [cpu, mps, make_run("cuda:0", 2000.0, env=H100, precision="bf16")])
    panel.select_ids([mps.id])
    chart = panel.chart  # the mps sentence, then what the other machine's run and the precision add
    first, rest = brief(verdict_sentences(chart))
    assert first.startswith("Apple GPU (mps) is 3.0x faster") and html.escape(first) in chart.headline.text()
    assert rest and not chart.details.isVisible()
    assert chart.more.text() == (f"{len(rest)} more sentence" + ("s" if len(rest) > 1 else ""))
    chart.more.click()
    assert chart.details.isVisibleTo(chart) and chart.more.text() == "Less"
    assert all(r in chart.details.text() for r in rest)


def verdict_sentences(chart):
    from mpsstudio.engine.analysis.verdict import verdicts

    return verdicts(chart.comparison, chart.inspections)


def test_runs_waiting_for_the_teams_server_are_said_under_the_table(qtbot, tmp_path):
    """The window says what the history's queue holds (engine history/library.waiting_words), with the command that
    sends it; nothing when nothing waits."""
    store = RunStore(tmp_path / "history.sqlite3")
    runs = [make_run("cpu", 400.0), make_run("mps", 1900.0, created="2026-11-21T08:05:00+00:00")]
    panel = open_panel(qtbot, store, runs)
    panel.show()
    assert not panel.team_line.isVisible()
    store.queue.add("http://mlflow.team:5000", [r.id for r in runs])
    store.queue.failed("http://mlflow.team:5000", runs[0].id, "the server at http://mlflow.team:5000 did not answer")
    panel.reload()
    said = panel.team_line.text()
    assert panel.team_line.isVisible() and said.startswith("2 runs wait for the team's server at "
                                                           "http://mlflow.team:5000: it did not answer. ")
    assert said.endswith(". Push to Team Server sends them when it answers. <a href=\"drop\">Stop Waiting</a>")
    assert "`mpsstudio history --push http://mlflow.team:5000` sends them" in panel.library.waiting_words()
    store.queue.done("http://mlflow.team:5000", runs[0].id)
    panel.reload()
    assert panel.team_line.text().startswith("1 run waits for the team's server")
    said = []
    panel.message.connect(said.append)
    panel.team_line.linkActivated.emit("drop")  # Stop Waiting: the queue goes, the runs stay
    assert not panel.team_line.isVisible() and store.queue.waiting() == [] and len(store.summaries()) == 2
    assert said == ["1 run no longer waits for the team's server; it stays in the history."]
    panel.close()
    store.close()


def test_push_to_team_server_sends_off_the_gui_thread_and_says_what_waits(qtbot, tmp_path):
    """Push to Team Server with the server of Preferences: the engine's push in a job; a server that does not answer
    leaves the runs waiting, said in the message and under the table. Without a server set: one sentence."""
    from mpsstudio.gui.preferences import Preferences
    from tests.support.mlflow_server import free_port

    store = RunStore(tmp_path / "history.sqlite3")
    runs = [make_run("cpu", 400.0), make_run("mps", 1900.0, created="2026-11-21T08:05:00+00:00")]
    panel = open_panel(qtbot, store, runs)
    panel.show()
    said = []
    panel.message.connect(said.append)
    panel.run_actions.push.trigger()
    assert said and said[-1].startswith("No team server is set")
    url = f"http://127.0.0.1:{free_port()}"  # nobody listens there
    Preferences(team_server=url).save()
    panel.run_actions.push.trigger()
    qtbot.waitUntil(lambda: panel.team_line.isVisible() and panel.run_actions.push.isEnabled(), timeout=20000)
    assert any("2 runs wait for the team's server" in s for s in said)
    assert panel.team_line.text().startswith(f"2 runs wait for the team's server at {url}: it did not answer")
    panel.close()
    store.close()


def test_pull_from_team_server_lists_the_experiments_and_brings_one_in(qtbot, tmp_path):
    """Pull from Team Server…: the server's experiments asked for off the GUI thread, one chosen (the dialog answered
    here), its runs pulled (engine team/pull.py) and shown in the table."""
    from mpsstudio.engine.team import mlflow_run
    from mpsstudio.gui.preferences import Preferences
    from tests.support.fake_mlflow import FakeServer

    theirs = make_run("mps", 2100.0, created="2026-11-22T08:00:00+00:00")
    files = mlflow_run.outgoing(theirs).files
    entry = {"info": {"run_id": "r1", "artifact_uri": "mlflow-artifacts:/1/r1/artifacts"},
             "data": {"tags": [{"key": mlflow_run.RUN_ID_TAG, "value": theirs.id}]}}

    def respond(request):
        if "experiments/search" in request.path:
            request.answer(200, {"experiments": [{"name": "Default"}, {"name": "mpsstudio · mlp · shapes"}]})
        elif "experiments/get-by-name" in request.path:
            request.answer(200, {"experiment": {"experiment_id": "1"}})
        elif "runs/search" in request.path:
            request.answer(200, {"runs": [entry]})
        else:
            request.answer(200, files[mlflow_run.RUN_FILE])

    store = RunStore(tmp_path / "history.sqlite3")
    panel = open_panel(qtbot, store, [make_run("cpu", 400.0)])
    said, offered = [], []
    panel.message.connect(said.append)
    panel.team.choose = lambda url, names: offered.append(names) or names[0]
    with FakeServer(respond) as fake:
        Preferences(team_server=fake.url).save()
        panel.team.pull()
        qtbot.waitUntil(lambda: any(s.startswith("Pulled") for s in said), timeout=20000)
    assert offered == [["mpsstudio · mlp · shapes", "Default"]]
    assert any("Pulled 1 run of 'mpsstudio · mlp · shapes'" in s and "1 added" in s for s in said)
    qtbot.waitUntil(lambda: panel.model.row_of(theirs.id) is not None, timeout=5000)
    panel.close()
    store.close()
