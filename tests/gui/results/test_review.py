"""Reviewing stored runs in the window: curves drawn from the history after a relaunch, overlays, the x axis,
smoothing, the hover readout, exports of what is selected, the state column and the column chooser."""

from __future__ import annotations

import math

import pytest

pytest.importorskip("pytestqt")

from mpsstudio.engine.basics.config import RunConfig
from mpsstudio.engine.basics.summary_fields import RunSummary
from mpsstudio.engine.basics.results import EpochRow, Evaluation, RunResult, WindowRow
from mpsstudio.engine.analysis.runcheck import checked_result
from mpsstudio.engine.history.store import RunStore
from mpsstudio.gui.banner import Banner
from mpsstudio.gui.window import MAX_OVERLAY, MainWindow
from mpsstudio.gui.plots import LivePlots
from mpsstudio.gui.results.panel import COL, ResultsPanel
from mpsstudio.gui.results.run_table import DEFAULT_HIDDEN

MAC = {"machine_label": "Apple M2 Pro, macOS 14.5"}
H100 = {"machine_label": "NVIDIA H100 on gpu-node-07"}


def stored_run(device="cpu", rate=100.0, env=MAC, status="finished", losses=None, error="", created=None,
               n_windows=4, **cfg):
    """A run as its process sends it: 3 warm-up steps, windows of 4 steps, two epochs with validation."""
    cfg.setdefault("model", "mlp")
    cfg.setdefault("dataset", "shapes")
    config = RunConfig(device=device, batch_size=32, steps=None, epochs=2, warmup_steps=3, **cfg)
    losses = list(losses if losses is not None else [2.0 - 0.01 * i for i in range(3 + 4 * n_windows)])
    windows = [WindowRow(first_step=4 + 4 * k, steps=4, seconds=128 / rate, samples=128,
                samples_per_s=rate * (1 + 0.01 * k), data_wait_s=0.0, memory=1000 + k,
                energy_j=5.0 if k % 2 else None, energy_s=0.5 if k % 2 else None)
               for k in range(n_windows) if 4 + 4 * k + 3 <= len(losses)]
    epochs = [EpochRow(epoch=1, step=10, seconds=1.0, val_loss=1.5, val_accuracy=0.5),
              EpochRow(epoch=2, step=19, seconds=1.0, val_loss=1.0, val_accuracy=0.7)]
    run = RunResult(config=config, status=status, env=dict(env), error=error, losses=losses, windows=windows,
                    epochs=epochs if status == "finished" else [], created_at=created or "2026-11-21T08:00:00+00:00",
                    summary={"warmup_steps": 3, "warmup_s": 0.6, "samples_per_s": rate})
    return checked_result(run, "the test")


@pytest.fixture
def history(tmp_path):
    """A history written by an earlier launch: a comparison (cpu, mps) and an H100 run, closed again."""
    path = tmp_path / "runs.sqlite3"
    store = RunStore(path)
    runs = [stored_run("cpu", 100.0), stored_run("mps", 400.0), stored_run("cuda:0", 900.0, env=H100)]
    for r in runs:
        store.save(r)
    store.close()
    return path, runs


def open_window(qtbot, path) -> MainWindow:
    w = MainWindow(store=RunStore(path), keep_spare=False)
    qtbot.addWidget(w)
    w.resize(1280, 740)
    w.show()
    return w


def test_a_relaunched_window_draws_the_selected_runs_stored_curves(qtbot, history):
    path, (cpu, mps, h100) = history
    w = open_window(qtbot, path)
    assert w.plots.is_empty() and not w.plots._view.isVisible()  # no empty frames before anything is shown
    qtbot.waitExposed(w)
    assert w.plots.height() < 80 < w.tabs.height()  # folded to its line of hint: the table gets the room
    assert all(r.is_summary for r in w.results.results())  # the table read summaries only
    w.results.select_ids([cpu.id, mps.id])
    assert w.plots.run_ids() == [cpu.id, mps.id] and w.plots._view.isVisible()
    assert w.plots.height() > 250  # the curves get their room back
    series = w.plots.series(mps.id)
    assert series["loss"].y.tolist() == pytest.approx(mps.losses)
    assert series["throughput"].x.tolist() == [7, 11, 15, 19]  # each window's last step
    assert series["throughput"].y.tolist() == pytest.approx([w_.samples_per_s for w_ in mps.windows])
    assert series["power"].y.tolist() == pytest.approx([10.0, 10.0])  # 5 J over 0.5 s, where measured
    w.plots.redraw()
    val_x, val_y = w.plots.curves(cpu.id)["val"].xData, w.plots.curves(cpu.id)["val"].yData
    assert val_x.tolist() == [10, 19] and val_y.tolist() == [1.5, 1.0]
    assert [label.text for _, label in w.plots._legend.items][:2] == ["cpu", "mps"]
    w.results.select_ids([mps.id, h100.id])  # two machines: the legend names them
    assert [label.text for _, label in w.plots._legend.items][:2] == [
        "mps \u00b7 Apple M2 Pro, macOS 14.5", "cuda:0 \u00b7 NVIDIA H100 on gpu-node-07"]
    w.results.select_ids([])
    assert w.plots.is_empty()
    w.resize(1440, 900)  # a resize shares space by stretch: the fold holds
    qtbot.wait(50)
    assert w.plots.height() < 80
    w.close()


