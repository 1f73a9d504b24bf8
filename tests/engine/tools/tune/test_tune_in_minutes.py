"""`tune` in minutes: a tune's GPU candidates share one warm run process (engine process/warm.py), built afresh in it
run after run; what a process cannot undo or would measure wrongly gets its own; a run that did not finish ends the
worker. CUDA's TF32 axis (off, convolutions, both), said in the current row and applied by Apply."""

from __future__ import annotations

import pytest

from mpsstudio import cli
from mpsstudio.engine import process
from mpsstudio.engine.basics.config import SCRIPT, RunConfig
from mpsstudio.engine.process import handles, warm as warm_module
from mpsstudio.engine.tools import tune
from mpsstudio.engine.tools.tune import report as tune_report


def _config(device: str, batch: int = 8, **kw) -> RunConfig:
    return RunConfig(**{"model": "mlp", "dataset": "synthetic", "device": device, "batch_size": batch, "steps": 4,
                        "epochs": None, "warmup_steps": 1, **kw})


def _counting(monkeypatch) -> list:
    started = []
    real = handles.new_process

    def counted(**kwargs):
        started.append(kwargs)
        return real(**kwargs)
    monkeypatch.setattr(handles, "new_process", counted)
    return started


def test_gpu_candidates_share_one_warm_worker_and_the_cpu_gets_its_own(fake_mps, monkeypatch):
    fake_mps()
    started = _counting(monkeypatch)
    with process.Warm() as warm:
        results = [process.run_point(_config("mps", b), warm=warm) for b in (8, 16, 8)]
        assert [r.status for r in results] == ["finished"] * 3, [r.error for r in results]
        assert len(started) == 1 and warm.served == 3 and warm.holds()
        assert all(r.env.get("process") == "warm worker" for r in results)
        assert results[0].summary.samples_per_s > 0 and results[2].summary.samples_per_s > 0
        cpu = process.run_point(_config("cpu"), warm=warm)  # the CPU: its memory figure is the process's own
        assert cpu.status == "finished" and "process" not in cpu.env
        assert len(started) == 2 and not warm.holds()  # the worker ended before the CPU's run began
        again = process.run_point(_config("mps"), warm=warm)
        assert again.status == "finished" and len(started) == 3
    assert not warm.holds()


def test_a_run_that_did_not_finish_ends_the_worker(fake_mps, monkeypatch):
    fake_mps()
    started = _counting(monkeypatch)
    with process.Warm() as warm:
        assert process.run_point(_config("mps"), warm=warm).status == "finished"
        bad = process.run_point(_config("mps", lr=1e30), warm=warm)  # its loss leaves the finite numbers
        assert bad.status == "failed" and not warm.holds()
        assert process.run_point(_config("mps"), warm=warm).status == "finished"
        assert len(started) == 2  # the run after the failure has a fresh process


def test_what_a_process_cannot_undo_never_shares_one():
    assert warm_module.shares(_config("mps")) and warm_module.shares(_config("cuda:1"))
    for cfg in (_config("cpu"), _config("mps", compile=True), _config("cuda", python="/usr/bin/python3"),
                RunConfig(model="train.py", dataset=SCRIPT, device="mps")):
        assert not warm_module.shares(cfg), cfg


def test_a_warm_worker_is_one_real_process_for_several_runs(monkeypatch, run_pids):
    """Across a real process boundary (the pipe, "done", the next job): the CPU is let in here only to have a
    device; the rule keeps it out of a tune."""
    monkeypatch.setattr(warm_module, "shares", lambda cfg: True)
    with process.Warm() as warm:
        results = [process.run_point(_config("cpu", b), warm=warm) for b in (8, 4)]
        assert [r.status for r in results] == ["finished", "finished"], [r.error for r in results]
        assert len(run_pids) == 1 and warm.holds()
        asked = iter([False])  # Stop once the run has started
        stopped = process.run_point(_config("cpu", steps=10_000), warm=warm, should_stop=lambda: next(asked, True))
        assert stopped.status == "cancelled" and not warm.holds()  # a stopped run's process is not used again
        assert len(run_pids) == 1


def test_cuda_fp32_candidates_have_a_tf32_axis_and_the_current_row_says_its_own():
    base = RunConfig(model="resnet18", dataset="synthetic", device="cuda", batch_size=64, tf32_conv=True)
    g = tune.grid(base, ["cuda"], batch_sizes=[64], precisions=["fp32", "bf16"], channels_last=[False],
                  compiled=[False], threads=[None], why_not=lambda c: "")
    labels = [c.label() for c in g.candidates]
    assert labels[0] == "fp32 + TF32 in convolutions, batch 64"  # the current settings first, their TF32 said
    assert set(labels) == {"fp32 + TF32 off, batch 64", "fp32 + TF32 in convolutions, batch 64",
                           "fp32 + TF32 in convolutions and matrix products, batch 64", "bf16, batch 64"}
    every = {c.tf32: c.config(base, 16, 3) for c in g.candidates if c.precision == "fp32"}
    assert (every["off"].tf32, every["off"].tf32_conv) == (False, False)
    assert (every["conv"].tf32, every["conv"].tf32_conv) == (False, True)
    assert every["all"].tf32
    mps = tune.grid(base, ["mps"], batch_sizes=[64], precisions=["fp32"], channels_last=[False], compiled=[False],
                    threads=[None], why_not=lambda c: "")
    assert [c.tf32 for c in mps.candidates] == [None]  # no TF32 but on CUDA
    row = {"key": "k", "label": "fp32, batch 64", "status": "measured", "baseline": False, "precision": "fp32",
           "channels_last": False, "compile": False, "batch_size": 64, "device": "cuda", "tf32": "all"}
    applied = tune_report.apply_to(RunConfig(device="cuda"), row)
    assert applied.tf32 and not applied.tf32_conv


def test_tf32_settings_are_set_for_the_run_and_put_back():
    import torch

    from mpsstudio.engine.run.steps import global_settings

    before = (torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32)
    with global_settings(RunConfig(tf32_conv=True)):
        assert (torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32) == (False, True)
    with global_settings(RunConfig(tf32=True)):
        assert (torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32) == (True, True)
    assert (torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32) == before


def test_a_bad_tf32_list_is_one_sentence(capsys):
    assert cli.main(["tune", "--model", "mlp", "--dataset", "synthetic", "--devices", "cpu",
                     "--tf32-to-try", "maybe"]) == cli.EXIT_BAD_INPUT
    assert "--tf32-to-try takes off, conv" in capsys.readouterr().err
    assert tune.parse_tf32("conv, all") == ["conv", "all"] and tune.parse_tf32(None) is None
    with pytest.raises(Exception):
        tune.parse_tf32("")
