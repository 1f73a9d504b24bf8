"""The headless CLI: exit codes, one-line errors, the JSON keys promised in the README."""

from __future__ import annotations

import json
import os
import signal
import time

import pytest

from mpsstudio import cli


def test_bench_writes_the_promised_json_and_keeps_the_run(tmp_path, capsys):
    from mpsstudio.engine.history.store import RunStore
    from mpsstudio.launcher import main

    out = tmp_path / "out.json"
    code = main(["bench", "--model", "mlp", "--dataset", "synthetic", "--devices", "cpu", "--batch-size", "64",
                 "--steps", "6", "--warmup", "2", "--json", str(out)])  # through the `mpsstudio` entry point
    stdout = capsys.readouterr().out
    assert code == 0
    assert "Samples/s" in stdout and "cpu" in stdout
    doc = json.loads(out.read_text())
    assert doc["format"] == "mpsstudio.runs" and doc["version"] == 1
    [run] = doc["runs"]
    assert run["status"] == "finished"
    assert {"model", "dataset", "device", "batch_size"} <= run["config"].keys()
    assert run["config"]["model"] == "mlp" and run["config"]["batch_size"] == 64
    assert {"samples_per_s", "samples_per_s_iqr", "warmup_s", "final_loss"} <= run["summary"].keys()
    assert run["summary"]["samples_per_s"] > 0
    assert run["env"]["torch"] and run["env"]["python"]
    assert len(run["steps"]) == 6 + 2 and set(run["steps"][0]) == {"step", "loss"}
    assert doc["comparisons"] == []
    assert [r.id for r in RunStore().all()] == [run["id"]]


def test_unknown_model_exits_2_with_one_line(capsys):
    code = cli.main(["bench", "--model", "no_such_model"])
    err = capsys.readouterr().err
    assert code == 2
    lines = err.strip().splitlines()
    assert len(lines) == 1 and "Unknown model 'no_such_model'" in lines[0]
    assert "Traceback" not in err


@pytest.mark.parametrize("args, message", [
    (["bench", "--image-size", "100000"], "The image size must be a whole number from 8 to 1,024 pixels"),
    (["bench", "--image-size", "0"], "The image size must be a whole number from 8 to 1,024 pixels"),
    (["bench", "--image-size", "-5"], "The image size must be a whole number from 8"),
    (["bench", "--seed", str(2**64 + 1)], "The seed must be a whole number from 0 to"),
    (["bench", "--steps", "0"], "Steps must be a whole number from 1"),
    (["bench", "--warmup", "-1"], "Warm-up steps must be a whole number from 0"),
    (["bench", "--batch-size", "100000", "--dataset", "shapes"], "fewer than one batch of 100,000"),
    (["bench", "--batch-size", "0"], "Batch size must be"),
    (["bench", "--batch-size", "ten"], "invalid int value"),
    (["bench", "--dataset", "/no/such/folder"], "does not exist"),
    (["bench", "--devices", "tpu"], "None of the devices"),
    (["bench", "--precision", "fp8"], "invalid choice"),
    (["bench", "--timeout", "0.001"], "--timeout must be a number of seconds from 1 to 604,800, not 0.001."),
    (["bench", "--timeout", "nan"], "--timeout must be a number of seconds from 1 to 604,800, not nan."),
    (["frobnicate"], "invalid choice"),
])
def test_bad_input_is_one_line_and_exit_2(args, message, capsys):
    code = cli.main(args)
    err = capsys.readouterr().err
    assert code == 2
    assert message in err
    assert len(err.strip().splitlines()) == 1 or "skipping" in err


def test_unavailable_devices_are_skipped_with_the_reason(capsys):
    code = cli.main(["bench", "--model", "mlp", "--dataset", "synthetic", "--devices", "cpu,mps",
                     "--batch-size", "32", "--steps", "5", "--no-save"])
    out, err = capsys.readouterr()
    assert code == 0
    assert "skipping mps: mps is not available: not an Apple Silicon Mac." in err
    assert "cpu" in out


