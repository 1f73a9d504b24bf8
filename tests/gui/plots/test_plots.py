"""LivePlots: buffers that grow by doubling, data reaching the curves only on redraw, legend, clear, timer."""

import numpy as np
import pytest

pytest.importorskip("pytestqt")

from PySide6.QtCore import Qt

from mpsstudio.gui.plots import EMA_ALPHA, GrowingSeries, LivePlots
from mpsstudio.gui.plots.axes import BytesAxis as _BytesAxis, StepAxis as _StepAxis


@pytest.fixture
def plots(qtbot):
    widget = LivePlots()
    qtbot.addWidget(widget)  # closed and deleted after the test, which stops its timer
    widget.resize(900, 650)
    return widget


def count_set_data(curve):
    """Wrap one curve's setData so a test can count how often it is called."""
    calls = []
    original = curve.setData

    def wrapper(*args, **kwargs):
        calls.append(args)
        return original(*args, **kwargs)

    curve.setData = wrapper
    return calls


def data(curve):
    """The full data a curve holds (getData would give the clipped, downsampled view)."""
    if curve.xData is None:
        return np.array([]), np.array([])
    return curve.xData, curve.yData


# ---- GrowingSeries ----------------------------------------------------------------------------------


def test_growing_series_keeps_values_and_order_across_doublings():
    s = GrowingSeries(capacity=4)
    expected_x, expected_y = [], []
    for i in range(10):  # chunks of 1..10 points: 55 points, capacity 4 -> 8 -> 16 -> 32 -> 64
        xs = list(range(len(expected_x), len(expected_x) + i + 1))
        ys = [v * 0.5 - 3 for v in xs]
        s.append(xs, ys)
        expected_x += xs
        expected_y += ys
        assert s.capacity < 2 * len(s) + 4
    assert len(s) == 55
    assert s.capacity == 64
    np.testing.assert_array_equal(s.x, expected_x)
    np.testing.assert_array_equal(s.y, expected_y)


def test_growing_series_scalar_append_and_mismatch():
    s = GrowingSeries(capacity=1)
    s.append(3, 7.5)
    s.append(4, 8.5)
    np.testing.assert_array_equal(s.x, [3, 4])
    assert s.last_y() == 8.5
    with pytest.raises(ValueError):
        s.append([1, 2], [1])


def test_growing_series_million_points_stay_bounded():
    s = GrowingSeries()
    chunk = np.arange(1000, dtype=np.float64)
    for i in range(1000):
        s.append(chunk + i * 1000, chunk)
    assert len(s) == 1_000_000
    assert s.capacity < 2 * len(s) + 1024
    # both buffers together: at most ~2x the 16 MB of data
    assert s.x.base.nbytes + s.y.base.nbytes <= 2 * 16_000_000 * 1.1
    assert s.x[-1] == 999_999 and s.y[-1] == 999 and s.x[123_456] == 123_456


# ---- data reaches the curves ------------------------------------------------------------------------


def fill_one_run(plots):
    plots.start_run("r1", "cpu", warmup_steps=3)
    plots.add_warmup("r1", [1.0, 2.0, 3.0])
    plots.add_window("r1", 4, [0.9, 0.8], samples_per_s=1500.0, memory=300_000_000)
    plots.add_window("r1", 6, [0.7, 0.6, 0.5], samples_per_s=2500.0, memory=310_000_000)


def test_redraw_puts_appended_steps_and_losses_on_the_curves(plots):
    fill_one_run(plots)
    plots.redraw()
    curves = plots.curves("r1")
    x, y = data(curves["loss"])
    np.testing.assert_array_equal(x, [1, 2, 3, 4, 5, 6, 7, 8])
    np.testing.assert_allclose(y, [1.0, 2.0, 3.0, 0.9, 0.8, 0.7, 0.6, 0.5])
    x, y = data(curves["throughput"])
    np.testing.assert_array_equal(x, [5, 8])  # each window's last step
    np.testing.assert_array_equal(y, [1500.0, 2500.0])
    x, y = data(curves["memory"])
    np.testing.assert_array_equal(x, [5, 8])
    np.testing.assert_array_equal(y, [300_000_000, 310_000_000])
    assert plots.run_ids() == ["r1"]
    assert set(plots.series("r1")) == {"loss", "loss_smooth", "throughput", "memory", "memory_driver",
                                       "memory_process", "swap_used", "power"}


