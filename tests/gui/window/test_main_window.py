"""The window end to end (offscreen): loading, runs, stop, close, drops, exports, history, demo."""

from __future__ import annotations

import json

import pytest

pytest.importorskip("PySide6")

from PIL import Image
from PySide6.QtGui import QImage

from mpsstudio.engine.basics.config import RunConfig
from mpsstudio.engine.history.store import RunStore
from mpsstudio.gui.export import MARGIN, export_scale, png_scale
from mpsstudio.gui.window import MainWindow
from mpsstudio.gui.jobs import running_threads
from tests.support.gui import open_window, run_and_wait
from tests.support.gui import SHORT

pytestmark = pytest.mark.usefixtures("no_leftovers")

LONG = RunConfig(model="mlp", dataset="shapes", device="cpu", batch_size=64, steps=10**6, epochs=None, warmup_steps=2)


@pytest.fixture
def window(qtbot):
    w = open_window(qtbot)
    yield w
    w.close()


def test_window_is_disabled_until_pytorch_is_loaded(qtbot):
    w = MainWindow()
    qtbot.addWidget(w)
    w.show()
    assert not w.menus.run_action.isEnabled()
    w.start_loading()
    qtbot.waitUntil(lambda: w.menus.run_action.isEnabled(), timeout=120_000)
    assert "cpu" in w.statusBar().currentMessage()
    w.close()


def test_a_short_cpu_run_fills_the_plots_and_adds_a_row(qtbot, window):
    run_and_wait(qtbot, window, SHORT)
    [result] = window.state.run_ended
    assert result.status == "finished", result.error
    assert [r.id for r in window.results.results()] == [result.id]
    window.plots.redraw()
    loss = window.plots.series(result.id)["loss"]
    assert len(loss.y) == 45  # every step: 5 warm-up + 40 measured
    assert list(loss.y) == pytest.approx(result.losses)
    assert len(window.plots.series(result.id)["throughput"].y) == result.summary.windows
    assert "samples/s" in window.statusBar().currentMessage()


def test_stop_mid_run_keeps_a_cancelled_row(qtbot, window):
    window.setup.apply_config(LONG)
    window.start_run()
    qtbot.waitUntil(lambda: window.progress.value() > 10, timeout=60_000)
    window.stop_run()
    qtbot.waitUntil(lambda: window.state.run_job is None, timeout=10_000)
    [result] = window.state.run_ended
    assert result.status == "cancelled"
    assert window.results.results()[-1].status == "cancelled"
    assert 0 < len(result.losses) < 10**6


def test_closing_mid_run_stops_the_worker_and_keeps_the_run(qtbot, window, tmp_path):
    window.setup.apply_config(LONG)
    window.start_run()
    qtbot.waitUntil(lambda: window.progress.value() > 10, timeout=60_000)
    store_path = window.store.path
    window.close()
    assert running_threads() == []
    [kept] = RunStore(store_path).all()
    assert kept.status == "cancelled"


def make_folder(root, classes=("cats", "dogs"), per_class=4):
    for c in classes:
        (root / c).mkdir(parents=True)
        for i in range(per_class):
            Image.new("RGB", (20 + i, 16), (40 * i, 100, 200)).save(root / c / f"{i}.png")
    return root


def test_dropping_a_class_folder_selects_it(qtbot, window, tmp_path):
    folder = make_folder(tmp_path / "pets")
    window.handle_drop([str(folder)])
    qtbot.waitUntil(lambda: window.setup.configs()[0].dataset == str(folder), timeout=30_000)
    assert "2 classes" in window.banner.text()
    assert "8 images" in window.banner.text()
    summary = window.folders.summary  # what was found, shown before anything runs
    assert summary is not None and summary.isVisible()
    assert [r[:2] for r in summary.plan.classes] == [("cats", 4), ("dogs", 4)] and summary.thumbs_shown == 8
    # one size, said the same way: what the chosen model (mlp) gets, not the folder's own decode size
    assert "resized to 32x32 for mlp" in window.banner.text(), window.banner.text()
    assert "mlp gets every image as 32×32" in summary.text.text()


def test_dropping_text_after_a_model_folder_chooses_it_with_its_tokens(qtbot, window, tmp_path):
    pytest.importorskip("transformers")
    from tests.support import hf_folders

    model = hf_folders.gpt_text_lm(tmp_path / "gpt")
    text = tmp_path / "story.txt"
    text.write_text(hf_folders.PATTERN_TEXT)
    window.handle_drop([str(model)])
    window.handle_drop([str(text)])
    qtbot.waitUntil(lambda: window.setup.configs()[0].dataset == str(text), timeout=60_000)
    banner = window.banner.text()
    assert "training tokens by gpt's tokenizer, packed in sequences of 32" in banner and "Selected" in banner
    line = window.setup.summary_text()
    assert "causal LM, vocabulary 300" in line and "classes" not in line
    assert window.setup.configs()[0].model == str(model)
    assert "the cat sat on the mat" in window.statusBar().currentMessage()  # its first example


