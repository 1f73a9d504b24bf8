"""A run's windows, epochs and evaluation are typed records: what a run writes is what it reads back, field by field,
and a row read back that is wrong names its field in one sentence."""

from __future__ import annotations

import json
import pickle

import pytest

from mpsstudio.engine.analysis.runcheck import run_from_dict
from mpsstudio.engine.basics.config import RunConfig
from mpsstudio.engine.basics.errors import UserError
from mpsstudio.engine.basics.events import EpochEnd, Window
from mpsstudio.engine.basics.results import EpochRow, Evaluation, RunResult, WindowRow
from mpsstudio.engine.basics.summary_fields import RunSummary
from mpsstudio.engine.process import messages


def _run() -> RunResult:
    window = Window(index=0, first_step=3, losses=[1.0, 0.9], seconds=0.2, samples=16, samples_per_s=80.0,
                    data_wait_s=0.01, memory=4096, memory_detail={}, steps_done=4, total_steps=4, elapsed_s=0.3,
                    eta_s=0.0, energy_j=2.5, energy_s=0.2, energy_windows=1, energy_parts={"gpu": 2.5, "cpu": 0.5},
                    utilization=40.0, memory_driver=8192, memory_process=None, swap_used=0)
    run = RunResult(config=RunConfig(model="mlp", dataset="synthetic", device="cpu", steps=2, epochs=None,
                                     warmup_steps=2, batch_size=8), losses=[2.0, 1.5, 1.0, 0.9])
    run.windows = [window.record()]
    run.epochs = [EpochEnd(1, 0.25, 0.8, 0.75, step=4).record()]
    run.evaluation = Evaluation(classes=["a", "b"], matrix=[[3, 1], [0, 4]], epoch=1)
    run.summary = RunSummary.made({"samples_per_s": 80.0})
    return run


def test_what_a_run_records_is_what_it_reads_back():
    run = _run()
    back = run_from_dict(json.loads(json.dumps(run.to_dict())), "x.json")
    assert back.windows == run.windows and back.epochs == run.epochs and back.evaluation == run.evaluation
    assert back.windows[0].energy_parts == {"gpu": 2.5, "cpu": 0.5} and back.windows[0].memory_process is None
    assert back.epochs[0] == EpochRow(epoch=1, step=4, seconds=0.25, val_loss=0.8, val_accuracy=0.75)
    assert back.summary.samples_per_s == 80.0  # re-derived from the window it read


def test_a_run_without_an_evaluation_writes_an_empty_object_and_reads_none():
    run = _run()
    run.evaluation = None
    data = json.loads(json.dumps(run.to_dict()))
    assert data["evaluation"] == {}
    assert run_from_dict(data, "x.json").evaluation is None


def test_a_window_of_no_time_has_no_rate_in_the_file_and_none_read_back():
    run = _run()
    run.windows = [WindowRow(first_step=3, steps=2, seconds=0.0, samples=16, samples_per_s=float("inf"))]
    data = json.loads(json.dumps(run.to_dict()))
    assert data["windows"][0]["samples_per_s"] is None
    assert run_from_dict(data, "x.json").windows[0].samples_per_s is None


@pytest.mark.parametrize("where, value, field", [
    ("windows", [{"first_step": 1.5}], r"windows\[0\]\.first_step"),
    ("windows", [{"samples_per_s": -3.0}], r"windows\[0\]\.samples_per_s"),
    ("windows", [{"utilization": 140.0}], r"windows\[0\]\.utilization' \(is 140\.0, above 100\)"),
    ("windows", [{"memory": "lots"}], r"windows\[0\]\.memory"),
    ("windows", [{"energy_parts": {"gpu": 1e300}}], r"windows\[0\]\.energy_parts\.gpu"),
    ("windows", ["a window"], r"windows\[0\]"),
    ("windows", {"0": {}}, r"windows' \(a list of at most"),
    ("epochs", [{"epoch": 1, "val_accuracy": 1.5}], r"epochs\[0\]\.val_accuracy"),
    ("epochs", [{"epoch": -1}], r"epochs\[0\]\.epoch"),
    ("epochs", [{"epoch": 1, "val_loss": float("nan")}], r"epochs\[0\]\.val_loss"),
    ("evaluation", {"classes": ["a", "b"], "matrix": [[1, 0], [0, 1]], "split": 7}, r"evaluation\.split"),
])
def test_a_wrong_row_read_back_names_its_field_and_nothing_is_read(where, value, field):
    data = json.loads(json.dumps(_run().to_dict()))
    data[where] = value
    with pytest.raises(UserError, match=rf"^x\.json has an invalid '{field}"):
        run_from_dict(data, "x.json")


def test_a_child_may_send_the_records_and_nothing_else_of_their_module():
    run = _run()
    back = messages.load(pickle.dumps(run))
    assert back.windows == run.windows and back.evaluation == run.evaluation
    assert back.summary.samples_per_s == 80.0 and back.summary.as_dict() == run.summary.as_dict()
    with pytest.raises(pickle.UnpicklingError, match="json_safe is not allowed"):
        from mpsstudio.engine.basics import results

        messages.load(pickle.dumps(results.json_safe))


def test_a_file_s_window_of_a_vast_number_of_steps_gives_the_run_s_rows_at_once():
    from mpsstudio.engine.history.runfiles import steps_rows

    data = json.loads(json.dumps(_run().to_dict()))
    data["summary"]["warmup_steps"] = 2
    data["windows"][0].update(first_step=3, steps=10**17)  # within the limits of a count; the run has 4 losses
    rows = steps_rows(run_from_dict(data, "x.json"))
    assert [(r[0], r[1]) for r in rows] == [(1, "warm-up"), (2, "warm-up"), (3, "measured"), (4, "measured")]
    assert rows[2][4] == 80.0 and rows[3][5] == 4096


@pytest.mark.parametrize("when", ["0001-01-01T00:00:00+14:00", "9999-12-31T23:59:59-14:00"])
def test_a_date_past_the_first_or_last_day_a_clock_holds_is_one_sentence(when):
    from mpsstudio.engine.basics.formatting import fmt_timestamp

    data = json.loads(json.dumps(_run().to_dict()))
    data["created_at"] = when
    with pytest.raises(UserError, match=r"^x\.json has an invalid 'created_at' \(an ISO 8601 date"):
        run_from_dict(data, "x.json")
    assert fmt_timestamp(when) == when  # a stored one is shown as written, never a traceback


def test_a_figure_re_derived_past_what_the_history_holds_is_not_kept_so_the_run_reads_back(tmp_path):
    from mpsstudio.engine.history.store import RunStore

    data = json.loads(json.dumps(_run().to_dict()))
    data["summary"].update(samples_per_s=1e18, s_per_epoch_estimate=1e6)  # follows the median: 1e6 x 1e18 / 80
    run = run_from_dict(data, "x.json")
    assert run.summary.s_per_epoch_estimate is None and run.summary.samples_per_s == 80.0
    store = RunStore(tmp_path / "runs.sqlite3")
    store.save(run)
    assert [r.id for r in store.summaries()] == [run.id] and not store.notices
