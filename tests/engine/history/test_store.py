"""Run history (SQLite), JSON export/import and comparisons."""

from __future__ import annotations

import json
import sqlite3

import pytest

from mpsstudio.engine.basics.results import WindowRow
from mpsstudio.engine.analysis.compare import compare
from mpsstudio.engine.basics.errors import UserError
from mpsstudio.engine.history.runfiles import export_json, import_json
from mpsstudio.engine.history.store import SCHEMA_VERSION, RunStore
from tests.support.runs import plain_run


def test_store_round_trip_and_survives_reopen(tmp_path):
    path = tmp_path / "runs.sqlite3"
    store = RunStore(path)
    run = plain_run()
    store.save(run)
    store.close()
    again = RunStore(path)
    [back] = again.all()
    assert back.id == run.id and back.config == run.config
    assert back.losses == pytest.approx([2.0, 1.5, 1.0])
    written = run.summary.as_dict()
    assert {k: back.summary.as_dict()[k] for k in written} == written and back.env == run.env
    assert back.summary.energy_j is None and back.summary.energy_reason  # re-derived from its windows
    with sqlite3.connect(path) as db:
        assert db.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
    again.delete([run.id])
    assert len(again) == 0


def test_store_from_a_newer_version_is_refused(tmp_path):
    path = tmp_path / "runs.sqlite3"
    RunStore(path).close()
    with sqlite3.connect(path) as db:
        db.execute(f"PRAGMA user_version={SCHEMA_VERSION + 1}")
    with pytest.raises(UserError, match="newer MPS Studio"):
        RunStore(path)


def test_corrupt_store_is_one_sentence(tmp_path):
    path = tmp_path / "runs.sqlite3"
    path.write_bytes(b"this is not a database" * 100)
    with pytest.raises(UserError, match="is damaged; it was left as it is"):
        RunStore(path)
    assert path.read_bytes() == b"this is not a database" * 100


def test_an_unfinished_write_leaves_earlier_runs_intact(tmp_path):
    path = tmp_path / "runs.sqlite3"
    store = RunStore(path)
    first = plain_run()
    store.save(first)
    # a crash mid-transaction: the connection dies before commit
    store._db.execute("BEGIN")
    store._db.execute("DELETE FROM runs")
    store._db.close()
    assert [r.id for r in RunStore(path).all()] == [first.id]


def test_json_export_import_round_trip(tmp_path):
    runs = [plain_run("cpu", 100.0), plain_run("mps", 450.0, created="2026-01-01T00:01:00+00:00")]
    path = tmp_path / "runs.json"
    export_json(runs, path)
    doc = json.loads(path.read_text())
    assert doc["runs"][0]["steps"] == [{"step": 1, "loss": 2.0}, {"step": 2, "loss": 1.5}, {"step": 3, "loss": 1.0}]
    assert doc["comparisons"][0]["devices"][1]["speedup_vs_cpu"] == pytest.approx(4.5)
    back = import_json(path)
    assert [r.id for r in back] == [r.id for r in runs]
    assert all(r.origin == "imported" for r in back)
    assert back[1].summary.samples_per_s == 450.0


def test_missing_import_file(tmp_path):
    with pytest.raises(UserError, match="does not exist"):
        import_json(tmp_path / "nope.json")


def test_comparisons_group_by_config_without_device():
    runs = [
        plain_run("cpu", 100.0),
        plain_run("mps", 700.0),
        plain_run("cuda:0", 2000.0, machine="H100 server"),
        plain_run("mps", 300.0, batch_size=128),  # other config: its own group, alone, so no comparison
        plain_run("cpu", 50.0, status="failed"),  # failed runs are never compared
    ]
    [group] = compare(runs)
    assert [r.config.device for r in group.runs] == ["cpu", "mps", "cuda:0"]  # this machine first
    assert group.baseline is runs[0]
    assert group.speedups[runs[1].id] == pytest.approx(7.0)
    assert group.speedups[runs[2].id] is None  # the H100 server has no CPU run: never divided by this one's
    assert group.speedups[runs[0].id] == pytest.approx(1.0)
    [cross] = group.cross
    assert cross.ratio == pytest.approx(2000 / 700) and "different machines" in cross.label()


def test_newest_run_stands_for_its_device_and_no_cpu_means_no_speedup():
    old = plain_run("mps", 100.0, created="2026-01-01T00:00:00+00:00")
    new = plain_run("mps", 200.0, created="2026-01-02T00:00:00+00:00")
    cuda = plain_run("cuda:0", 800.0, created="2026-01-02T00:00:00+00:00")
    [group] = compare([new, old, cuda])
    assert new in group.runs and old not in group.runs
    assert group.baseline is None and group.speedups[new.id] is None


def test_every_folder_honours_its_override(monkeypatch, tmp_path):
    from mpsstudio.engine.basics import paths

    for var, fn in (("MPSSTUDIO_DATA_DIR", paths.data_dir), ("MPSSTUDIO_CONFIG_DIR", paths.config_dir),
                    ("MPSSTUDIO_CACHE_DIR", paths.cache_dir), ("MPSSTUDIO_LOG_DIR", paths.log_dir)):
        monkeypatch.setenv(var, str(tmp_path / var))
        assert fn() == tmp_path / var
        monkeypatch.delenv(var)
        assert "MPS Studio" in str(fn())


def test_a_run_holding_an_infinite_or_nan_number_still_exports_and_reads_back(tmp_path):
    run = plain_run()
    run.windows = [WindowRow(samples_per_s=float("inf"), seconds=0.0)]
    run.summary = run.summary.replaced(val_loss=float("nan"))
    path = tmp_path / "odd.json"
    export_json([run], path)
    [back] = import_json(path)
    assert back.windows[0].samples_per_s is None and back.summary.val_loss is None