def test_more_runs_selected_than_the_overlay_holds_draws_the_first_and_says_so(qtbot, tmp_path):
    store = RunStore(tmp_path / "runs.sqlite3")
    runs = [stored_run("cpu", 100.0 + i, created=f"2026-11-21T08:{i:02d}:00+00:00") for i in range(MAX_OVERLAY + 2)]
    for r in runs:
        store.save(r)
    w = MainWindow(store=store, keep_spare=False)
    qtbot.addWidget(w)
    w.results.select_ids([r.id for r in runs])
    assert len(w.plots.run_ids()) == MAX_OVERLAY
    assert f"first {MAX_OVERLAY} of the {MAX_OVERLAY + 2} selected" in w.statusBar().currentMessage()
    w.close()


def test_export_comparison_draws_the_selected_comparison_not_what_the_plots_show(qtbot, history, tmp_path,
                                                                                 monkeypatch):
    path, (cpu, mps, h100) = history
    w = open_window(qtbot, path)
    w.results.select_ids([cpu.id])
    w.plots.start_run("live", "mps", 0)  # whatever the window shows now (a live run, another selection)
    w.plots.add_window("live", 1, [9.0, 9.0], 5.0, 0)
    drawn = []
    from mpsstudio.gui import export

    real = export.render_png

    def spy(widget, out, title, subtitle, scale=None):
        if isinstance(widget, LivePlots):
            drawn.append((widget.run_ids(), title))
        return real(widget, out, title, subtitle, scale)
    monkeypatch.setattr(export, "render_png", spy)
    assert w.export_comparison(str(tmp_path / "c.png")) is not None
    [(ids, title)] = drawn
    assert sorted(ids) == sorted([cpu.id, mps.id, h100.id]) and "mlp on shapes" in title  # the whole comparison
    w.close()


def test_the_time_axis_smoothing_and_readout(qtbot):
    plots = LivePlots()
    qtbot.addWidget(plots)
    run = stored_run("cpu", 128.0)  # windows of 1 s each, warm-up 0.6 s
    plots.show_runs([run])
    plots.set_x_axis("time")
    x = plots.curves(run.id)["loss"].xData  # the data set (getData() is clipped to the view)
    assert x[2] == pytest.approx(0.6) and x[-1] == pytest.approx(0.6 + 4 * 128 / 128.0)
    tx = plots.curves(run.id)["throughput"].xData
    assert tx.tolist() == pytest.approx([1.6, 2.6, 3.6, 4.6])
    assert "Training time" in plots._power.getAxis("bottom").labelText
    plots.set_x_axis("step")
    assert plots.curves(run.id)["loss"].xData[0] == 1
    plots.set_smoothing(0)
    assert plots.series(run.id)["loss_smooth"].y.tolist() == pytest.approx(run.losses)
    plots.set_smoothing(0.9)
    smooth = plots.series(run.id)["loss_smooth"].y
    assert smooth[5] > run.losses[5] and plots.smoothing() == 0.9 and plots._smooth_slider.value() == 90
    text = plots.readout(9.2)  # step 9: in the window of steps 8-11
    assert "cpu: step 9 loss 1.92" in text and "129 samples/s (its window)" in text
    plots.set_x_axis("time")
    assert "step 7 " in plots.readout(1.6)  # the end of the first window: 0.6 s of warm-up + 1 s


def test_a_failed_run_draws_what_it_measured_huge_and_nan_losses_included(qtbot):
    losses = [2.0, 1.9, 1.8, 1.5, 3.0, 1e30, 1e34, math.nan, math.nan]  # diverged, then NaN (a failed run)
    run = stored_run("mps", 400.0, status="failed", losses=losses,
                     error="The loss became NaN at step 8; lower the learning rate (now 1000).")
    assert run.losses[5] == 1e30  # a diverging loss is a valid measurement, not a malformed file
    plots = LivePlots()
    qtbot.addWidget(plots)
    plots.show_runs([run])
    loss = plots.series(run.id)["loss"]
    assert len(loss) == 9 and loss.x.tolist() == list(range(1, 10))
    assert "failed" in plots._legend.items[0][1].text


