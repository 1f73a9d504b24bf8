"""One way to say how sure a throughput is: "median ±N %", N half the IQR of the windows over the median, the same
figure in the window's table, its status bar, the CLI's table and the CSV, and the stability verdict in the same
terms."""

from __future__ import annotations

import csv

import pytest

from mpsstudio.engine.analysis import stability
from mpsstudio.engine.basics.config import RunConfig
from mpsstudio.engine.basics.formatting import SPREAD_WORDS, fmt_spread, spread_of
from mpsstudio.engine.basics.results import RunResult
from mpsstudio.engine.history import runfiles
from mpsstudio.engine.history.store import RunStore


def _run(median: float, iqr: float, windows: int = 20) -> RunResult:
    r = RunResult(config=RunConfig(device="cpu"), status="finished")
    r.summary.update(samples_per_s=median, samples_per_s_iqr=iqr, samples_per_s_q1=median - iqr / 2,
                     samples_per_s_q3=median + iqr / 2, windows=windows)
    r.summary["stability"], r.summary["stability_reason"] = stability.assess(r.summary, {})
    return r


@pytest.mark.parametrize("median, iqr, said", [(1000.0, 80.0, "±4 %"), (1005.0, 1750.0, "±87 %"),
                                              (500.0, 1.0, "±<1 %"), (10.0, 400.0, "±>1,000 %")])
def test_the_same_figure_everywhere(qtbot, tmp_path, median, iqr, said):
    from mpsstudio.cli.common import format_table
    from mpsstudio.gui.results.panel import ResultsPanel
    from mpsstudio.gui.results.table_columns import COL
    from mpsstudio.gui.window.runs import finished_sentence

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
    noisy = run.summary["stability"] == "noisy"
    assert noisy == (iqr / median > stability.SPREAD_LIMIT)
    if noisy:
        assert f"throughput spread {said} between windows (half the IQR over the median), beyond the ±5 % limit" in \
            run.summary["stability_reason"]