def test_smoothed_loss_is_the_exponential_moving_average(plots):
    assert EMA_ALPHA == 0.05
    fill_one_run(plots)
    plots.redraw()
    _, smooth = data(plots.curves("r1")["loss_smooth"])
    # by hand: 1.0; 1.0 + 0.05 * (2 - 1) = 1.05; 1.05 + 0.05 * (3 - 1.05) = 1.1475; then 0.9 ...
    assert smooth[0] == pytest.approx(1.0)
    assert smooth[1] == pytest.approx(1.05)
    assert smooth[2] == pytest.approx(1.1475)
    assert smooth[3] == pytest.approx(1.1475 + 0.05 * (0.9 - 1.1475))
    # the incremental EMA over three calls equals one computed over the whole series
    losses = plots.series("r1")["loss"].y
    ema = [losses[0]]
    for v in losses[1:]:
        ema.append(ema[-1] + EMA_ALPHA * (v - ema[-1]))
    np.testing.assert_allclose(smooth, ema)


def test_nan_loss_is_drawn_as_a_gap_and_does_not_poison_the_smoothed_line(plots):
    plots.start_run("r1", "mps", 0)
    plots.add_window("r1", 1, [1.0, float("nan"), 2.0], 100.0, 0)
    smooth = plots.series("r1")["loss_smooth"].y
    np.testing.assert_allclose(smooth, [1.0, 1.0, 1.05])


def test_validation_loss_is_a_marker_on_the_loss_plot(plots):
    plots.start_run("r1", "cpu", 0)
    plots.add_window("r1", 1, [1.0] * 10, 100.0, 0)
    plots.add_epoch("r1", 10, 0.75)
    plots.add_epoch("r1", 20, None)  # no validation set: nothing drawn
    plots.redraw()
    val = plots.curves("r1")["val"]
    x, y = data(val)
    np.testing.assert_array_equal(x, [10])
    np.testing.assert_array_equal(y, [0.75])
    assert val.opts["symbol"] == "d" and val.opts["pen"].style() == Qt.PenStyle.NoPen


def test_events_for_unknown_runs_are_ignored(plots):
    plots.add_warmup("nope", [1.0])
    plots.add_window("nope", 1, [1.0], 1.0, 1)
    plots.add_epoch("nope", 1, 1.0)
    plots.finish_run("nope", "failed")
    plots.redraw()
    assert plots.run_ids() == []


# ---- redraw only from the timer ---------------------------------------------------------------------


def test_calls_do_not_redraw_and_idle_redraw_sets_nothing(plots):
    plots.start_run("r1", "cpu", 3)
    curves = plots.curves("r1")
    calls = {key: count_set_data(curve) for key, curve in curves.items()}
    plots.add_warmup("r1", [1.0, 2.0, 3.0])
    plots.add_window("r1", 4, [0.9, 0.8], 1500.0, 300_000_000,
                     lines={"memory_driver": 400_000_000, "memory_process": None, "swap_used": None})
    plots.add_epoch("r1", 5, 0.85)
    assert all(len(c) == 0 for c in calls.values())
    assert len(data(curves["loss"])[0]) == 0  # nothing on screen yet

    plots.redraw()
    assert {key: len(c) for key, c in calls.items()} == {
        "loss": 1, "loss_smooth": 1, "throughput": 1, "memory": 1, "val": 1, "power": 0, "memory_driver": 1,
        "memory_process": 0, "swap_used": 0,  # lines a window did not read are not drawn
    }
    plots.redraw()  # nothing new
    assert sum(len(c) for c in calls.values()) == 6

    plots.add_window("r1", 6, [0.7], 1600.0, 300_000_000)
    plots.redraw()  # only the changed series are pushed again; validation did not change
    assert {key: len(c) for key, c in calls.items()} == {
        "loss": 2, "loss_smooth": 2, "throughput": 2, "memory": 2, "val": 1, "power": 0, "memory_driver": 1,
        "memory_process": 0, "swap_used": 0,
    }


