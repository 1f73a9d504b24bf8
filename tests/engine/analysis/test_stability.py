"""One way to say how sure a throughput is: "median ±N %", N half the IQR of the windows over the median, the same
figure in the window's table, its status bar, the CLI's table and the CSV, and the stability verdict in the same
terms."""

from __future__ import annotations

import csv

import pytest

from mpsstudio.engine.analysis import stability
from mpsstudio.engine.basics.config import RunConfig
from mpsstudio.engine.basics.formatting import SPREAD_WORDS, fmt_spread, spread_of
from mpsstudio.engine.basics.results import RunResult, WindowRow
from mpsstudio.engine.history import runfiles
from mpsstudio.engine.history.store import RunStore


def _run(median: float, iqr: float, windows: int = 20) -> RunResult:
    r = RunResult(config=RunConfig(device="cpu"), status="finished")
    r.summary = r.summary.replaced(samples_per_s=median, samples_per_s_iqr=iqr, samples_per_s_q1=median - iqr / 2,
                                   samples_per_s_q3=median + iqr / 2, windows=windows)
    verdict, reason = stability.assess(r.summary, {})
    r.summary = r.summary.replaced(stability=verdict, stability_reason=reason)
    return r


@pytest.mark.parametrize("median, iqr, said", [(1000.0, 80.0, "±4 %"), (1005.0, 1750.0, "±87 %"),
                                              (500.0, 1.0, "±<1 %"), (10.0, 400.0, "±>1,000 %")])
def test_the_same_figure_everywhere(qtbot, tmp_path, median, iqr, said):
    from mpsstudio.cli.common import format_table
    from mpsstudio.gui.results.panel import ResultsPanel
    from mpsstudio.gui.results.table_columns import COL
    from mpsstudio.gui.window.run_control import finished_sentence

    assert fmt_spread(spread_of(median, iqr)) == said
    run = _run(median, iqr)
    panel = ResultsPanel(RunStore())
    qtbot.addWidget(panel)
    panel.add_result(run)
    model = panel.model
    cell = model.index(model.row_of(run.id), COL["Samples/s"]).data()
    assert cell.endswith(f" {said}")
    assert f" {said} samples/s (median ± half the IQR of 20 windows)" in finished_sentence(run)
    table = format_table([run])
    header, rule, line = table.splitlines()[:3]
    assert "±" in header.split() and said.replace(" ", "") in line.replace(" ", "")
    assert SPREAD_WORDS in table
    path = tmp_path / "runs.csv"
    runfiles.export_csv([run], path)
    [row] = list(csv.DictReader(path.open()))
    assert float(row["samples_per_s_spread"]) == pytest.approx(spread_of(median, iqr))  # the raw share
    noisy = run.summary.stability == "noisy"
    assert noisy == (iqr / median > stability.SPREAD_LIMIT)
    if noisy:
        assert f"throughput spread {said} between windows (half the IQR over the median), beyond the ±5 % limit" in \
            run.summary.stability_reason


def test_best_and_fastest_are_said_only_when_the_middle_halves_separate():
    from mpsstudio.engine.tools import sweep
    from mpsstudio.engine.tools.deploy import deploybench

    def point(b, sps, iqr):
        return {"device": "cpu", "batch_size": b, "samples_per_s": sps, "samples_per_s_iqr": iqr, "status": "finished"}
    clear = {"best": {"cpu": 64}, "points": [point(32, 900.0, 40.0), point(64, 1000.0, 40.0)]}
    assert "Best throughput: cpu at batch 64." in sweep.sentence(clear)
    close = {"best": {"cpu": 64}, "points": [point(32, 980.0, 80.0), point(64, 1000.0, 80.0), point(8, 500.0, 9.0)]}
    assert ("Best throughput: cpu: no clear best between batch 64 and 32 (their middle halves overlap)." in
            sweep.sentence(close))

    def row(label, batch, ms, iqr):
        return {"model": "mlp", "batch_size": batch, "latency_ms": ms, "latency_iqr_ms": iqr, "label": label,
                "runtime": "pytorch", "where": label.split(", ")[-1], "agrees": None, "samples_per_s": batch / ms * 1e3}
    result = {"models": ["mlp"], "rows": [row("PyTorch, cpu", 32, 10.0, 2.0), row("PyTorch, mps", 32, 10.5, 2.0),
                                          row("PyTorch, cpu", 8, 1.0, 0.1)],
              "placement": {}, "coreml_runs_here": False}
    said = deploybench.sentence(result)
    assert said.startswith("mlp: at batch 32, no clear fastest between PyTorch, cpu and PyTorch, mps (10.00 ms a "
                           "batch and 10.50 ms: their middle halves overlap); the most samples a second: batch 8 on "
                           "PyTorch, cpu"), said


def test_the_headline_says_the_answer_and_its_interval_in_one_line():
    from mpsstudio.engine.analysis import compare, verdict

    def run(device, rates):
        r = RunResult(config=RunConfig(device=device, steps=20, epochs=None), status="finished")
        r.windows = [WindowRow(samples_per_s=v) for v in rates]
        r.summary = r.summary.replaced(samples_per_s=sorted(rates)[len(rates) // 2], windows=len(rates))
        return r
    cpu = run("cpu", [100.0 + i % 3 for i in range(12)])
    fast = run("mps", [121.0 + i % 3 for i in range(12)])
    [c] = compare.compare([cpu, fast])
    e = next(e for e in c.entries if not e.is_baseline)
    line = verdict.headline(c)
    assert line == f"mps {verdict._x(e.speedup)} faster [{verdict._x(e.low)}-{verdict._x(e.high)}]"
    same = run("mps", [100.0 + i % 3 for i in range(12)])
    [c] = compare.compare([cpu, same])
    assert verdict.headline(c).startswith("No clear difference: mps 1.00x [")
    slow = run("mps", [50.0 + i % 3 for i in range(12)])
    [c] = compare.compare([cpu, slow])
    assert verdict.headline(c).startswith("mps 1.9") and " slower [1.9" in verdict.headline(c)