def test_a_failed_run_exits_1(tmp_path, capsys):
    path = tmp_path / "nan.py"
    path.write_text("import torch\n"
                    "def build_model(num_classes, input_shape):\n"
                    "    class M(torch.nn.Module):\n"
                    "        def __init__(self):\n"
                    "            super().__init__(); self.w = torch.nn.Parameter(torch.zeros(1))\n"
                    "        def forward(self, x):\n"
                    "            return self.w * torch.full((x.shape[0], num_classes), float('nan'))\n"
                    "    return M()\n")
    code = cli.main(["bench", "--model", str(path), "--dataset", "synthetic", "--steps", "5", "--no-save"])
    err = capsys.readouterr().err
    assert code == 1
    assert "runs the Python code in it" in err
    assert "The loss was NaN at step 1" in err


def test_listings_and_doctor(capsys):
    for cmd in ("devices", "models", "datasets", "doctor"):
        assert cli.main([cmd]) == 0
    out = capsys.readouterr().out
    assert "not an Apple Silicon Mac" in out
    for name in ("mlp", "mnist_cnn", "resnet50", "vit_tiny", "lstm", "transformer"):
        assert name in out
    assert "shapes" in out and "cifar10" in out
    assert "PyTorch" in out


def test_history_keeps_runs_and_imports_json(tmp_path, capsys):
    out = tmp_path / "runs.json"
    assert cli.main(["bench", "--model", "mlp", "--dataset", "synthetic", "--batch-size", "16", "--steps", "5",
                     "--json", str(out)]) == 0
    assert cli.main(["history"]) == 0
    text = capsys.readouterr().out
    assert "mlp" in text and "synthetic" in text
    doc = json.loads(out.read_text())
    doc["runs"][0]["id"] = "imported-1"
    doc["runs"][0]["config"]["device"] = "cuda:0"
    doc["runs"][0]["env"]["machine_label"] = "NVIDIA H100 on server"
    doc["runs"][0]["summary"]["samples_per_s"] *= 10
    out.write_text(json.dumps(doc))
    assert cli.main(["history", "--import", str(out)]) == 0
    text = capsys.readouterr().out
    assert "NVIDIA H100 on server" in text
    # the imported CUDA run is never divided by this machine's CPU
    assert "10.00x" not in text and "has no CPU run from that machine" in text


def test_format_table_shows_speedup():
    from mpsstudio.engine.basics.config import RunConfig
    from mpsstudio.engine.basics.results import RunResult

    cpu = RunResult(RunConfig(device="cpu"), summary={"samples_per_s": 1000.0, "samples_per_s_iqr": 10.0})
    mps = RunResult(RunConfig(device="mps"), summary={"samples_per_s": 3500.0, "samples_per_s_iqr": 20.0})
    table = cli.format_table([cpu, mps])
    assert "3.50x" in table and "1.00x" in table and "3,500" in table


def test_a_json_path_in_a_missing_folder_is_refused_before_any_run(tmp_path, capsys, monkeypatch):
    from mpsstudio.engine import process

    monkeypatch.setattr(process, "run_isolated", lambda *a, **k: pytest.fail("a run started"))
    code = cli.main(["bench", "--model", "mlp", "--dataset", "synthetic", "--json", str(tmp_path / "no" / "o.json")])
    err = capsys.readouterr().err
    assert code == 2 and f"The folder {tmp_path / 'no'} does not exist" in err
    assert len(err.strip().splitlines()) == 1


def test_an_empty_history_says_how_to_start(capsys):
    assert cli.main(["history"]) == 0
    assert "No runs in the history yet" in capsys.readouterr().out


def test_ctrl_c_keeps_the_interrupted_run_as_cancelled_and_exits_130(monkeypatch, capsys):
    """Ctrl-C reaches the CLI (the run's process has its own process group): the run is ended and kept."""
    from mpsstudio.engine.basics.events import Window
    from mpsstudio.engine.history.store import RunStore

    from mpsstudio.cli.runs import Progress

    real = Progress.__call__
    seen = []

    def interrupt_at_the_second_window(self, event):
        real(self, event)
        seen.append(event)
        if sum(isinstance(e, Window) for e in seen) == 2 and isinstance(event, Window):
            raise KeyboardInterrupt
    monkeypatch.setattr(Progress, "__call__", interrupt_at_the_second_window)
    code = cli.main(["bench", "--model", "mlp", "--dataset", "synthetic", "--steps", "50", "--warmup", "1",
                     "--batch-size", "8"])
    captured = capsys.readouterr()
    assert code == 130
    assert "interrupted; the interrupted run is kept as cancelled" in captured.err
    [run] = RunStore().all()
    assert run.status == "cancelled" and run.summary.windows == 2
    assert "cancelled" in captured.out
    from tests.support.processes import live_processes

    assert live_processes() == []