def test_timer_backs_off_when_drawing_is_expensive(plots):
    plots.start_run("r1", "cpu", 0)
    calls = count_set_data(plots.curves("r1")["loss"])
    plots.redraws.tick()  # nothing to draw yet
    assert calls == []
    plots.add_window("r1", 1, [1.0], 10.0, 1)
    plots._view.last_paint_s = 0.5  # as if the last paint of a huge run took half a second
    plots.redraws.tick()
    assert len(calls) == 1
    plots.add_window("r1", 2, [0.9], 10.0, 1)
    plots.redraws.tick()  # too soon: drawing would take more than a third of the GUI thread
    assert len(calls) == 1
    plots.redraws.next_at = 0.0
    plots.redraws.tick()
    assert len(calls) == 2


def test_curves_use_downsampling_clipping_and_thin_pens(plots):
    plots.start_run("r1", "cpu", 0)
    for key in ("loss", "loss_smooth", "throughput", "memory"):
        curve = plots.curves("r1")[key]
        assert curve.opts["autoDownsample"] is True
        assert curve.opts["downsampleMethod"] == "peak"
        assert curve.opts["clipToView"] is True
        assert curve.opts["pen"].width() <= 1


def test_timer_redraws_while_shown(plots, qtbot):
    plots.show()
    qtbot.waitExposed(plots)
    assert plots.timer_active()
    plots.start_run("r1", "cpu", 0)
    plots.add_window("r1", 1, [1.0, 0.5], 10.0, 1)
    qtbot.waitUntil(lambda: len(data(plots.curves("r1")["loss"])[0]) == 2, timeout=2000)


# ---- legend, colours, status, clear -----------------------------------------------------------------


def test_two_runs_get_two_colours_and_legend_entries(plots):
    plots.start_run("a", "cpu", 10)
    plots.start_run("b", "mps", 10)
    colour_a = plots.curves("a")["loss_smooth"].opts["pen"].color()
    colour_b = plots.curves("b")["loss_smooth"].opts["pen"].color()
    assert colour_a.name() != colour_b.name()
    # the faint raw line is the same hue as the smoothed line, only more transparent
    raw_a = plots.curves("a")["loss"].opts["pen"].color()
    assert raw_a.name() == colour_a.name() and raw_a.alphaF() < colour_a.alphaF()
    labels = [label.text for _, label in plots._legend.items]
    assert labels == ["cpu", "mps"]


def test_cancelled_run_is_dashed_and_says_so_in_the_legend(plots):
    plots.start_run("a", "cpu", 0)
    plots.start_run("b", "cuda:0 (imported)", 0)
    plots.finish_run("a", "finished")
    plots.finish_run("b", "cancelled")
    labels = [label.text for _, label in plots._legend.items]
    assert labels == ["cpu", "cuda:0 (imported) — cancelled"]
    assert plots.curves("a")["loss_smooth"].opts["pen"].style() == Qt.PenStyle.SolidLine
    assert plots.curves("b")["loss_smooth"].opts["pen"].style() == Qt.PenStyle.DashLine