@pytest.mark.parametrize("kind", ["file", "text", "two", "flat", "missing"])
def test_a_bad_drop_is_explained_inline(qtbot, window, tmp_path, kind):
    before = window.setup.configs()[0].dataset
    if kind == "file":
        f = tmp_path / "notes.csv"
        f.write_text("hello")
        paths, expect = [str(f)], "is a file"
    elif kind == "text":  # text with a built-in model chosen: it needs a language model folder
        f = tmp_path / "notes.txt"
        f.write_text("hello")
        paths, expect = [str(f)], "is text for a language model: choose its model folder first"
    elif kind == "two":
        paths, expect = [str(make_folder(tmp_path / "a")), str(make_folder(tmp_path / "b"))], "one folder at a time"
    elif kind == "flat":
        flat = tmp_path / "flat"
        flat.mkdir()
        Image.new("RGB", (8, 8)).save(flat / "x.png")
        paths, expect = [str(flat)], "subfolder"
    else:
        paths, expect = [str(tmp_path / "nowhere")], "does not exist"
    window.handle_drop(paths)
    qtbot.waitUntil(lambda: expect in window.banner.text(), timeout=30_000)
    assert "\n" not in window.banner.text()
    assert window.setup.configs()[0].dataset == before


def test_export_comparison_writes_two_pngs_that_are_not_blank(qtbot, window, tmp_path):
    run_and_wait(qtbot, window, SHORT)
    local = window.state.run_ended[0]
    # a CUDA server's run of the same setup, imported from JSON, makes the comparison
    exported = tmp_path / "server.json"
    assert window.results.files.export_json(str(exported), [local.id]) == 1
    doc = json.loads(exported.read_text())
    doc["runs"][0].update(id="server-run", origin="local")
    doc["runs"][0]["config"]["device"] = "cuda:0"
    doc["runs"][0]["env"]["machine_label"] = "NVIDIA H100 80GB HBM3 on gpu-server"
    doc["runs"][0]["summary"]["samples_per_s"] *= 12
    exported.write_text(json.dumps(doc))
    assert window.results.files.import_json(str(exported)) == 1
    window.results.select_ids([local.id, "server-run"])
    assert window.results.comparison_title()[0]
    assert window.export_comparison(str(tmp_path / "none-yet.png")) is not None
    out = window.export_comparison(str(tmp_path / "comparison.png"))
    assert out is not None
    scale = export_scale(window)
    for path in out:
        image = QImage(path)
        assert not image.isNull()
        assert png_scale(path) == scale >= 2  # what the export promises: a Retina-scale picture that says so
        colours = {image.pixel(x, y) for x in range(0, image.width(), 7) for y in range(0, image.height(), 7)}
        assert len(colours) > 20, f"{path} looks blank"
    results_png, plots_png = (QImage(p) for p in out)
    assert plots_png.width() == round(scale * (window.plots.width() + 2 * MARGIN))  # the plots as on screen
    assert results_png.width() >= scale * (720 + 2 * MARGIN)  # the comparison sheet is at least 720 px wide
    # the Runs tab's button and File > Export Comparison… (⌘E) are one export: the comparison and its curves
    button = tmp_path / "from-the-button.png"
    window.results.files.save_path = lambda *a: str(button)
    window.results.run_actions.png.trigger()
    assert button.exists() and (tmp_path / "from-the-button-plots.png").exists()


def test_runs_survive_into_a_fresh_window(qtbot, window):
    from mpsstudio.engine.process import journal

    from tests.support.journals import journal_events, gone_pid, journal_of

    run_and_wait(qtbot, window, SHORT)
    run_id = window.state.run_ended[0].id
    assert list(journal.folder().iterdir()) == []  # its journal went once the run was handed on
    window.close()
    journal_of(journal.folder(), journal_events(), pid=gone_pid())  # a window killed mid-run left this
    again = MainWindow()
    qtbot.addWidget(again)
    again.show()
    runs = {r.id: r.status for r in again.results.results()}
    assert runs[run_id] == "finished" and runs["a" * 32] == "interrupted"
    assert "1 run in progress when MPS Studio last ended is kept as interrupted" in again.banner.text()
    again.close()


def test_a_folder_opened_before_pytorch_loads_is_checked_once_it_has(qtbot, tmp_path):
    folder = make_folder(tmp_path / "early")
    w = MainWindow()
    qtbot.addWidget(w)
    w.show()
    w.handle_drop([str(folder)])  # e.g. dropped on the Dock icon while the app starts
    assert "as soon as PyTorch has loaded" in w.banner.text()
    w.start_loading()
    qtbot.waitUntil(lambda: w.state.catalog is not None and w.setup.configs()[0].dataset == str(folder), timeout=120_000)
    w.close()