def test_the_state_column_and_the_column_chooser(qtbot, tmp_path):
    store = RunStore(tmp_path / "runs.sqlite3")
    ok = stored_run("cpu", n_windows=8)
    noisy = stored_run("cpu", model="resnet18")  # 4 windows: too few to trust
    bad = stored_run("mps", status="failed", error="The loss became NaN at step 4; lower the learning rate.")
    stopped = stored_run("cpu", status="cancelled", model="mnist_cnn")
    for r in (ok, noisy, bad, stopped):
        store.save(r)
    panel = ResultsPanel(store)
    qtbot.addWidget(panel)

    def cell(run, column, role=0):
        return panel.model.index(panel.model.row_of(run.id), COL[column]).data(role)
    assert COL["State"] == 0
    assert [cell(r, "State") for r in (ok, noisy, bad, stopped)] == ["\u2713", "\u26a0\ufe0e", "\u2715", "\u25a0"]
    assert "The loss became NaN" in cell(bad, "State", 3)  # its tooltip says why
    assert "noisy: only 4 measurement windows" in cell(noisy, "State", 3)
    assert sorted(panel.view.hidden_columns()) == sorted(DEFAULT_HIDDEN)
    panel.view.set_column_shown(COL["Final loss"], True)
    panel.view.set_column_shown(COL["Machine"], False)
    again = ResultsPanel(store)  # the choice is kept
    qtbot.addWidget(again)
    assert not again.table.isColumnHidden(COL["Final loss"]) and again.table.isColumnHidden(COL["Machine"])
    menu = again.view.column_menu()
    names = [a.text() for a in menu.actions() if a.isCheckable()]
    assert "Peak memory" in names and "Machine" in names and "" not in names
    again.view.reset_columns()
    assert sorted(again.view.hidden_columns()) == sorted(DEFAULT_HIDDEN)


def test_a_runs_failure_banner_clears_and_a_history_warning_stays(qtbot):
    banner = Banner()
    qtbot.addWidget(banner)
    banner.show()
    banner.show_message("mps: The loss became NaN at step 4.", warning=True, kind="run")
    banner.clear("run")
    assert banner.text() == ""
    banner.show_message("The run history is read-only.", warning=True)
    banner.clear("run")
    assert banner.text() == "The run history is read-only."


def test_the_details_tab_shows_epochs_keeps_a_note_and_exports_the_loss_curve(qtbot, history, tmp_path):
    import csv

    path, (cpu, mps, _) = history
    store = RunStore(path)
    panel = ResultsPanel(store)
    qtbot.addWidget(panel)
    panel.select_ids([mps.id])
    d = panel.details
    assert d.run.id == mps.id and not d.run.is_summary
    assert d.epoch_rows() == [["1", "10", "1.00 s", "1.5", "50.0 %"], ["2", "19", "1.00 s", "1", "70.0 %"]]
    assert d.epochs.item(1, 0).font().bold()  # the best epoch by validation accuracy
    d.note.setText("after the macOS 15.2 update")
    d.note.editingFinished.emit()
    assert RunStore(path).get(mps.id).note == "after the macOS 15.2 update"
    assert panel.model.index(panel.model.row_of(mps.id), COL["Note"]).data() == "after the macOS 15.2 update"
    out = tmp_path / "loss.csv"
    assert panel.files.export_steps(mps.id, str(out)) == 19
    rows = list(csv.reader(out.open()))
    assert rows[0] == ["step", "phase", "loss", "training_time_s", "window_samples_per_s", "window_memory_bytes"]
    assert rows[1][:2] == ["1", "warm-up"] and rows[1][4] == ""  # warm-up is never counted in a throughput
    assert rows[3][1:4] == ["warm-up", "1.98", "0.6"]
    assert rows[4][1] == "measured" and float(rows[4][3]) == pytest.approx(0.6 + 0.32) and rows[4][4] == "400.0"


def test_a_steps_run_has_no_epoch_table_and_says_why(qtbot):
    from mpsstudio.gui.results.run_details import RunDetails

    d = RunDetails()
    qtbot.addWidget(d)
    run = stored_run("cpu")
    run.config = run.config.changed(steps=200, epochs=None)
    d.show_run(run)
    assert "measured in steps" in d.epochs_label.text() and d.epochs.isHidden()
    d.show_run(None)
    assert d.body.isHidden() and not d.empty.isHidden()


