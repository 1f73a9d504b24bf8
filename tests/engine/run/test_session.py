"""The one run path of the CLI and the window (engine.run.session): checks before any run, runs in turn."""

from __future__ import annotations

import pytest

from mpsstudio.engine.run import session, trainer
from mpsstudio.engine.basics.config import RunConfig
from mpsstudio.engine.basics.errors import UserError
from mpsstudio.engine.basics.events import Ended, Started
from tests.support.data import tiny_data


CFG = RunConfig(model="mlp", dataset="tiny", batch_size=16, steps=4, epochs=None, warmup_steps=1)


def test_plan_keeps_runnable_devices_and_says_why_others_are_left_out():
    plan = session.plan(CFG, ["cpu", "mps", "cpu", "tpu"])
    assert [c.device for c in plan.configs] == ["cpu"]
    assert any(line.startswith("skipping mps: mps is not available") for line in plan.skipped)
    assert any(line.startswith("skipping tpu:") for line in plan.skipped)


@pytest.mark.parametrize("config, devices, message", [
    (RunConfig(model="no_such_model"), ["cpu"], "Unknown model 'no_such_model'"),
    (RunConfig(batch_size=0), ["cpu"], "Batch size must be"),
    (CFG, [" ", ""], "No devices given"),
    (CFG, ["mps"], "None of the devices can run this (mps: mps is not available: not an Apple Silicon Mac)"),
])
def test_plan_refuses_bad_input_before_anything_runs(config, devices, message):
    with pytest.raises(UserError, match=message.replace("(", r"\(").replace(")", r"\)")):
        session.plan(config, devices)


def test_runs_go_in_turn_with_their_position_and_a_failure_does_not_stop_the_next(monkeypatch):
    events = []
    configs = [CFG.with_device("cpu"), CFG.with_device("cpu")]
    configs[0].options["note"] = "first"
    configs[1].options["note"] = "first"
    real_run = trainer.run
    calls = []

    def run(cfg, **kw):
        calls.append(kw["position"])
        if len(calls) == 1:  # the first run fails inside the engine
            return real_run(RunConfig(**{**cfg.to_dict(), "lr": float("nan")}), **kw)
        return real_run(cfg, **kw)
    monkeypatch.setattr(trainer, "run", run)
    results = session.run_configs(configs, on_event=events.append, data=tiny_data())
    assert calls == [(1, 2), (2, 2)]
    assert [r.status for r in results] == ["failed", "finished"]
    started = [e for e in events if isinstance(e, Started)]
    assert [(e.run_index, e.run_count) for e in started] == [(2, 2)]  # the failed one never started
    assert len([e for e in events if isinstance(e, Ended)]) == 2


def test_stop_between_devices_runs_no_more():
    stop = []
    results = session.run_configs([CFG, CFG], data=tiny_data(), should_stop=lambda: bool(stop),
                                  on_event=lambda e: stop.append(1) if isinstance(e, Ended) else None)
    assert len(results) == 1


def test_a_batch_larger_than_the_dataset_is_bad_input_before_any_run(monkeypatch):
    monkeypatch.setattr(session, "load_data", lambda cfg, progress=None: tiny_data(n=8))
    with pytest.raises(UserError, match="fewer than one batch of 16; use a batch size of at most 8"):
        session.prepare_data([CFG])


def test_a_dataset_that_breaks_while_loading_is_one_sentence(monkeypatch):
    def explode(cfg, progress=None):
        raise OSError("Input/output error\nat sector 7")
    monkeypatch.setattr(session, "load_data", explode)
    with pytest.raises(UserError) as err:
        session.run_configs([CFG])
    assert str(err.value) == ("The dataset tiny could not be loaded (OSError: Input/output error at sector 7); "
                              "check its files.")


def test_the_cli_and_the_window_both_run_through_run_isolated(monkeypatch, qtbot):
    """One run path: bench and the window's worker call process.run_isolated (a process per run, each running
    session.run_one), nothing else."""
    from mpsstudio import cli
    from mpsstudio.engine import process
    from mpsstudio.gui.jobs import run_job

    seen = []

    def fake(configs, **kw):
        seen.append([c.device for c in configs])
        return []
    monkeypatch.setattr(process, "run_isolated", fake)
    assert cli.main(["bench", "--model", "mlp", "--devices", "cpu", "--no-save"]) == 0
    worker = run_job([CFG])
    with qtbot.waitSignal(worker.ended, timeout=10_000):
        worker.start()
    worker.wait()
    assert seen == [["cpu"], ["cpu"]]


def test_a_batch_that_cannot_fit_in_memory_is_refused_before_decoding(monkeypatch):
    import psutil

    class Memory:
        available = 4096
    monkeypatch.setattr(psutil, "virtual_memory", lambda: Memory())
    monkeypatch.setattr(session, "load_data", lambda cfg, progress=None: tiny_data(n=64))
    with pytest.raises(UserError, match=r"One batch of 16 samples of 1x\d+x\d+ needs about .* KiB, more than the 4.0 KiB of memory free"):
        session.prepare_data([CFG])


# ---------------------------------------------------------------- the spare run process


def test_a_spare_is_made_for_a_device_and_never_used_for_another():
    """The spare prepares the device the next run starts on (child.warm_up): a run on another device, or with the
    other MPS-fallback setting, gets a fresh process and the spare is ended; configure() replaces it."""
    from mpsstudio.engine import process

    spare = process.Spare(mps_fallback=True, device="cpu")
    try:
        spare.fill()
        assert spare.wait_ready(30)
        assert spare.take(True, "cuda:0") is None  # another device: not used, and ended
        spare.fill()
        held = spare.take(True, "cpu")
        assert held is not None and held.device == "cpu"
        held.end()
        spare.fill()
        assert spare.take(False, "cpu") is None  # the other fallback setting
        spare.configure(True, "mps")
        assert spare.device == "mps" and spare.wait_ready(30)
        taken = spare.take(True, "mps")
        assert taken is not None and taken.device == "mps"
        taken.end()
        assert spare.take(True) is None  # nothing held until the next fill
    finally:
        spare.close()


def test_a_spare_s_warm_up_pays_the_first_run_s_costs_and_never_fails():
    """torch.optim's first optimizer imports torch._dynamo; a device that cannot be prepared is left for the run."""
    import sys

    from mpsstudio.engine.process.child import warm_up

    warm_up("cpu")
    assert "torch._dynamo" in sys.modules
    warm_up("cuda:7")  # no such GPU here: nothing raised (the run will say why it cannot use it)
    warm_up("tpu")  # not even a device torch knows