@pytest.mark.parametrize("sig, code", [(signal.SIGTERM, 143), (signal.SIGHUP, 129)])
def test_sigterm_or_sighup_keeps_the_run_as_cancelled_with_the_reason(monkeypatch, capsys, sig, code):
    """A job scheduler's SIGTERM, a closed terminal's SIGHUP: handled as Ctrl-C, with the signal's exit status."""
    from mpsstudio.cli.runs import Progress
    from mpsstudio.engine.basics.events import Window
    from mpsstudio.engine.history.store import RunStore

    real = Progress.__call__
    windows = []

    def signal_at_the_second_window(self, event):
        real(self, event)
        if isinstance(event, Window):
            windows.append(event)
            if len(windows) == 2:
                os.kill(os.getpid(), sig)  # the signal itself: the CLI's handler turns it into the interruption
    monkeypatch.setattr(Progress, "__call__", signal_at_the_second_window)
    before = signal.getsignal(sig)
    got = cli.main(["bench", "--model", "mlp", "--dataset", "synthetic", "--steps", "50", "--warmup", "1",
                    "--batch-size", "8"])
    captured = capsys.readouterr()
    assert got == code
    assert f"stopped by {sig.name}; the interrupted run is kept as cancelled in the history" in captured.err
    [run] = RunStore().all()
    assert run.status == "cancelled" and run.summary.windows == 2
    assert run.error.startswith(f"Stopped by {sig.name} (the front end was asked to end)")
    assert signal.getsignal(sig) == before  # the command's handlers are gone with it
    from tests.support.processes import live_processes

    assert live_processes() == []


def test_a_second_ending_signal_while_the_run_is_kept_is_ignored():
    from mpsstudio.engine.basics.errors import Terminated
    from mpsstudio.engine.process import ending_signals

    with pytest.raises(Terminated) as caught:
        with ending_signals():
            os.kill(os.getpid(), signal.SIGTERM)
            time.sleep(1)  # the handler runs at the next bytecode
    assert caught.value.signum == signal.SIGTERM and caught.value.name == "SIGTERM"
    with ending_signals():
        try:
            os.kill(os.getpid(), signal.SIGHUP)
            time.sleep(1)
        except Terminated:
            os.kill(os.getpid(), signal.SIGHUP)  # while the run is being kept: nothing happens
            time.sleep(0.05)


def test_bench_without_devices_runs_every_available_device(monkeypatch):
    seen = {}
    from mpsstudio.cli import bench

    monkeypatch.setattr(bench, "available_devices", lambda: ["cpu", "mps", "cuda:0"])
    monkeypatch.setattr(bench, "bench", lambda request, **kw: seen.setdefault("names", list(request.devices)) and 0)
    assert cli.main(["bench", "--steps", "5"]) == 0
    assert seen["names"] == ["cpu", "mps", "cuda:0"]


def test_repeat_interleaves_and_reports_paired_speedups(tmp_path, capsys):
    out = tmp_path / "runs.json"
    assert cli.main(["bench", "--model", "mlp", "--dataset", "synthetic", "--batch-size", "8", "--steps", "10",
                     "--warmup", "1", "--devices", "cpu", "--repeat", "2", "--json", str(out), "--no-save"]) == 0
    doc = json.loads(out.read_text())
    tags = [r["env"]["repeat"] for r in doc["runs"]]
    assert [t["round"] for t in tags] == [1, 2] and len({t["set"] for t in tags}) == 1
    text = capsys.readouterr().out
    assert "Stability" in text


def test_repeat_order_is_a_b_b_a():
    from mpsstudio.engine.basics.config import RunConfig
    from mpsstudio.engine.basics.errors import UserError
    from mpsstudio.engine.analysis.repeat import interleave

    a, b = RunConfig(device="cpu"), RunConfig(device="mps")
    order, tags = interleave([a, b], 3)
    assert [c.device for c in order] == ["cpu", "mps", "mps", "cpu", "cpu", "mps"]
    assert [t["round"] for t in tags] == [1, 1, 2, 2, 3, 3]
    assert interleave([a, b], 1) == ([a, b], [None, None])
    for bad in (0, -1, 101, True):
        with pytest.raises(UserError):
            interleave([a, b], bad)


