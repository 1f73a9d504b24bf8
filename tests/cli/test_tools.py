"""`mpsstudio sweep`, `max-batch` and `inspect` end to end on this CPU, their JSON files, their history records, and
one sentence for every kind of bad input. The sweep, the crashes, hangs and Stop run in real run processes (and
leave none behind: run_pids); the JSON checks run in-process."""

from __future__ import annotations

import json

import pytest

from mpsstudio import cli
from mpsstudio.engine import process
from mpsstudio.engine.process import handles
from mpsstudio.engine.basics.errors import UserError
from mpsstudio.engine.history.store import RunStore
from mpsstudio.engine.tools.maxbatch_answer import DEFAULT_CAP, arguments


def one_line_error(capsys) -> str:
    err = capsys.readouterr().err.strip().splitlines()
    assert err and "Traceback" not in "\n".join(err)
    return err[-1]


def test_sweep_writes_points_best_and_keeps_it(tmp_path, capsys):  # in real processes: test_containment
    out = tmp_path / "sweep.json"
    code = cli.main(["sweep", "--model", "mlp", "--dataset", "synthetic", "--devices", "cpu", "--batch-sizes", "2,8",
                     "--steps", "8", "--warmup", "1", "--json", str(out)])
    assert code == cli.EXIT_OK
    doc = json.loads(out.read_text())
    assert [(p["device"], p["batch_size"]) for p in doc["points"]] == [("cpu", 2), ("cpu", 8)]
    for p in doc["points"]:
        assert p["samples_per_s"] > 0 and p["samples_per_s_iqr"] >= 0 and p["step_ms"] > 0
    assert doc["best"]["cpu"] in (2, 8)
    assert doc["crossover"] is None  # one device: nothing to cross
    printed = capsys.readouterr().out
    best = doc["best"]["cpu"]  # named as the best only where the middle halves separate (sweep.separated)
    assert "samples/s (median, measured)" in printed and doc["sentence"] in printed
    assert (f"Best throughput: cpu at batch {best}." in printed or
            f"Best throughput: cpu: no clear best between batch {best} and" in printed)
    [record] = RunStore().tools()
    assert record.kind == "sweep" and record.result["env"]["machine_label"]


def test_sweep_point_larger_than_the_dataset_is_a_failed_point(tmp_path, capsys):
    folder = tmp_path / "imgs"
    from PIL import Image

    for cls in ("a", "b"):
        (folder / cls).mkdir(parents=True)
        for i in range(3):
            Image.new("RGB", (8, 8), (i * 40, 0, 0)).save(folder / cls / f"{i}.png")
    code = cli.main(["sweep", "--dataset", str(folder), "--devices", "cpu", "--batch-sizes", "2,64", "--steps", "8",
                     "--warmup", "0", "--no-save", "--image-size", "16"])
    out = capsys.readouterr().out
    assert code == cli.EXIT_OK
    row = next(line for line in out.splitlines() if line.startswith("cpu") and " 64 " in line)
    assert "failed:" in row and "fewer than one batch of 64" in row
    assert RunStore().tools() == []


def test_max_batch_json_and_limit(tmp_path, capsys):
    out = tmp_path / "mb.json"
    code = cli.main(["max-batch", "--model", "mlp", "--dataset", "synthetic", "--device", "cpu",
                     "--memory-limit", "64M", "--max-batch", "16", "--json", str(out)])
    assert code == cli.EXIT_OK
    doc = json.loads(out.read_text())
    assert set(doc) >= {"largest_batch", "fastest_batch", "probes"}
    assert doc["largest_batch"] >= 1 and doc["limit"] == 64 * 2**20
    for p in doc["probes"]:
        assert set(p) >= {"batch_size", "fits", "samples_per_s", "memory"}
    assert "Largest batch that trains on cpu" in capsys.readouterr().out
    assert RunStore().tools()[0].kind == "max-batch"


def test_inspect_json(tmp_path, capsys):
    out = tmp_path / "in.json"
    code = cli.main(["inspect", "--model", "mlp", "--dataset", "synthetic", "--device", "cpu", "--json", str(out)])
    assert code == cli.EXIT_OK
    doc = json.loads(out.read_text())
    par = doc["parity"]
    assert set(par) >= {"loss_rel_err", "logits_max_rel_err", "grads", "tolerance", "ok"} and par["ok"]
    assert all(set(g) >= {"name", "max_rel_err"} and g["cpu_rel_err"] is None and g["ok"] for g in par["grads"])
    assert doc["fallback_ops"] == [] and doc["probe"] == {"ok": True, "detail": "the CPU needs no check"}
    printed = capsys.readouterr().out
    assert "parity with the CPU in float64" in printed and "cpu matches the float64 CPU reference" in printed


