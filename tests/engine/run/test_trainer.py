"""The run loop: event order, the measurement rules, cancellation and failures."""

from __future__ import annotations

import math

import pytest
import torch

from mpsstudio.engine.models import registry as models
from mpsstudio.engine.run import trainer
from mpsstudio.engine.run.failures import explain_failure
from mpsstudio.engine.basics.config import RunConfig
from mpsstudio.engine.machine.devices import Device, resolve_device
from mpsstudio.engine.basics.events import Ended, EpochEnd, Started, Warmup, Window
from tests.support.data import tiny_data


def collect(config, **kw):
    events = []
    result = trainer.run(config, on_event=events.append, **kw)
    return result, events


def run_model_file(tmp_path, name: str, source: str, warmup_steps: int = 0):
    """Write a model file and run it on tiny data for 3 steps; returns (path, result)."""
    path = tmp_path / name
    path.write_text(source)
    cfg = RunConfig(model=str(path), dataset="tiny", batch_size=16, steps=3, epochs=None, warmup_steps=warmup_steps)
    result, _ = collect(cfg, data=tiny_data())
    return path, result


class FakeClockDevice(Device):
    """A CPU device whose clock only moves when it is synchronized: like a GPU whose work finishes at sync.

    A loop that read the clock without synchronizing first would see windows of 0 s (or of two syncs).
    """

    def __init__(self, clock, step=0.5):
        super().__init__(id="cpu", kind="cpu", available=True, name="fake", torch_device="cpu")
        object.__setattr__(self, "_clock", clock)
        object.__setattr__(self, "_step", step)
        object.__setattr__(self, "syncs", 0)

    def synchronize(self):
        self.syncs += 1
        self._clock[0] += self._step


def test_events_come_in_order_and_cover_every_step():
    cfg = RunConfig(model="mlp", dataset="tiny", batch_size=16, steps=40, epochs=None, warmup_steps=5)
    result, events = collect(cfg, data=tiny_data())
    assert result.status == "finished", result.error
    assert isinstance(events[0], Started) and isinstance(events[1], Warmup) and isinstance(events[-1], Ended)
    windows = [e for e in events if isinstance(e, Window)]
    assert windows and all(isinstance(e, Window) for e in events[2:-1])
    # every step's loss is reported, warm-up first, measured windows after it with no gap
    assert len(result.losses) == 45
    assert events[1].steps == 5 and len(events[1].losses) == 5
    assert windows[0].first_step == 6
    assert sum(len(w.losses) for w in windows) == 40
    assert [w.first_step for w in windows[1:]] == [w.first_step + len(w.losses) for w in windows[:-1]]
    assert result.summary.measured_steps == 40
    assert result.summary.warmup_steps == 5
    assert all(math.isfinite(v) for v in result.losses)


def test_throughput_is_samples_over_synchronized_window_time(monkeypatch):
    clock = [1000.0]
    monkeypatch.setattr(trainer.time, "perf_counter", lambda: clock[0])
    dev = FakeClockDevice(clock, step=0.5)
    # each window end "takes" 0.5 s; a 2 s window target lets windows grow to the cap of 32/8 = 4 steps
    cfg = RunConfig(model="mlp", dataset="tiny", batch_size=16, steps=32, epochs=None, warmup_steps=3, window_s=2.0)
    result, events = collect(cfg, data=tiny_data(), device=dev)
    assert result.status == "finished", result.error
    windows = [e for e in events if isinstance(e, Window)]
    assert len(windows) >= 2
    for w in windows:
        assert w.seconds == pytest.approx(0.5)
        assert w.samples == 16 * len(w.losses)
        assert w.samples_per_s == pytest.approx(w.samples / 0.5)
    # the warm-up is timed apart: one synchronized interval, not mixed into any window
    assert result.summary.warmup_s == pytest.approx(0.5)
    rates = sorted(w.samples_per_s for w in windows)
    assert result.summary.samples_per_s == pytest.approx(_median(rates))
    # windows grow from 1 step to the cap; no per-step sync: a couple per window, far fewer than steps
    assert [len(w.losses) for w in windows[:3]] == [1, 4, 4]
    assert dev.syncs <= 2 * len(windows) + 4 < 35