def test_bad_repeat_is_one_line(capsys):
    assert cli.main(["bench", "--repeat", "0", "--steps", "2"]) == 2
    assert "repeats must be a whole number" in capsys.readouterr().err


def test_history_json_writes_the_shape_of_bench_json(tmp_path, capsys):
    from mpsstudio.engine.history.runfiles import import_json

    assert cli.main(["bench", "--model", "mlp", "--dataset", "synthetic", "--batch-size", "8", "--steps", "5",
                     "--devices", "cpu"]) == 0
    out = tmp_path / "history.json"
    assert cli.main(["history", "--json", str(out)]) == 0
    doc = json.loads(out.read_text())
    assert doc["format"] == "mpsstudio.runs" and "comparisons" in doc and len(doc["runs"]) >= 1
    assert import_json(out)[0].summary.stability in ("stable", "noisy")
    assert cli.main(["history", "--json", str(tmp_path / "missing" / "x.json")]) == 2


BAD_TARGETS = {
    "folder": ("{tmp}", "is a folder"),
    "empty": ("  ", "needs a file name"),
    "trailing slash": ("{tmp}/new.json/", "is a folder"),
    "device": ("/dev/null", "not a regular file"),
    "unknown user": ("~no-such-user-here-9/x.json", "not a path this user can reach"),
    "NUL": ("{tmp}/a\x00b.json", "not a path this user can reach"),
    "name too long": ("{tmp}/" + "x" * 300 + ".json", "too long"),
    "name too long for the temporary beside it": ("{tmp}/" + "x" * 240 + ".json", "too long"),
    "through a file": ("{tmp}/file/x.json", "does not exist"),
}


@pytest.mark.parametrize("target", sorted(BAD_TARGETS))
def test_an_unwritable_json_target_is_bad_input_before_any_run(tmp_path, capsys, monkeypatch, target):
    def no_runs(*a, **k):
        raise AssertionError("a run started before --json was checked")
    from mpsstudio.engine import process

    monkeypatch.setattr(process, "run_isolated", no_runs)
    path, says = BAD_TARGETS[target]
    path = path.format(tmp=tmp_path)
    (tmp_path / "file").write_text("a file, not a folder")
    for argv in (["bench", "--devices", "cpu", "--steps", "2", "--json", path],
                 ["launch-benchmark", "--devices", "cpu", "--json", path],
                 ["history", "--json", path]):
        assert cli.main(argv) == 2, argv
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and says in err, err
    assert not (tmp_path / "new.json").exists()


def test_json_and_save_model_never_write_the_same_file(tmp_path, capsys, monkeypatch):
    from mpsstudio.engine import process

    def no_runs(*a, **k):
        raise AssertionError("a run started before the output files were checked")
    monkeypatch.setattr(process, "run_isolated", no_runs)
    for json_name, model in (("m.json", "m.pt"), ("m-cpu.json", "m.pt")):
        argv = ["bench", "--model", "mlp", "--dataset", "shapes", "--epochs", "1", "--json", str(tmp_path / json_name),
                "--save-model", str(tmp_path / model), "--devices", "cpu"]
        assert cli.main(argv + (["--repeat", "2"] if json_name == "m-cpu.json" else [])) == 2
        err = capsys.readouterr().err
        assert "would both write" in err and err.count("\n") == 1
    assert list(tmp_path.iterdir()) == []