@pytest.mark.parametrize("argv, words", [
    (["sweep", "--batch-sizes", "1,zero"], "'zero' is not one"),
    (["sweep", "--devices", "tpu"], "None of the devices can run this"),
    (["sweep", "--steps", "0"], "Steps must be a whole number from 1"),
    (["sweep", "--model", "nope"], "nope"),
    (["sweep", "--json", "/no/such/folder/x.json"], "does not exist"),
    (["max-batch", "--memory-limit", "lots"], "--memory-limit must be a size"),
    (["max-batch", "--memory-limit", "10K"], "between 1 MiB"),
    (["max-batch", "--max-batch", "0"], "--max-batch must be a whole number"),
    (["max-batch", "--device", "gpu0"], "The device must be cpu, mps, cuda or cuda:N"),
    (["inspect", "--device", "mps"], "mps is not available"),
    (["inspect", "--device", "cuda:7"], "cuda:7 is not available"),
    (["inspect", "--timeout", "0"], "--timeout must be a number of seconds"),
    (["inspect", "--dataset", "/no/such/folder"], "/no/such/folder"),
])
def test_bad_input_is_one_sentence(argv, words, capsys):
    assert cli.main(argv) == cli.EXIT_BAD_INPUT
    line = one_line_error(capsys)
    assert line.startswith("mpsstudio: ") and words in line


def test_a_model_file_that_kills_its_process(tmp_path, capsys, run_pids):
    path = tmp_path / "dies.py"
    path.write_text("import os, torch\ndef build_model(num_classes, input_shape):\n    os._exit(3)\n")
    assert cli.main(["inspect", "--model", str(path), "--dataset", "synthetic", "--device", "cpu"]) == \
        cli.EXIT_BAD_INPUT
    line = one_line_error(capsys)
    assert "The process running the inspect tool exited with code 3 before its work was done" in line
    assert RunStore().tools() == []


def test_a_hung_tool_is_ended_at_its_time_limit(tmp_path, capsys, run_pids):
    path = tmp_path / "hangs.py"
    path.write_text("import time, torch\ndef build_model(num_classes, input_shape):\n    time.sleep(600)\n")
    assert cli.main(["max-batch", "--model", str(path), "--dataset", "synthetic", "--device", "cpu",
                     "--timeout", "3"]) == cli.EXIT_BAD_INPUT
    assert "did not end within the time limit of 3.00 s" in one_line_error(capsys)


def test_run_tool_stop_returns_partial_result(run_pids):
    from mpsstudio.engine.basics.config import RunConfig

    seen = []
    result = process.run_tool("max-batch", {"config": RunConfig(model="mlp", dataset="synthetic").to_dict(),
                                              "memory_limit": 2**30, "cap": 2**16},
                                progress=lambda m, f: seen.append(m), should_stop=lambda: len(seen) >= 4)
    assert result["stopped"] and result["largest_batch"] and "Stopped before the search ended." in result["sentence"]


def test_check_devices_without_accelerators_starts_nothing(monkeypatch):
    monkeypatch.setattr(process, "RunProcess", lambda **k: pytest.fail("a process was started"))
    from mpsstudio.engine.machine import devices

    assert process.check_devices(devices.discover_devices()) == {}


def test_devices_tool_in_a_run_process(run_pids):
    assert process.run_tool("devices", {}) == {"checks": {}}


@pytest.mark.parametrize("text, size", [("8G", 8 * 2**30), ("512M", 512 * 2**20), ("1.5GiB", int(1.5 * 2**30)),
                                        ("2 gb", 2 * 2**30), ("1048576", 2**20)])
def test_parse_size(text, size):
    assert arguments({"memory_limit": text, "max_batch": None}) == {"memory_limit": size, "cap": DEFAULT_CAP}


@pytest.mark.parametrize("text", ["", "G", "-1G", "1e9", "5 parsecs", "0.5M"])
def test_parse_size_refuses(text):
    with pytest.raises(UserError, match="^--memory-limit must be"):
        arguments({"memory_limit": text, "max_batch": None})


@pytest.mark.parametrize("cap", [0, -3, 2**40])
def test_a_cap_out_of_range_is_refused_naming_the_option(cap):
    with pytest.raises(UserError, match=f"^--max-batch must be a whole number from 1 to 1,048,576, not {cap}"):
        arguments({"memory_limit": None, "max_batch": cap})


def test_a_spare_filled_after_close_starts_nothing(monkeypatch):
    """A window closed before its queued fill() ran must not leave a process behind (it would hang exit)."""
    spare = process.Spare()
    spare.close()
    monkeypatch.setattr(handles, "new_process", lambda **k: pytest.fail("a process was started after close"))
    spare.fill()
    assert spare.take(True) is None


def test_a_forgotten_run_process_is_still_ended_at_exit():
    proc = process.RunProcess()
    pid = proc.pid
    del proc  # its owner forgot it: no end() was called
    assert pid in process.live_processes()
    handles._end_all()
    assert pid not in process.live_processes()
    from tests.support.processes import assert_gone

    assert_gone([pid])
