"""Scaling over GPUs (engine analysis/scaling.py): the figures, the verdicts, the runs beside it, imported and kept
like runs, and the window's GPUs field and scaling chart."""

from __future__ import annotations


import pytest

from mpsstudio.engine.analysis.scaling import scaling_of, scalings
from mpsstudio.engine.basics.results import RunResult, WindowRow
from tests.support.gui import open_panel
from tests.support.runs import MAC, make_run
from tests.support.paths import ROOT

SERVER = {"machine_label": "4x NVIDIA H100 80GB HBM3 on gpu-box", "hostname": "gpu-box", "torch": "2.11.0"}
DOCS_RUNS = ROOT / "docs" / "runs" / "gpus-h100x2.json"


def on_gpus(n: int, sps: float, comm: float | None = None, created="2026-11-21T08:00:00+00:00", spread=0.01):
    run = make_run("cuda", sps, created=created, env=SERVER, gpus=n, model="resnet50", dataset="synthetic")
    run.windows = [WindowRow(samples_per_s=sps * f) for f in (1 - spread, 1 + spread) * 20]
    run.summary = run.summary.replaced(samples_per_s_q1=sps * (1 - spread), samples_per_s_q3=sps * (1 + spread))
    if n > 1:
        run.summary = run.summary.replaced(ranks_world=n, ranks=[{"rank": r, "peak_memory": 6 << 30} for r in range(n)])
    if comm is not None:
        run.summary = run.summary.replaced(communication={"share": comm, "low": comm - 0.01, "high": comm + 0.02,
                                                          "pairs": 6, "method": "median and range of 6 alternated pairs"})
    return run


def test_efficiency_speedup_and_the_all_reduce_share_are_said_with_intervals():
    runs = [on_gpus(1, 1000.0), on_gpus(2, 1900.0, 0.05), on_gpus(4, 3710.0, 0.06)]
    found = scaling_of(runs)
    assert [p.gpus for p in found.points] == [1, 2, 4]
    top = found.points[-1]
    assert top.speedup == pytest.approx(3.71) and top.efficiency == pytest.approx(3.71 / 4)
    assert top.low < 3.71 < top.high and top.efficiency_interval[0] == pytest.approx(top.low / 4)
    assert found.verdict().startswith("4 GPUs train resnet50 3.71x [")
    assert "faster than one (93 % efficiency [" in found.verdict() and "the all-reduce takes 6 % of a step" in \
        found.verdict()
    headers, rows = found.table()
    assert headers[0] == "GPUs" and [r[0] for r in rows] == ["1", "2", "4"]
    assert rows[2][2] == "928" and rows[2][6] == ", ".join(["6.0 GiB"] * 4)  # per GPU; memory per rank


def test_a_second_gpu_that_gains_nothing_is_said_so():
    found = scaling_of([on_gpus(1, 1000.0), on_gpus(2, 1020.0, 0.45)])
    assert found.verdict().startswith("more GPUs gain nothing here: 2 train resnet50 1.02x [")
    assert "try a larger batch per GPU" in found.verdict()


def test_more_than_n_times_one_gpu_is_said_to_be_suspect():
    found = scaling_of([on_gpus(1, 100.0), on_gpus(2, 2000.0)])
    assert "More than 2 times one GPU is rare: check that the one-GPU run was not slowed" in found.verdict()


def test_without_a_one_gpu_run_it_says_what_to_run():
    found = scaling_of([on_gpus(2, 1900.0)])
    assert found.one is None and "run --gpus 1,2 for the speedup over one" in found.verdict()
    assert scaling_of([on_gpus(1, 1000.0)]) is None  # one GPU alone is no scaling


def test_a_mac_run_of_the_same_setup_stands_beside_the_servers_gpus():
    mac = make_run("mps", 420.0, env=MAC, model="resnet50", dataset="synthetic")
    other_setup = make_run("mps", 99.0, env=MAC, model="resnet18", dataset="synthetic")
    found = scaling_of([on_gpus(1, 1000.0), on_gpus(2, 1900.0), mac, other_setup])
    assert found.beside == [mac]
    (sentence,) = found.beside_sentences()
    assert "mps: 420 samples/s, 0.42x one GPU here" in sentence
    assert found.table()[1][-1][0].startswith("mps · ")


def test_failed_runs_and_other_setups_or_machines_make_no_point():
    failed = on_gpus(4, 3000.0)
    failed.status = "failed"
    elsewhere = on_gpus(2, 1800.0)
    elsewhere.env = {**SERVER, "hostname": "other-box"}
    found = scalings([on_gpus(1, 1000.0), on_gpus(2, 1900.0), failed, elsewhere])
    assert sorted(len(s.points) for s in found) == [1, 2]  # the other machine's 2 GPUs: a scaling of its own


