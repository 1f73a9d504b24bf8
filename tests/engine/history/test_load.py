"""The history table's load: summaries only (no steps, windows or epochs), sealed rows, schema 2 -> 3, notes."""

from __future__ import annotations

import json
import sqlite3

import pytest

from mpsstudio.engine.basics.results import EpochRow, WindowRow
from mpsstudio.engine.analysis.compare import compare
from mpsstudio.engine.basics.errors import UserError
from mpsstudio.engine.analysis.runcheck import checked_result
from mpsstudio.engine.history.runfiles import export_json, import_json
from mpsstudio.engine.history.store import SCHEMA_VERSION, RunStore
from tests.support.runs import plain_run



def windowed(device="cpu", rates=(100.0, 110.0, 90.0, 105.0), **kw):
    """A run as a run's process sends it, checked (so it is sealed when stored)."""
    run = plain_run(device=device, **kw)
    run.windows = [WindowRow(first_step=4 + i, steps=1, seconds=0.1, samples=10, samples_per_s=r,
                    data_wait_s=0.0, memory=0) for i, r in enumerate(rates)]
    run.epochs = [EpochRow(epoch=1, seconds=0.4, val_loss=0.3, val_accuracy=0.9)]
    run.losses = [2.0, 1.5, 1.2, 1.0, 0.9, 0.8, 0.7]
    return checked_result(run, "the test")


def test_summaries_carry_what_the_table_needs_and_get_reads_the_whole_run(tmp_path):
    store = RunStore(tmp_path / "runs.sqlite3")
    cpu, mps = windowed("cpu"), windowed("mps", rates=(400.0, 420.0, 380.0, 410.0))
    store.save(cpu)
    store.save(mps)
    summaries = store.summaries()
    assert [r.id for r in summaries] == [cpu.id, mps.id]
    s = summaries[1]
    assert s.is_summary and s.losses == [] and s.windows == [] and s.epochs == []
    assert s.window_rates == [400.0, 420.0, 380.0, 410.0]
    assert s.summary.samples_per_s == pytest.approx(405.0)  # the median of its windows
    whole = store.get(mps.id)
    assert not whole.is_summary and len(whole.windows) == 4 and whole.losses and whole.epochs
    # the comparison (and its window bootstrap) is the same from summaries as from whole runs
    [a], [b] = compare(summaries), compare(store.all())
    ea, eb = a.entry_of(s), b.entry_of(whole)
    assert ea.speedup == pytest.approx(eb.speedup) and (ea.low, ea.high) == pytest.approx((eb.low, eb.high))
    with pytest.raises(ValueError, match="summary cannot be saved"):
        store.save(s)  # it would lose the run's steps and windows


@pytest.mark.parametrize("column, value", [
    ("summary_json", json.dumps({"samples_per_s": "fast"})),
    ("summary_json", "{not json"),
    ("env_json", json.dumps({"a": [[[[[[[[[["deep"]]]]]]]]]]})),
    ("config_json", json.dumps({"model": "mlp"})),
    ("rates", b"\x00\x01\x02"),
    ("rates", bytes(8)),  # a throughput of 0
    ("note", b"\xff"),  # a blob where text belongs
])
def test_a_row_changed_by_hand_is_checked_in_full_and_named_not_shown(tmp_path, column, value):
    path = tmp_path / "runs.sqlite3"
    store = RunStore(path)
    good, bad = windowed("cpu"), windowed("mps")
    store.save(good)
    store.save(bad)
    with sqlite3.connect(path) as db:
        db.execute(f"UPDATE runs SET {column} = ? WHERE id = ?", (value, bad.id))
    assert [r.id for r in store.summaries()] == [good.id]
    assert store.notices and "1 stored run could not be read" in store.notices[0]


def _one_run_stored(tmp_path):
    path = tmp_path / "runs.sqlite3"
    store = RunStore(path)
    run = windowed("cpu")
    store.save(run)
    return path, store, run


def test_a_row_whose_windows_are_gone_is_shown_without_the_throughput_they_backed(tmp_path):
    path, store, run = _one_run_stored(tmp_path)
    with sqlite3.connect(path) as db:
        db.execute("UPDATE runs SET rates = ?, windows_json = '[]'", (b"",))
    for back in (store.summaries()[0], store.get(run.id)):
        assert back.id == run.id and back.summary.samples_per_s is None and back.summary.windows == 0
    assert not store.notices