def panel_with_note(qtbot, path, run_id: str, note: str):
    """The results panel on the history, one run carrying a note."""
    store = RunStore(path)
    store.set_note(run_id, note)
    panel = ResultsPanel(store)
    qtbot.addWidget(panel)
    return store, panel


def test_the_filter_keeps_runs_matching_every_word(qtbot, history):
    path, (cpu, mps, h100) = history
    _, panel = panel_with_note(qtbot, path, cpu.id, "Quiet machine, lid open")
    panel.set_filter("H100")
    assert panel.visible_ids() == [h100.id]
    panel.set_filter("mlp  apple")
    assert sorted(panel.visible_ids()) == sorted([cpu.id, mps.id])
    panel.set_filter("lid")  # the note is searched too
    assert panel.visible_ids() == [cpu.id]
    panel.set_filter("nothing-like-this")
    assert panel.visible_ids() == []
    panel.set_filter("")
    assert len(panel.visible_ids()) == 3


def test_delete_is_undone_within_its_window_and_not_after(qtbot, history):
    path, (cpu, mps, h100) = history
    store, panel = panel_with_note(qtbot, path, mps.id, "keep me")
    panel.select_ids([mps.id, h100.id])
    panel.deleter.delete_dialog()  # no question: Undo is offered instead
    assert store.get(mps.id) is None and panel.undo_bar.isVisibleTo(panel) and panel.undo_bar.can_undo()
    panel.deleter.undo()
    back = RunStore(path).get(mps.id)
    assert back is not None and back.note == "keep me" and len(back.windows) == 4 and back.losses == pytest.approx(mps.losses)
    assert sorted(panel.selected_ids()) == sorted([mps.id, h100.id]) and not panel.undo_bar.can_undo()
    heard = []
    panel.selection_changed.connect(heard.append)
    panel.select_ids([cpu.id])
    panel.deleter.delete_selected()
    assert heard[-1] == []  # the plots hear that nothing is selected: the deleted run's curves go
    panel.undo_bar.timer.timeout.emit()  # the window passed
    panel.deleter.undo()
    assert RunStore(path).get(cpu.id) is None and not panel.undo_bar.isVisibleTo(panel)


def test_history_steps_and_note_on_the_command_line(history, tmp_path, capsys, monkeypatch):
    from mpsstudio import cli

    path, (cpu, _, _) = history
    monkeypatch.setenv("MPSSTUDIO_DATA_DIR", str(path.parent))
    assert cli.main(["history", "--note", cpu.id, "baseline after reboot"]) == 0
    assert RunStore(path).get(cpu.id).note == "baseline after reboot"
    capsys.readouterr()
    assert cli.main(["history"]) == 0  # the table shows each run's id (what --note takes) and its note
    [line] = [ln for ln in capsys.readouterr().out.splitlines() if cpu.id in ln]
    assert line.rstrip().endswith(f"{cpu.id}  baseline after reboot")
    out = tmp_path / "steps.csv"
    assert cli.main(["history", "--steps", cpu.id, str(out)]) == 0
    assert len(out.read_text().splitlines()) == 20
    assert cli.main(["history", "--steps", "no-such-run", str(out)]) == 2
    err = capsys.readouterr().err
    assert "No run with id no-such-run in the history" in err and "Traceback" not in err


def test_the_details_tab_shows_the_evaluation_and_an_early_stop(qtbot, tmp_path):
    from mpsstudio.gui.results.run_details import RunDetails

    run = stored_run("mps")
    run.summary = run.summary.replaced(stopped_early_epoch=2, best_epoch=1, monitor="val_accuracy",
                       stopped_early_reason="val_accuracy did not improve for 1 epochs (mode max; best 0.5 at epoch 1)")
    run.config = run.config.changed(keep_best=True)
    run.evaluation = Evaluation(classes=["cat", "dog", "bird"], matrix=[[8, 2, 0], [1, 9, 0], [0, 5, 5]], epoch=1,
                                split="validation")
    d = RunDetails()
    qtbot.addWidget(d)
    d.show_run(run)
    assert "Stopped early after epoch 2: val_accuracy did not improve" in d.title.text()
    assert "Ended with the weights of epoch 1" in d.title.text()
    assert d.class_rows() == [["cat", "10", "8", "80.0 %", "dog"], ["dog", "10", "9", "90.0 %", "cat"],
                              ["bird", "10", "5", "50.0 %", "dog"]]
    assert "73.3 % correct of 30 samples" in d.eval_label.text() and "after epoch 1" in d.eval_label.text()
    assert d.matrix.item(2, 1).text() == "5" and "true bird, predicted dog: 5 (50.0 % of bird)" in \
        d.matrix.item(2, 1).toolTip()
    run.evaluation = None
    d.show_run(run)
    assert d.classes.isHidden() and "No evaluation" in d.eval_label.text()


