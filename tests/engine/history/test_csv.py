"""CSV export of runs: one row per run, the table's columns as plain numbers, written atomically."""

import csv

import pytest

from mpsstudio.engine.basics.config import RunConfig
from mpsstudio.engine.basics.errors import UserError
from mpsstudio.engine.history.columns import CSV_COLUMNS
from mpsstudio.engine.basics.results import RunResult
from mpsstudio.engine.history.runfiles import export_csv


def make_run(device="cpu", sps=100.0, status="finished", created="2026-01-01T00:00:00+00:00", error=""):
    return RunResult(
        config=RunConfig(model="resnet18", dataset="cifar10", device=device, batch_size=128, steps=10, epochs=None),
        status=status, env={"machine_label": "Apple M2 Pro, macOS 14.5"}, error=error, created_at=created,
        summary={"samples_per_s": sps, "samples_per_s_iqr": 12.5, "warmup_s": 0.84, "s_per_epoch": 500.0,
                 "final_loss": 0.4821, "val_accuracy": 0.978, "peak_memory": 1288490188},
    )


def read(path):
    with open(path, newline="", encoding="utf-8") as f:
        return list(csv.DictReader(f))


def test_one_row_per_run_with_speedups(tmp_path):
    cpu, mps = make_run("cpu", 100.0), make_run("mps", 450.0, created="2026-01-01T00:01:00+00:00")
    failed = make_run("mps", None, status="failed", error="Out of memory at batch 128; try batch 64.")
    failed.config = failed.config.changed(batch_size=512)
    path = tmp_path / "runs.csv"
    export_csv([cpu, mps, failed], path)
    rows = read(path)
    assert list(rows[0]) == list(CSV_COLUMNS)
    assert [r["device"] for r in rows] == ["cpu", "mps", "mps"]
    assert float(rows[0]["speedup_vs_cpu"]) == pytest.approx(1.0)
    assert float(rows[1]["speedup_vs_cpu"]) == pytest.approx(4.5)
    assert rows[2]["speedup_vs_cpu"] == "" and rows[2]["samples_per_s"] == ""
    assert rows[2]["error"] == "Out of memory at batch 128; try batch 64." and rows[2]["status"] == "failed"
    assert float(rows[1]["val_accuracy_percent"]) == pytest.approx(97.8)
    assert int(rows[1]["peak_memory_bytes"]) == 1288490188
    assert rows[1]["machine"] == "Apple M2 Pro, macOS 14.5" and rows[1]["id"] == mps.id
    assert [p.name for p in tmp_path.iterdir()] == ["runs.csv"]  # no temporary file left beside it


def test_given_speedups_win(tmp_path):
    run = make_run("mps", 450.0)
    path = tmp_path / "one.csv"
    export_csv([run], path, speedups={run.id: 4.5})
    assert float(read(path)[0]["speedup_vs_cpu"]) == 4.5


def test_unwritable_path_is_one_sentence(tmp_path):
    with pytest.raises(UserError, match="cannot be written") as err:
        export_csv([make_run()], tmp_path / "missing-folder" / "runs.csv")
    assert "\n" not in str(err.value)