def _median(xs):
    n = len(xs)
    return xs[n // 2] if n % 2 else (xs[n // 2 - 1] + xs[n // 2]) / 2


def test_mps_synchronizes_at_window_boundaries_and_reads_mps_memory(fake_mps):
    """On a faked Mac whose GPU behaves like torch's MPS (tests/support/fake_mps.py): the model and batches live on the
    device, syncs happen at window boundaries only, and memory is the allocator's, in bytes."""
    from mpsstudio.engine.machine import devices

    fake = fake_mps()
    dev = devices.resolve_device("mps")
    # a window target no step reaches: windows are then capped at 1/8 of the steps, however slow a busy machine
    # is (with the default 0.1 s a loaded machine made every step a window, and every window two syncs)
    cfg = RunConfig(model="mlp", dataset="tiny", device="mps", batch_size=16, steps=48, epochs=None,
                    warmup_steps=4, window_s=60.0)
    result, events = collect(cfg, data=tiny_data(), device=dev)
    assert result.status == "finished", result.error
    windows = [e for e in events if isinstance(e, Window)]
    assert len(windows) <= 10  # the first window is one step, then windows of 6
    # synchronized at the start, at warm-up end, and at each window's end and restart: never per step
    assert len(windows) + 2 <= fake.syncs <= 2 * len(windows) + 6
    assert fake.syncs < 48
    model_bytes = sum(p.numel() * 4 for p in models.build_model("mlp", tiny_data().spec).parameters())
    assert all(type(w.memory) is int and w.memory >= model_bytes for w in windows)  # the model lives on the GPU
    assert all(w.memory_detail["driver_allocated"] >= w.memory for w in windows)
    assert all(w.memory_detail["recommended_max"] == fake.recommended_max for w in windows)
    # PyTorch's peak (torch.accelerator over the allocator's stats), not the tensors left at a window's end
    assert result.summary.peak_memory == max(w.memory_detail["peak"] for w in windows) > max(w.memory for w in windows)
    assert result.summary.memory_measure == "peak_allocated"


def test_cancel_within_one_window_keeps_what_ran():
    cfg = RunConfig(model="mlp", dataset="tiny", batch_size=16, steps=1000, epochs=None, warmup_steps=2)
    seen = []

    def on_event(e):
        seen.append(e)

    result = trainer.run(cfg, data=tiny_data(), on_event=on_event,
                         should_stop=lambda: any(isinstance(e, Window) for e in seen))
    assert result.status == "cancelled"
    windows = [e for e in seen if isinstance(e, Window)]
    assert len(windows) == 1
    assert len(result.losses) == 2 + len(windows[0].losses) < 1002
    assert isinstance(seen[-1], Ended) and seen[-1].result is result
    assert result.summary.samples_per_s == pytest.approx(windows[0].samples_per_s)


def test_nan_loss_fails_with_the_step(tmp_path):
    path = tmp_path / "nan_model.py"
    path.write_text(
        "import torch\n"
        "class M(torch.nn.Module):\n"
        "    def __init__(self, n, shape):\n"
        "        super().__init__(); self.lin = torch.nn.Linear(int(torch.tensor(shape).prod()), n)\n"
        "    def forward(self, x):\n"
        "        return self.lin(x.flatten(1)) * float('nan')\n"
        "def build_model(num_classes, input_shape):\n"
        "    return M(num_classes, input_shape)\n"
    )
    cfg = RunConfig(model=str(path), dataset="tiny", batch_size=16, steps=20, epochs=None, warmup_steps=0)
    result, events = collect(cfg, data=tiny_data())
    assert result.status == "failed"
    # NaN before any weight changed is the model's or its loss's, not the learning rate's; fp32: no fp32 advice
    assert result.error == ("The loss was NaN at step 1; the model or its loss makes it before any learning (check "
                            "the loss function and the inputs).")
    assert isinstance(events[-1], Ended)
    result, _ = collect(RunConfig(**{**cfg.to_dict(), "precision": "bf16"}), data=tiny_data())
    assert result.error.endswith("or use fp32 precision (this run used bf16).")


def test_a_cpu_allocation_failure_gets_the_out_of_memory_sentence():
    exc = RuntimeError("[enforce fail at alloc_cpu.cpp:117] data. DefaultCPUAllocator: can't allocate memory: you "
                       "tried to allocate 1099511627776 bytes. Error code 12 (Cannot allocate memory)")
    assert explain_failure(exc, RunConfig(batch_size=512)) == \
        "Batch size 512 ran out of memory on cpu; try a batch size of 256 or less."


def test_a_python_memory_error_does_not_blame_the_batch_alone():
    """A model that hoards Python objects raises MemoryError: a smaller batch may not help, so it says both."""
    assert explain_failure(MemoryError(), RunConfig(batch_size=512)) == (
        "The run ran out of memory on cpu (Python could not allocate more at batch size 512); try a smaller "
        "batch size, or check the model for memory it keeps.")


def test_a_model_with_the_wrong_output_shape_is_told_the_expected_one(tmp_path):
    path, result = run_model_file(tmp_path, "wrong.py", (
        "import torch\n"
        "def build_model(num_classes, input_shape):\n"
        "    return torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(64, num_classes + 3))\n"))
    assert result.status == "failed"
    assert result.error == (f"{path} returned an output of shape (16, 7); MPS Studio needs logits of shape "
                            "(N, num_classes), here (16, 4): return one score per class for each sample.")


def test_out_of_memory_suggests_a_smaller_batch(monkeypatch):
    def boom(self, x, y):
        raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB")

    from mpsstudio.engine.run.steps import Steps

    monkeypatch.setattr(Steps, "train", boom)
    monkeypatch.setattr(Steps, "train_amp", boom)
    cfg = RunConfig(model="mlp", dataset="tiny", batch_size=64, steps=5, epochs=None)
    result, _ = collect(cfg, data=tiny_data())
    assert result.status == "failed"
    assert result.error == "Batch size 64 ran out of memory on cpu; try a batch size of 32 or less."


def test_mps_missing_operator_is_explained():
    exc = NotImplementedError("The operator 'aten::_linalg_eigh' is not currently implemented for the MPS device. "
                              "If you want this op to be added...")
    msg = explain_failure(exc, RunConfig(device="mps"))
    assert msg.startswith("aten::_linalg_eigh is not supported on MPS")
    assert "turn on 'Run operations MPS lacks on the CPU' (--mps-fallback)" in msg


def test_data_errors_end_the_run_as_failed():
    class Broken(torch.utils.data.Dataset):
        def __len__(self):
            return 64

        def __getitem__(self, i):
            if i % 7 == 3:
                raise OSError("image file is truncated")
            return torch.zeros(1, 8, 8, dtype=torch.uint8), 0

    data = tiny_data()
    data.train = Broken()
    cfg = RunConfig(model="mlp", dataset="tiny", batch_size=8, steps=20, epochs=None)
    result, _ = collect(cfg, data=data)
    assert result.status == "failed"
    assert result.error.startswith("Reading the training data failed (image file is truncated)")


def test_bad_input_fails_with_one_sentence():
    result, events = collect(RunConfig(model="no_such_model", steps=5, epochs=None))
    assert result.status == "failed"
    assert "Unknown model 'no_such_model'" in result.error
    assert isinstance(events[-1], Ended)
    result, _ = collect(RunConfig(device="tpu", steps=5, epochs=None))
    assert result.status == "failed" and "The device must be cpu, mps, cuda or cuda:N, not 'tpu'" in result.error
    result, _ = collect(RunConfig(batch_size=0))
    assert result.status == "failed" and result.error.startswith("Batch size must be")


def test_batch_larger_than_dataset_is_bad_input():
    cfg = RunConfig(model="mlp", dataset="tiny", batch_size=1024, steps=5, epochs=None)
    result, _ = collect(cfg, data=tiny_data(n=100))
    assert result.status == "failed"
    assert "use a batch size of at most 100" in result.error


def test_epochs_validate_and_time_each_epoch():
    cfg = RunConfig(model="mlp", dataset="tiny", batch_size=32, epochs=3, steps=None, warmup_steps=2, lr=0.05)
    result, events = collect(cfg, data=tiny_data())
    assert result.status == "finished", result.error
    ends = [e for e in events if isinstance(e, EpochEnd)]
    assert [e.epoch for e in ends] == [1, 2, 3]
    assert len(result.losses) == 3 * (256 // 32)
    assert all(e.val_accuracy is not None and e.seconds > 0 for e in ends)
    assert result.summary.val_accuracy == ends[-1].val_accuracy
    assert result.summary.val_accuracy > 0.9  # the rows are trivially separable
    assert result.summary.epoch_s == [e.seconds for e in ends]


def test_inference_mode_does_not_train():
    data = tiny_data()
    cfg = RunConfig(model="mlp", dataset="tiny", batch_size=32, steps=16, epochs=None, mode="inference",
                    warmup_steps=2)
    result, _ = collect(cfg, data=data)
    assert result.status == "finished", result.error
    # a model that is not trained keeps its loss level: compare first and last quarter
    first, last = sum(result.losses[:4]) / 4, sum(result.losses[-4:]) / 4
    assert abs(first - last) < 0.5
    assert result.summary.samples_per_s > 0


def test_bf16_autocast_on_cpu_and_thread_count_restored():
    before = torch.get_num_threads()
    cfg = RunConfig(model="mlp", dataset="tiny", batch_size=16, steps=8, epochs=None, precision="bf16", threads=1)
    result, events = collect(cfg, data=tiny_data())
    assert result.status == "finished", result.error
    assert result.env["threads"] == 1
    assert torch.get_num_threads() == before


def test_resident_data_gives_the_same_losses_as_host_data():
    base = dict(model="mlp", dataset="tiny", batch_size=16, steps=12, epochs=None, warmup_steps=2)
    a, _ = collect(RunConfig(**base), data=tiny_data())
    b, _ = collect(RunConfig(**base, resident=True), data=tiny_data())
    assert a.losses == pytest.approx(b.losses, rel=1e-5)


def test_cpu_device_resolves_here():
    assert resolve_device("cpu").available


def test_cpu_denormals_are_flushed_during_a_run_and_restored_after():
    seen = []
    cfg = RunConfig(model="mlp", dataset="tiny", batch_size=16, steps=4, epochs=None, warmup_steps=0)
    result = trainer.run(cfg, data=tiny_data(),
                         on_event=lambda e: seen.append(torch.tensor(1e-40).item()) if isinstance(e, Window) else None)
    assert result.status == "finished", result.error
    assert seen and all(v == 0.0 for v in seen)  # flushed while running
    assert result.env["flush_denormal"] is True
    assert torch.tensor(1e-40).item() != 0.0  # the process is left as it was


@pytest.mark.long
def test_default_run_learns_the_built_in_dataset():
    """The default config (mlp on the generated shapes, 2 epochs) must really learn: > 90 % validation accuracy."""
    result, events = collect(RunConfig())
    assert result.status == "finished", result.error
    assert result.config.dataset == "shapes" and result.config.model == "mlp"
    assert result.summary.val_accuracy > 0.9
    assert len([e for e in events if isinstance(e, EpochEnd)]) == 2


def test_compile_in_the_frozen_app_is_refused_with_a_reason(monkeypatch):
    import sys as _sys

    monkeypatch.setattr(_sys, "frozen", True, raising=False)
    result, _ = collect(RunConfig(model="mlp", dataset="tiny", steps=2, epochs=None, compile=True), data=tiny_data())
    assert result.status == "failed"
    assert result.error.startswith("torch.compile cannot run in the MPS Studio app: on the Apple GPU PyTorch builds "
                                   "Metal kernels from its C++ headers (torch/include/c10/metal)")


def test_time_left_is_estimated_by_the_engine_from_every_step_since_warm_up(monkeypatch):
    clock = [1000.0]
    monkeypatch.setattr(trainer.time, "perf_counter", lambda: clock[0])
    cfg = RunConfig(model="mlp", dataset="tiny", batch_size=16, steps=32, epochs=None, warmup_steps=3, window_s=2.0)
    result, events = collect(cfg, data=tiny_data(), device=FakeClockDevice(clock, step=0.5))
    assert result.status == "finished", result.error
    windows = [e for e in events if isinstance(e, Window)]
    warmup_s = result.summary.warmup_s
    for w in windows:  # the pace of all measured steps so far, times the steps left
        done, left = w.steps_done - 3, w.total_steps - w.steps_done
        assert w.eta_s == pytest.approx((w.elapsed_s - warmup_s) / done * left)
    assert windows[-1].eta_s == 0.0


def test_stop_is_honoured_during_warm_up():
    """Stop no longer waits for the warm-up to end (it took minutes with a slow model)."""
    cfg = RunConfig(model="mlp", dataset="tiny", batch_size=16, steps=50, epochs=None, warmup_steps=40)
    seen = []

    def stop_after_three_steps() -> bool:  # asked twice during setup, once before the idle reading, then after
        seen.append(1)                      # each warm-up step
        return len(seen) >= 6
    result, events = collect(cfg, data=tiny_data(), should_stop=stop_after_three_steps)
    assert result.status == "cancelled"
    assert len(result.losses) == 3 and result.summary.windows == 0  # the steps run so far are kept
    assert result.summary.warmup_s is None  # the warm-up did not finish, so it is not reported


def test_stop_is_honoured_during_setup():
    cfg = RunConfig(model="mlp", dataset="tiny", batch_size=16, steps=5, epochs=None, warmup_steps=1)
    result, events = collect(cfg, data=tiny_data(), should_stop=lambda: True)
    assert result.status == "cancelled" and result.losses == []
    assert [type(e).__name__ for e in events] == ["Ended"]


def test_a_model_calling_sys_exit_fails_the_run_and_not_the_program(tmp_path):
    _, result = run_model_file(tmp_path, "exits.py", (
        "import sys, torch\n"
        "class M(torch.nn.Linear):\n"
        "    def forward(self, x):\n"
        "        sys.exit(3)\n"
        "def build_model(num_classes, input_shape):\n"
        "    return M(64, num_classes)\n"))
    assert result.status == "failed"
    assert result.error == ("The model's code called sys.exit(3) during the run; a model file must not exit the "
                            "program.")


def test_a_model_with_lazy_layers_runs_and_counts_its_parameters_once_built(tmp_path):
    _, result = run_model_file(tmp_path, "lazy.py", (
        "import torch\n"
        "def build_model(num_classes, input_shape):\n"
        "    return torch.nn.Sequential(torch.nn.Flatten(), torch.nn.LazyLinear(num_classes))\n"), warmup_steps=1)
    assert result.status == "finished", result.error
    assert result.summary.parameters == 64 * 4 + 4


@pytest.mark.long
@pytest.mark.processes  # the run must be a process apart from the busy ones this test starts
def test_a_run_while_other_processes_keep_the_cpu_busy_is_noisy_with_the_cause_named():
    import os
    import subprocess
    import sys

    from mpsstudio.engine.process import run_isolated

    # the run in its own process, as the window and the CLI run it: the busy loops are other programs to it
    spinners = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(min(os.cpu_count() or 1, 8))]
    try:
        [result] = run_isolated([RunConfig(model="mlp", dataset="synthetic", steps=60, warmup_steps=5, threads=1,
                                           window_s=0.02)])
    finally:
        for p in spinners:
            p.kill()
            p.wait()
    assert result.status == "finished"
    load = result.env["host_load"]
    assert load["other_cpu_percent"] >= 15, load
    assert result.summary.stability == "noisy"
    assert "other programs used" in result.summary.stability_reason


def test_cpu_memory_is_the_runs_growth_and_named_so():
    result, events = collect(RunConfig(model="mlp", dataset="synthetic", steps=20, warmup_steps=2))
    s = result.summary
    assert s.memory_measure == "rss_growth"
    import psutil

    # growth over the level before the run: far below the whole process (Python, torch, the test runner)
    assert s.peak_memory is None or s.peak_memory < psutil.Process().memory_info().rss / 2
    assert "host" in result.env and "host_load" in result.env
    assert s.s_per_epoch_estimate and "s_per_epoch" not in s.as_dict() and s.s_per_epoch_measured is None



def test_a_run_that_fails_in_its_setup_is_listed_under_this_machine_and_never_started():
    """Failed runs were listed under "unknown machine" (or the bare host name) while finished ones said the CPU's
    label, and their energy read "recorded before MPS Studio measured energy"."""
    from mpsstudio.engine.machine import environment

    failed = trainer.run(RunConfig(model="mlp", dataset="no-such-dataset", steps=2))
    assert failed.status == "failed" and failed.machine == environment.identity()["machine_label"]
    assert failed.summary.energy_reason == "not measured (the run ended before its first step)"
