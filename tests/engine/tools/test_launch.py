"""The PyTorch launch benchmark preset: its plan, its estimate, its report and one real (small) run."""

from __future__ import annotations

import json

import pytest

from mpsstudio import cli
from mpsstudio.engine.tools import launch
from mpsstudio.engine.basics.errors import UserError
from tests.support.runs import noisy_rates, run_with
from tests.support.data import small_images


def test_plan_has_the_published_workloads_at_their_batch_sizes():
    jobs = launch.plan(["cpu", "mps"])
    assert [(j.workload.key, j.mode) for j in jobs] == [
        ("resnet50", "train"), ("resnet50", "inference"), ("bert-base", "train"), ("bert-base", "inference"),
        ("vgg16", "train"), ("vgg16", "inference")]
    sizes = {j.workload.key: j.configs[0].batch_size for j in jobs}
    assert sizes == {"resnet50": 128, "bert-base": 64, "vgg16": 64}
    assert all([c.device for c in j.configs] == ["cpu", "mps"] for j in jobs)
    assert all(c.dataset == "synthetic" and c.steps == launch.DEFAULT_STEPS for j in jobs for c in j.configs)


def test_pick_refuses_unknown_names():
    assert launch.pick("vgg16,resnet50", ["resnet50", "bert-base", "vgg16"], "workload") == ["resnet50", "vgg16"]
    with pytest.raises(UserError, match="Unknown workload nope"):
        launch.pick("nope", ["resnet50"], "workload")


def test_estimate_scales_with_cost_and_says_unknown_without_a_probe():
    jobs = launch.plan(["cpu", "mps"], ["resnet50"], ["inference"], steps=8, warmup=2)
    est = launch.estimate_s(jobs, {"cpu": 10.0, "mps": None})
    assert est["cpu"] == pytest.approx(10 * 128 / 10.0 + launch.PROCESS_S)
    assert est["mps"] is None and launch.fmt_estimate(None).startswith("unknown")
    train = launch.estimate_s(launch.plan(["cpu"], ["resnet50"], ["train"], steps=8, warmup=2), {"cpu": 10.0})
    assert train["cpu"] > est["cpu"] * 2.5


def test_report_puts_the_claim_beside_the_measured_speedup():
    jobs = launch.plan(["cpu", "mps"], ["resnet50"], ["train"])
    cfg = jobs[0].configs[0]
    fields = {k: getattr(cfg, k) for k in ("model", "dataset", "batch_size", "steps", "epochs", "warmup_steps",
                                           "mode")}
    cpu = run_with("cpu", noisy_rates(100, 0.02, seed=1), **fields)
    mps = run_with("mps", noisy_rates(500, 0.02, seed=2), **fields)
    rows = launch.report(jobs, [cpu, mps])
    assert [(r.device, r.claim) for r in rows] == [("cpu", ""), ("mps", "about 7x")]
    assert rows[1].speedup == pytest.approx(5.0, rel=0.05) and rows[1].low < rows[1].speedup < rows[1].high


def test_launch_benchmark_runs_on_the_cpu(tmp_path, capsys, monkeypatch):
    small_images(monkeypatch)
    out = tmp_path / "launch.json"
    assert cli.main(["launch-benchmark", "--devices", "cpu", "--workloads", "resnet50", "--modes", "inference",
                     "--steps", "1", "--warmup", "0", "--json", str(out)]) == 0
    captured = capsys.readouterr()
    assert "Estimated time" in captured.err and "ResNet50" in captured.out and "up to 20x" in captured.out
    [run] = json.loads(out.read_text())["runs"]
    assert run["config"]["model"] == "resnet50" and run["config"]["batch_size"] == 128
    assert cli.main(["history"]) == 0 and "resnet50" in capsys.readouterr().out  # kept like any other run


def test_launch_benchmark_bad_input_is_one_line(capsys):
    assert cli.main(["launch-benchmark", "--modes", "training"]) == 2
    assert "Unknown mode training" in capsys.readouterr().err


def test_the_launch_benchmark_says_why_tf32_is_off_on_cuda():
    from mpsstudio.engine.basics.config import TF32_NOTE

    assert launch.notes(launch.plan(["cpu", "cuda:0"])) == [TF32_NOTE]
    assert launch.notes(launch.plan(["cpu", "mps"])) == []