def test_clear_removes_everything_and_shows_the_hint(plots):
    assert plots.hint_visible()
    fill_one_run(plots)
    plots.add_epoch("r1", 8, 0.55)
    plots.redraw()
    assert not plots.hint_visible()
    assert len(plots._warmup_regions) == 1
    loss_plot_items = len(plots._loss.listDataItems())
    assert loss_plot_items == 3  # raw, smoothed, validation

    plots.clear()
    assert plots.run_ids() == []
    assert plots.hint_visible()
    assert plots._loss.listDataItems() == []
    assert plots._throughput.listDataItems() == [] and plots._memory.listDataItems() == []
    assert plots._warmup_regions == {} and plots._legend.items == []
    with pytest.raises(KeyError):
        plots.series("r1")

    # colours start over: the first run after clear gets the first colour again
    plots.start_run("again", "cpu", 0)
    assert not plots.hint_visible()
    first = plots.curves("again")["loss_smooth"].opts["pen"].color().name()
    plots.clear()
    plots.start_run("x", "cpu", 0)
    assert plots.curves("x")["loss_smooth"].opts["pen"].color().name() == first


def test_warmup_band_is_fixed_and_labelled(plots):
    plots.start_run("r1", "cpu", 10)
    plots.add_warmup("r1", [2.3] * 10)
    (region,) = plots._warmup_regions.values()
    assert region.getRegion() == (0.5, 10.5)
    assert not region.movable
    labels = [c for line in region.lines for c in line.childItems() if hasattr(c, "textItem")]
    assert [label.textItem.toPlainText() for label in labels] == ["warm-up"]


def test_closing_stops_the_timer(plots, qtbot):
    plots.show()
    qtbot.waitExposed(plots)
    assert plots.timer_active()
    plots.close()
    assert not plots.timer_active()


def test_hiding_stops_the_timer(plots, qtbot):
    plots.show()
    qtbot.waitExposed(plots)
    plots.hide()
    assert not plots.timer_active()


# ---- axis labels --------------------------------------------------------------------------------------


def test_axes_format_numbers_for_humans(qapp):
    steps = _StepAxis("bottom")
    assert steps.tickStrings([0, 5000, 12000], 1.0, 5000) == ["0", "5,000", "12,000"]
    assert steps.tickStrings([1.5, 2.0], 1.0, 0.5) == ["1.5", "2.0"]
    memory = _BytesAxis("left")
    gib, mib = 1024**3, 1024**2  # IEC units, as in the table, the CLI and the CSV
    assert memory.tickStrings([0, 0.5 * gib, gib, 1.5 * gib], 1.0, 0.5 * gib) == ["0", "0.5 GiB", "1.0 GiB", "1.5 GiB"]
    assert memory.tickStrings([100 * mib, 200 * mib, 300 * mib], 1.0, 100 * mib) == ["100 MiB", "200 MiB", "300 MiB"]
    # ticks fall on round numbers of the unit, not on round numbers of bytes
    [(major, _), *_] = memory.tickSpacing(0, 900 * mib, 300)
    assert (major / mib) == round(major / mib) and (major / mib) % 50 == 0


def test_dark_palette_gives_dark_background_and_visible_colours(plots):
    from PySide6.QtGui import QColor, QPalette

    palette = QPalette(plots.palette())
    palette.setColor(QPalette.ColorRole.Base, QColor("#1e1e1e"))
    palette.setColor(QPalette.ColorRole.Text, QColor("#e6e6e6"))
    plots.setPalette(palette)  # a PaletteChange event re-themes the plots
    assert plots._view.backgroundBrush().color().name() == "#1e1e1e"
    assert plots._loss.getAxis("left").textPen().color().name() == "#e6e6e6"
    plots.start_run("r1", "cpu", 0)
    assert plots.curves("r1")["loss_smooth"].opts["pen"].color().name() == "#56b4e9"  # sky blue, not dark blue


def test_importing_the_plots_does_not_import_torch():
    import subprocess
    import sys

    code = "import sys, mpsstudio.gui.plots; sys.exit('torch' in sys.modules)"
    assert subprocess.run([sys.executable, "-c", code], timeout=60).returncode == 0