def test_a_setup_that_cannot_run_gets_one_sentence_and_no_row(qtbot, window, tmp_path):
    """Bad input found before any run (here a batch larger than the dataset) is a banner, not a failed run."""
    window.setup.apply_config(RunConfig(model="mlp", dataset="shapes", device="cpu", batch_size=60_000, steps=5,
                                        epochs=None, warmup_steps=1))
    window.start_run()
    qtbot.waitUntil(lambda: window.state.run_job is None, timeout=60_000)
    assert "fewer than one batch of 60,000" in window.banner.text()
    assert "\n" not in window.banner.text()
    assert window.state.run_ended == () and window.results.results() == []
    assert window.menus.run_action.isEnabled()  # ready for the next try


def test_repeat_runs_the_devices_interleaved_and_tags_each_round(qtbot, window):
    window.setup.advanced_section.repeat_spin.setValue(2)
    run_and_wait(qtbot, window, SHORT)
    assert [r.env["repeat"]["round"] for r in window.state.run_ended] == [1, 2]
    assert all(r.status == "finished" for r in window.state.run_ended)
    kept = {r.id: r for r in window.store.all()}
    assert all(kept[r.id].env["repeat"]["rounds"] == 2 for r in window.state.run_ended)


def test_launch_benchmark_probes_estimates_and_runs_only_when_the_user_says_so(qtbot, window, monkeypatch):
    from mpsstudio.engine.tools import launch
    from tests.support.data import small_images

    small_images(monkeypatch)
    full = launch.plan
    monkeypatch.setattr(launch, "plan", lambda devices: full(devices, ["resnet50"], ["inference"], steps=1, warmup=0))
    questions = []
    answers = iter([True, False])  # estimate, then decline to start

    def ask(title, text, yes):
        questions.append(text)
        return next(answers)
    monkeypatch.setattr(window, "ask", ask)
    window.launch_benchmark()
    qtbot.waitUntil(lambda: len(questions) == 2, timeout=180_000)
    assert "ResNet50 (batch 128)" in questions[0] and "Estimated time" in questions[1] and "cpu: about" in questions[1]
    qtbot.waitUntil(lambda: window.state.run_job is None, timeout=60_000)
    assert window.store.all() == []  # the probe's runs are not kept, and nothing started

    answers = iter([True, True])
    questions.clear()
    window.launch_benchmark()
    qtbot.waitUntil(lambda: len(questions) == 2, timeout=180_000)
    qtbot.waitUntil(lambda: window.state.run_job is None and bool(window.store.all()), timeout=180_000)
    [run] = window.store.all()
    assert (run.config.model, run.config.batch_size, run.config.mode) == ("resnet50", 128, "inference")


def test_a_run_whose_loss_becomes_nan_draws_what_it_measured(qtbot, window):
    bad = RunConfig(model="mlp", dataset="shapes", device="cpu", batch_size=64, steps=60, epochs=None,
                    warmup_steps=2, lr=1000.0)
    run_and_wait(qtbot, window, bad)
    [result] = window.state.run_ended
    assert result.status == "failed" and "became NaN" in result.error and "lower the learning rate" in result.error
    assert "fp32" not in result.error  # the advice fits an fp32 run
    assert window.plots.run_ids() == [result.id]  # drawn from what was kept, the failing window included
    loss = window.plots.series(result.id)["loss"]
    assert len(loss) == len(result.losses) > 0
    assert "became NaN" in window.banner.text()
    run_and_wait(qtbot, window, SHORT)
    assert "became NaN" not in window.banner.text()  # the next run clears the last one's failure


def test_garbage_is_collected_in_the_gui_thread_only(qapp):
    """A collection in a worker thread that frees a Qt object deadlocks PySide (gui/collector.py): the app turns the
    automatic collector off and collects from a GUI-thread timer, by generation, as Python would."""
    import gc

    from mpsstudio.gui import collector

    made = collector.MainThreadCollector(qapp)
    try:
        assert not gc.isenabled() and made.timer.isActive() and made.thresholds == gc.get_threshold()
        cycle = [[]]
        cycle[0].append(cycle)
        freed = []
        import weakref

        class Node:
            pass
        node = Node()
        node.self = node
        weakref.finalize(node, lambda: freed.append(True))
        del node, cycle
        made.thresholds = (0, 0, 0)  # every count is past its threshold: the next check collects everything
        made.check()
        assert freed == [True]
    finally:
        made.timer.stop()
        made.deleteLater()