def test_the_lent_machines_runs_import_as_a_scaling(tmp_path):
    """docs/runs/gpus-h100x2.json: `bench --gpus 1,2` on two lent H100s, exported and read back as runs are."""
    from mpsstudio.engine.history.runfiles import export_json, import_json

    runs = import_json(DOCS_RUNS)
    found = scaling_of(runs)
    assert [p.gpus for p in found.points] == [1, 2]
    assert found.points[1].run.config.gpus == 2 and found.points[1].communication is not None
    assert len(found.points[1].rank_memory) == 2
    back = tmp_path / "again.json"
    export_json(runs, back)
    assert [r.config.gpus for r in import_json(back)] == [1, 2]
    from mpsstudio.engine.report import parts, render

    text = render.to_markdown(parts.report(parts.run_parts(runs[1], runs), runs=runs))
    assert "## Scaling over GPUs: resnet50 on synthetic, batch 128 per GPU" in text
    # its 2-GPU windows dip now and then (~7,160, down to ~6,000) with no trend beyond chance: steady throughout
    assert "1.86x [1.81-1.90] faster than one (93 % efficiency [90-95])" in text and "| 2 | 6,979 [" in text
    assert "steady from" not in text and "not steady" not in text


def test_the_window_shows_the_gpus_field_only_where_there_are_several(qtbot):
    from mpsstudio.engine.machine.devices import Device
    from mpsstudio.engine.models import registry as models
    from mpsstudio.engine.data import datasets
    from mpsstudio.gui.setup.panel import SetupPanel

    cpu = Device("cpu", "cpu", True, name="a CPU")
    gpus = [Device(f"cuda:{i}", "cuda", True, name="NVIDIA H100") for i in range(4)]
    setup = SetupPanel()
    qtbot.addWidget(setup)
    setup.set_catalog(models.list_models(), datasets.list_datasets(), [cpu, gpus[0]])
    assert setup.gpus.row.isHidden() and setup.gpus.counts() == []
    setup.set_catalog(models.list_models(), datasets.list_datasets(), [cpu, *gpus])
    assert not setup.gpus.row.isHidden()
    assert [setup.gpus.combo.itemText(i) for i in range(setup.gpus.combo.count())] == [
        "1 (one GPU per run)", "2 at once (DDP)", "3 at once (DDP)", "4 at once (DDP)", "Scaling: 1, 2, 4"]
    for row in setup.devices.rows:
        row.checkbox.setChecked(row.device.id in ("cpu", "cuda:0", "cuda:1"))
    assert [c.device for c in setup.configs()] == ["cpu", "cuda:0", "cuda:1"]  # one GPU per run: as before
    setup.gpus.combo.setCurrentIndex(4)
    setup._update_button()
    assert [(c.device, c.gpus) for c in setup.configs()] == [("cpu", 1), ("cuda", 1), ("cuda", 2), ("cuda", 4)]
    assert setup.footer.run_button.text() == "Scale over 1, 2, 4 GPUs + 1 device"
    setup.gpus.combo.setCurrentIndex(1)
    setup._update_button()
    assert [(c.device, c.gpus) for c in setup.configs()] == [("cpu", 1), ("cuda", 2)]
    assert setup.footer.run_button.text() == "Run on 2 GPUs + 1 device"


def test_the_runs_tab_shows_a_scaling_with_its_chart(qtbot, store):
    mac = make_run("mps", 420.0, env=MAC, model="resnet50", dataset="synthetic", created="2026-11-20T08:00:00+00:00")
    runs = [on_gpus(1, 1000.0, created="2026-11-21T08:00:00+00:00"),
            on_gpus(2, 1900.0, 0.05, created="2026-11-21T08:01:00+00:00"), mac]
    panel = open_panel(qtbot, store, runs)
    panel.select_ids([runs[1].id])
    combo = panel.compare_combo
    assert combo.currentData() == "scaling"  # a run on several GPUs: its scaling first
    chart = panel.scaling_chart
    assert panel._chart_stack.currentWidget() is chart
    assert chart.points() == [(1, 1000.0), (2, 1900.0)]
    assert "2 GPUs train resnet50 1.90x [" in chart.headline.text()
    assert "0.42x one GPU here" in chart.details.text()
    panel.select_ids([runs[0].id])  # the one-GPU run is part of it too, but not shown first
    assert "scaling" in [combo.itemData(i) for i in range(combo.count())]
    assert isinstance(runs[0], RunResult)


def test_runs_on_one_and_two_gpus_compared_name_the_gpus_not_torchruns_thread_setting():
    from mpsstudio.engine.analysis import contrast

    one, two = on_gpus(1, 1000.0), on_gpus(2, 1900.0)
    one.env, two.env = {**one.env, "threads": 8}, {**two.env, "threads": 1, "env": {"OMP_NUM_THREADS": "1"}}
    c = contrast.of_runs([one, two])
    (sentence,) = c.sentences()
    assert sentence.startswith("GPUs (ranks) 2 is 90 % faster [") and "nothing else differs" in sentence
    assert contrast.table(c).rows[1][3] == "cuda \u00d72"


def _windowed(run, rates, steps_each=3):
    run.windows = [WindowRow(samples_per_s=v, steps=steps_each) for v in rates]
    run.summary = run.summary.replaced(measured_steps=steps_each * len(rates))
    return run