def test_an_interrupted_bench_says_where_its_runs_were_kept(tmp_path, capsys, monkeypatch):
    from mpsstudio.engine import process
    from mpsstudio.engine.basics.events import Ended
    from mpsstudio.engine.basics.results import RunResult

    def interrupted(configs, on_event, **k):
        on_event(Ended(RunResult(config=configs[0], status="cancelled")))  # as run_isolated keeps the cut run
        raise KeyboardInterrupt
    monkeypatch.setattr(process, "run_isolated", interrupted)
    monkeypatch.setenv("MPSSTUDIO_DATA_DIR", str(tmp_path / "data"))
    base = ["bench", "--model", "mlp", "--dataset", "synthetic", "--steps", "2", "--devices", "cpu", "--no-inspect"]
    assert cli.main([*base, "--no-save"]) == cli.EXIT_INTERRUPTED
    assert "nothing was kept (--no-save)" in capsys.readouterr().err
    assert cli.main(base) == cli.EXIT_INTERRUPTED
    assert "kept as cancelled in the history." in capsys.readouterr().err
    monkeypatch.setattr(process, "run_isolated", lambda *a, **k: (_ for _ in ()).throw(KeyboardInterrupt()))
    assert cli.main(base) == cli.EXIT_INTERRUPTED  # before any run ended
    assert "interrupted; no run had ended, so there was nothing to keep." in capsys.readouterr().err


def test_a_name_with_terminal_escapes_is_printed_harmless(tmp_path, capsys):
    assert cli.main(["bench", "--dataset", str(tmp_path / "\x1b[2Jev\nil"), "--devices", "cpu"]) == 2
    err = capsys.readouterr().err
    assert "\x1b" not in err and err.count("\n") == 1 and "?[2Jev" in err


def _framework_bench(tmp_path, capsys, model: str, extra: list[str]) -> tuple[int, str, dict]:
    from mpsstudio.launcher import main

    pytest.importorskip("mlx.core")
    out = tmp_path / "frameworks.json"
    code = main(["bench", "--model", model, "--dataset", "synthetic", "--framework", "torch,mlx", "--devices", "cpu",
                 "--json", str(out), *extra])
    return code, capsys.readouterr().out, json.loads(out.read_text())


def test_bench_compares_pytorch_and_mlx_with_an_interval_and_parity(tmp_path, capsys):
    code, stdout, doc = _framework_bench(tmp_path, capsys, "mlp", ["--steps", "8", "--warmup", "2", "--batch-size",
                                                                    "32"])
    assert code == 0
    assert [(r["config"]["framework"], r["status"]) for r in doc["runs"]] == [("torch", "finished"),
                                                                            ("mlx", "finished")]
    assert "MLX \u00b7 cpu" in stdout
    verdict = next(line for line in stdout.splitlines() if "trains mlp" in line)
    assert verdict.startswith(("MLX (CPU) trains mlp", "No clear difference: MLX (CPU) trains mlp"))
    assert "than PyTorch (CPU)" in verdict or "the speed of PyTorch (CPU)" in verdict
    assert "[" in verdict and "; parity passed" in verdict
    assert doc["runs"][1]["summary"]["parity"]["passed"] is True and doc["runs"][1]["env"]["mlx"]


@pytest.mark.long
def test_bench_resnet18_in_pytorch_and_mlx_the_issues_command(tmp_path, capsys):
    """The issue's command (`bench --model resnet18 --dataset synthetic --framework torch,mlx --devices cpu`), small:
    MLX's CPU backend trains resnet18 at ~13 samples/s on this machine's 2 cores."""
    code, stdout, doc = _framework_bench(tmp_path, capsys, "resnet18", ["--steps", "4", "--warmup", "1",
                                                                         "--batch-size", "8", "--image-size", "32"])
    assert code == 0 and [r["status"] for r in doc["runs"]] == ["finished", "finished"]
    assert doc["runs"][1]["summary"]["parity"]["passed"] is True
    assert any("trains resnet18" in line and "parity passed" in line and "[" in line for line in stdout.splitlines())


def test_devices_says_where_mlx_runs_or_why_not(monkeypatch):
    from mpsstudio.cli.info import mlx_line
    from mpsstudio.engine.machine import mlx

    if mlx.mlx_version() is not None:  # here: MLX's CPU backend, no Metal GPU
        assert mlx_line().startswith(f"MLX {mlx.mlx_version()} (--framework mlx): its CPU; not its GPU: MLX's Metal")
    monkeypatch.setattr(mlx, "mlx_reason", lambda: "MLX is not installed; install it with pip install 'mpsstudio[mlx]'")
    assert mlx_line() == ("MLX (--framework mlx): not available: MLX is not installed; install it with pip install "
                          "'mpsstudio[mlx]'.")