def test_an_unchecked_run_is_checked_before_it_is_stored(tmp_path):
    """Every run is stored as the history reads it back (runcheck.storable): checked, its summary re-derived from its
    windows, then sealed."""
    store = RunStore(tmp_path / "runs.sqlite3")
    run = plain_run()
    run.summary = run.summary.replaced(samples_per_s=5.0)  # a summary its windows do not back: never stored as it claims
    run.windows = [WindowRow(first_step=1, steps=1, seconds=0.1, samples=10, samples_per_s=100.0)]
    store.save(run)
    with sqlite3.connect(tmp_path / "runs.sqlite3") as db:
        assert db.execute("SELECT seal FROM runs").fetchone()[0] is not None
        assert json.loads(db.execute("SELECT summary_json FROM runs").fetchone()[0])["samples_per_s"] == 100.0
    [back] = store.summaries()
    assert back.summary.samples_per_s == 100.0


def test_a_hand_edited_summary_that_still_reads_is_re_derived_from_its_windows(tmp_path):
    """The seal no longer matches, so the row is checked in full: a summary cannot claim another median."""
    path, store, _ = _one_run_stored(tmp_path)
    with sqlite3.connect(path) as db:
        summary = json.loads(db.execute("SELECT summary_json FROM runs").fetchone()[0])
        db.execute("UPDATE runs SET summary_json = ?", (json.dumps({**summary, "samples_per_s": 1e9}),))
    [back] = store.summaries()
    assert back.summary.samples_per_s == pytest.approx(102.5)


def _schema_2(path):
    """A history as version 2 wrote it: no note, rates or seal columns."""
    store = RunStore(path)
    runs = [windowed("cpu"), windowed("mps", rates=(300.0, 310.0))]
    runs[0].id, runs[1].id = "z-stored-first", "a-stored-second"  # id order is not the order they were stored
    for r in runs:
        store.save(r)
    store.close()
    with sqlite3.connect(path) as db:
        for col in ("note", "rates", "seal", "evaluation_json"):
            db.execute(f"ALTER TABLE runs DROP COLUMN {col}")
        db.execute("PRAGMA user_version=2")
    return runs


def test_a_version_2_history_is_upgraded_with_its_window_rates(tmp_path):
    path = tmp_path / "runs.sqlite3"
    runs = _schema_2(path)
    store = RunStore(path)
    with sqlite3.connect(path) as db:
        assert db.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
        assert all(r[0] for r in db.execute("SELECT rates FROM runs"))
        assert all(r[0] for r in db.execute("SELECT seal FROM runs"))  # checked once, read fast from now on
    back = store.summaries()
    assert [r.window_rates for r in back] == [[100.0, 110.0, 90.0, 105.0], [300.0, 310.0]]
    assert [r.note for r in back] == ["", ""] and not store.notices
    assert [r.id for r in store.all()] == [r.id for r in runs]


def test_a_bad_row_of_a_version_2_history_stays_as_it_was_and_is_named(tmp_path):
    path = tmp_path / "runs.sqlite3"
    good, bad = _schema_2(path)
    with sqlite3.connect(path) as db:
        db.execute("UPDATE runs SET summary_json = ? WHERE id = ?", (json.dumps({"final_loss": "abc"}), bad.id))
    store = RunStore(path)
    assert [r.id for r in store.summaries()] == [good.id] and "1 stored run could not be read" in store.notices[0]
    with sqlite3.connect(path) as db:
        assert db.execute("SELECT summary_json FROM runs WHERE id = ?", (bad.id,)).fetchone()[0] == \
            json.dumps({"final_loss": "abc"})  # left as it was


def test_a_read_only_version_2_history_is_still_listed(tmp_path, monkeypatch):
    path = tmp_path / "runs.sqlite3"
    _schema_2(path)
    import os

    real = os.access
    monkeypatch.setattr(os, "access", lambda p, mode, *a, **k: False if mode == os.W_OK else real(p, mode, *a, **k))
    store = RunStore(path)
    assert store.read_only
    back = store.summaries()
    assert [r.window_rates for r in back] == [[100.0, 110.0, 90.0, 105.0], [300.0, 310.0]]
    assert [r.note for r in back] == ["", ""]
    with pytest.raises(UserError, match="read-only"):
        store.set_note(back[0].id, "x")


def test_a_note_is_kept_exported_and_imported_and_a_bad_one_is_refused(tmp_path):
    store = RunStore(tmp_path / "runs.sqlite3")
    run = windowed("cpu")
    store.save(run)
    store.set_note(run.id, "after the macOS 15.2 update")
    [s] = store.summaries()
    assert s.note == "after the macOS 15.2 update"
    assert store.get(run.id).note == "after the macOS 15.2 update"
    with pytest.raises(UserError, match="at most 10,000 characters"):
        store.set_note(run.id, "x" * 10_001)
    out = tmp_path / "runs.json"
    export_json([store.get(run.id)], out)
    [back] = import_json(out)
    assert back.note == "after the macOS 15.2 update"
    data = json.loads(out.read_text())
    data["runs"][0]["note"] = ["not", "text"]
    out.write_text(json.dumps(data))
    with pytest.raises(UserError, match="'note'"):
        import_json(out)