def test_clicking_a_run_in_the_legend_hides_all_its_curves(plots):
    plots.start_run("a", "cpu", 0)
    plots.start_run("b", "mps", 0)
    smooth = plots.curves("a")["loss_smooth"]
    smooth.setVisible(False)  # what the legend sample does on click, before it emits sigSampleClicked
    plots._legend.sigSampleClicked.emit(smooth)
    assert not any(c.isVisible() for c in plots.curves("a").values())
    assert all(c.isVisible() for k, c in plots.curves("b").items() if k != "power")  # (no power plot: no readings)
    assert plots.curves("b")["power"].isVisibleTo(plots._power)


def test_power_lands_on_its_own_plot_only_when_measured(plots):
    plots.start_run("r", "cuda:0", 0)
    plots.add_window("r", 1, [2.0, 1.9], 1000.0, 1 << 20)  # inside an energy span: no power yet
    plots.add_window("r", 3, [1.8], 1000.0, 1 << 20, 423.5)
    plots.add_window("r", 4, [1.7], 1000.0, 1 << 20, float("nan"))  # never drawn
    plots.redraw()
    x, y = data(plots.curves("r")["power"])
    assert list(x) == [3.0] and list(y) == [423.5]


def test_no_power_plot_without_readings_and_a_note_saying_why(plots):
    plots.start_run("r", "cpu", 0)
    plots.set_power_note("Power of cpu not measured: no energy counter readable on this Linux VM")
    assert not plots.power_shown()  # no empty frame: the other plots get its room
    assert "Linux VM" in plots.power_note()
    assert plots._memory.getAxis("bottom").label.isVisible()  # the step axis moves to the lowest plot shown
    plots.add_window("r", 1, [2.0], 10.0, 0, 15.0)
    assert plots.power_shown() and plots.power_note() == ""  # a reading brings the plot back
    assert not plots._memory.getAxis("bottom").label.isVisible()
    plots.clear()
    assert not plots.power_shown() and plots.power_note() == ""


def test_the_tokens_axis_places_a_token_models_steps_at_its_real_tokens(plots):
    """The engine says a step's real tokens (Started.tokens_per_step); the tokens axis is steps times that, the
    readout says the tokens, and an image model's run takes the axis back to steps (it has no tokens to place)."""
    plots.start_run("lm", "cpu", 3, tokens_per_step=96.5)
    plots.add_warmup("lm", [3.0, 2.9, 2.8], 0.3)
    plots.add_window("lm", 4, [2.7, 2.6, 2.5, 2.4], 10.0, 1000, seconds=0.4)
    plots.set_x_axis("tokens")
    assert plots.x_axis() == "tokens" and plots._controls.x_box.currentText() == "Tokens"
    plots.redraw()
    x, _ = data(plots.curves("lm")["loss"])
    np.testing.assert_allclose(x, [96.5 * s for s in range(1, 8)])
    np.testing.assert_allclose(data(plots.curves("lm")["throughput"])[0], [96.5 * 7])
    assert "Training tokens" in plots._memory.getAxis("bottom").labelText
    assert "cpu: step 5 loss 2.6 at 482 tokens" in plots.readout(5 * 96.5)
    plots.start_run("img", "mps", 3)  # no tokens a step: the axis cannot place it
    assert plots.x_axis() == "step"
    plots.set_x_axis("tokens")  # refused while it is drawn
    assert plots.x_axis() == "step" and plots._controls.x_box.currentText() == "Step"
    assert not plots._controls.x_box.model().item(2).isEnabled()
    plots.clear()
    assert plots._controls.x_box.model().item(2).isEnabled()


def test_runs_at_two_sequence_lengths_are_told_apart_in_the_legend():
    from mpsstudio.engine.basics.config import RunConfig
    from mpsstudio.engine.basics.results import RunResult
    from mpsstudio.gui.plots.stored import legend_labels

    runs = [RunResult(config=RunConfig(model="tiny_gpt", input_shape=shape)) for shape in ([32], [64], None)]
    assert legend_labels(runs) == ["cpu · 32 tokens", "cpu · 64 tokens", "cpu · model's input"]
    assert legend_labels(runs[:1]) == ["cpu"]