def test_save_trained_model_copies_the_kept_model_or_says_why_not(qtbot, history, tmp_path):
    from mpsstudio.engine.models import saved as savedmodel

    path, (cpu, mps, _) = history
    w = open_window(qtbot, path)
    kept = tmp_path / "cache" / "m.pt"
    kept.parent.mkdir()

    class Tiny(__import__("torch").nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = __import__("torch").nn.Linear(2, 2)
    savedmodel.save(Tiny(), kept, {"model": "mlp"})
    from types import SimpleNamespace

    w.state.run_has_ended(SimpleNamespace(id=mps.id, summary=RunSummary.made({"saved_model": str(kept)})))  # the last Run kept it
    w.results.select_ids([mps.id])
    out = w.save_trained_model(str(tmp_path / "mine.pt"))
    assert out == str(tmp_path / "mine.pt") and (tmp_path / "mine.json").is_file()
    assert "Saved the trained model to mine.pt and mine.json" in w.statusBar().currentMessage()
    w.results.select_ids([cpu.id])  # a stored run of an earlier Run: its model was not kept
    assert w.save_trained_model(str(tmp_path / "other.pt")) is None
    assert "No trained model to save: only a finished training run of the last Run" in \
        w.statusBar().currentMessage()
    kept.unlink()  # the cache was cleared meanwhile
    w.results.select_ids([mps.id])
    assert w.save_trained_model(str(tmp_path / "again.pt")) is None
    assert "no longer kept" in w.statusBar().currentMessage()
    w.close()


def test_the_advanced_options_for_training_make_the_config(qtbot):
    from mpsstudio.engine.data import datasets
    from mpsstudio.engine.machine import devices
    from mpsstudio.engine.models import registry as models
    from mpsstudio.gui.setup.panel import SetupPanel

    panel = SetupPanel()
    qtbot.addWidget(panel)
    panel.set_catalog(models.list_models(), datasets.list_datasets(), [devices.cpu_device()])
    panel.apply_config(RunConfig(epochs=20, steps=None, early_stop_patience=5, early_stop_monitor="val_loss",
                                 keep_best=True, accumulate=4))
    [cfg] = panel.configs()
    assert (cfg.early_stop_patience, cfg.early_stop_monitor, cfg.early_stop_mode, cfg.keep_best, cfg.accumulate) == \
        (5, "val_loss", None, True, 4)
    assert cfg.monitor_mode == "min"
    panel.training.length_unit.setCurrentIndex(panel.training.length_unit.findData("steps"))
    [cfg] = panel.configs()
    assert cfg.early_stop_patience is None and not cfg.keep_best and cfg.accumulate == 4  # per epoch only
    assert not panel.advanced_section.patience_spin.isEnabled() and "set the length in epochs" in panel.advanced_section.patience_spin.toolTip()
    panel.training.length_unit.setCurrentIndex(panel.training.length_unit.findData("epochs"))
    assert panel.advanced_section.patience_spin.isEnabled() and "Early stopping: end the run" in panel.advanced_section.patience_spin.toolTip()


def test_kept_models_are_this_windows_until_the_next_run_or_quit(qtbot, tmp_path, monkeypatch):
    import os
    import time

    from mpsstudio.engine.basics import paths

    w = MainWindow(store=RunStore(tmp_path / "runs.sqlite3"), keep_spare=False)
    qtbot.addWidget(w)
    folder = paths.cache_dir() / "trained-models"
    folder.mkdir(parents=True)
    other_fresh, other_stale = folder / "99999999-1-0.pt", folder / "99999998-1-0.pt"
    for f in (other_fresh, other_stale):
        f.write_bytes(b"x")
    os.utime(other_stale, (time.time() - 2 * 86_400,) * 2)
    slots = w.trained_models.slots([RunConfig(device="cpu"), RunConfig(device="cpu", mode="inference")])
    assert slots[0].startswith(str(folder / f"{os.getpid()}-")) and slots[1] is None  # inference trains nothing
    assert other_fresh.exists() and not other_stale.exists()  # another window's models are left alone
    open(slots[0], "wb").close()
    w.close()
    assert not os.path.exists(slots[0]) and other_fresh.exists()