def test_a_short_run_whose_windows_still_fall_is_too_short_to_tell():
    """The lent H200s' case: 2-GPU windows from ~7,400 falling to ~5,600 through a 60-step run."""
    falling = [7400 - 60 * i for i in range(30)]
    runs = [on_gpus(1, 4392.0), _windowed(on_gpus(2, 6068.0, 0.23), falling, steps_each=2)]
    found = scaling_of(runs)
    two = found.points[1]
    assert not two.steady and found.points[0].steady
    verdict = found.verdict()
    assert verdict.startswith("Too short to tell the scaling: on 2 GPUs its windows fell from 7,1")
    assert "run again with --steps 160 or more (an estimate)" in verdict and "not a verdict" in verdict
    assert "efficiency" not in verdict
    assert found.table()[1][1][1].endswith("(not steady)")


def test_level_but_scattered_windows_are_too_noisy_to_tell_the_scaling():
    """The lent H200s' 60-step run (docs/benchmarks.md): 2-GPU windows between 6,000 and 7,600 with no trend, so
    steady by the trend test, read 76 % efficiency where the bare DDP loop measured 93 %; the verdict says it cannot
    tell. The 150-step run of the same call (±2.6 %) is a verdict."""
    h200_60 = [3349, 7562, 7140, 6633, 6311, 6342, 6326, 6395, 6555, 6442, 6775, 6006, 6422, 6972, 7060, 7096,
               7033, 7185, 7379, 7624, 7153, 6456, 6594]
    runs = [on_gpus(1, 4377.0), _windowed(on_gpus(2, 6633.0, 0.11), [float(v) for v in h200_60])]
    found = scaling_of(runs)
    two = found.points[1]
    assert two.steady and two.noisy and not two.trusted
    verdict = found.verdict()
    assert verdict.startswith("Too short to tell the scaling: on 2 GPUs its windows spread ±5.")
    assert "beyond the ±5 % limit" in verdict and "(its 69 measured steps); run again with --steps 180 or more" in verdict
    assert "efficiency" not in verdict and found.table()[1][1][1].endswith("(too noisy)")
    level = [8390.0 * f for f in (0.974, 1.0, 1.0, 0.96, 1.0, 0.99) * 8]
    found = scaling_of([on_gpus(1, 4381.0), _windowed(on_gpus(2, 8285.0, 0.04), level)])
    assert found.points[1].trusted and found.verdict().startswith("2 GPUs train resnet50 1.89x")


def test_a_run_that_settles_is_measured_from_its_steady_windows():
    settling = [7600, 7400, 7200, 7000, 6800, 6600] + [6000 * f for f in (0.99, 1.01) * 12]
    runs = [on_gpus(1, 3100.0), _windowed(on_gpus(2, 6100.0, 0.05), settling, steps_each=2)]
    found = scaling_of(runs)
    two = found.points[1]
    assert two.steady and two.steady_from > 0 and two.settled_at_step == 2 * two.steady_from
    assert two.samples_per_s == pytest.approx(6000, rel=0.02)  # the steady windows, not the settling ones
    assert found.verdict().startswith("2 GPUs train resnet50 1.9")
    assert f"Measured once steady: the first {two.settled_at_step} steps on 2 counted as warm-up." in found.verdict()
    assert f"(steady from step {two.settled_at_step})" in found.table()[1][1][1]


def test_noisy_but_level_windows_are_steady():
    import random

    from mpsstudio.engine.analysis.stability import settled_from

    found = []
    for seed in range(100):  # level windows with ±12 % noise: steady from the start, or nearly (a chance trend)
        rng = random.Random(seed)
        found.append(settled_from([6000 * (1 + rng.uniform(-0.12, 0.12)) for _ in range(40)]))
    assert None not in found and sum(1 for k in found if k) <= 3
    assert settled_from([100.0] * 7) is None  # fewer windows than a steady stretch needs
    assert settled_from([float(v) for v in range(100, 140)]) is None  # rising to its end


def test_cpu_ranks_too_short_to_tell_still_say_they_share_the_cores():
    """A busy machine's CPU-rank run is often unsteady: the verdict then says it cannot tell, and still that CPU ranks
    share this CPU's cores (seen as a flaky test_ranks on a loaded 2-core machine)."""
    def on_cpus(n, sps, rates=None):
        run = make_run("cpu", sps, env=SERVER, gpus=n, model="mlp", dataset="synthetic")
        run.windows = [WindowRow(samples_per_s=sps * f) for f in (0.99, 1.01) * 20]
        run.summary = run.summary.replaced(samples_per_s_q1=sps * 0.99, samples_per_s_q3=sps * 1.01)
        if n > 1:
            run.summary = run.summary.replaced(ranks_world=n, ranks=[{"rank": r, "peak_memory": 1 << 30} for r in range(n)])
        return _windowed(run, rates, steps_each=2) if rates else run

    found = scaling_of([on_cpus(1, 1000.0), on_cpus(2, 410.0, [900 - 30 * i for i in range(20)])])
    verdict = found.verdict()
    assert verdict.startswith("Too short to tell the scaling: on 2 ")
    assert verdict.endswith("CPU ranks share this CPU's cores: this tries the distributed path; it is no speedup "
                            "to expect.")
