"""A window's bookkeeping on a GPU: done while the device computes the next step, and never lost."""

from __future__ import annotations

import pytest

from mpsstudio.engine.basics.config import RunConfig
from mpsstudio.engine.basics.events import Ended, Warmup, Window
from mpsstudio.engine.models import registry as models
from mpsstudio.engine.run import trainer
from tests.support.data import tiny_data



def _count_forwards(monkeypatch, fail_at_step: int | None = None) -> dict:
    """Each forward pass of the model as built counted (`calls`); once the warm-up has ended (`base`: forwards
    before step 1, set by the test at the Warmup event), step `fail_at_step`'s forward raises, as a model that
    breaks mid-run does."""
    state = {"calls": 0, "base": None}
    real = models.build_model

    def build(name, spec, options=None):
        model = real(name, spec, options)

        def pre(module, args):
            state["calls"] += 1
            if state["base"] is not None and state["calls"] - state["base"] == fail_at_step:
                raise RuntimeError("the model broke at this step")
        model.register_forward_pre_hook(pre)
        return model
    monkeypatch.setattr(models, "build_model", build)
    return state


@pytest.mark.parametrize("device", ["cpu", "mps"])
def test_a_gpu_window_is_recorded_once_the_next_step_is_queued(fake_mps, monkeypatch, device):
    """On a GPU the device computes while the host does a window's bookkeeping: its record and event come after the
    next step is queued (on an H100 that bookkeeping at idle cost resnet18 3 % of its wall-clock throughput). On
    the CPU, which computes the step itself, nothing is gained by waiting: the event comes at the window's end."""
    if device == "mps":
        fake_mps()
    state = _count_forwards(monkeypatch)
    seen = []
    cfg = RunConfig(model="mlp", dataset="tiny", device=device, batch_size=16, steps=40, epochs=None,
                    warmup_steps=4, window_s=60.0)
    result = trainer.run(cfg, data=tiny_data(), on_event=lambda e: seen.append((e, state["calls"])))
    assert result.status == "finished", result.error
    [before] = [n - 4 for e, n in seen if isinstance(e, Warmup)]  # forwards before the first step (set-up checks)
    windows = [(e, n - before) for e, n in seen if isinstance(e, Window)]
    assert len(windows) >= 4 and windows[-1][0].steps_done == 44
    ahead = 1 if device == "mps" else 0
    assert all(n == e.steps_done + ahead for e, n in windows[:-1])
    assert windows[-1][1] == 44  # the last window is recorded at once: there is no next step
    assert [w.first_step + w.steps - 1 for w in result.windows] == [e.steps_done for e, _ in windows]


def test_a_step_that_fails_after_a_gpu_window_keeps_that_window(fake_mps, monkeypatch):
    """The step right after a window fails before that window's bookkeeping ran: the window is still recorded."""
    fake_mps()
    # windows of 1 step, then of 5 (the cap: 40 steps / 8): the 3rd ends at step 4 + 1 + 5 + 5 = 15
    cfg = RunConfig(model="mlp", dataset="tiny", device="mps", batch_size=16, steps=40, epochs=None,
                    warmup_steps=4, window_s=60.0)
    state = _count_forwards(monkeypatch, fail_at_step=16)
    seen = []

    def on_event(e):
        seen.append(e)
        if isinstance(e, Warmup):
            state["base"] = state["calls"] - 4
    result = trainer.run(cfg, data=tiny_data(), on_event=on_event)
    assert result.status == "failed" and "the model broke at this step" in result.error
    windows = [e for e in seen if isinstance(e, Window)]
    assert [w.steps_done for w in windows] == [5, 10, 15]
    assert [w.first_step + w.steps - 1 for w in result.windows] == [5, 10, 15]
    assert isinstance(seen[-1], Ended)


class _StreamClock:
    """CUDA's events as the run loop uses them, on the CPU: a mark holds the device time of the steps queued before
    it (one second a forward pass here), and the loop reads it only after the next step is queued."""

    def __init__(self, state):
        self.state, self.reads = state, []

    def install(self, monkeypatch):
        from mpsstudio.engine.run import windows

        clock = self

        class Mark:
            def __init__(self):
                self.t = float(clock.state["calls"])

            def synchronize(self):
                clock.reads.append(clock.state["calls"])

            def elapsed_time(self, end):
                return (end.t - self.t) * 1000.0
        monkeypatch.setattr(windows.StreamMarks, "__init__", lambda marks, device: setattr(marks, "enabled", True))
        monkeypatch.setattr(windows.StreamMarks, "mark", lambda marks: Mark())


def test_cuda_windows_are_timed_by_marks_in_the_stream_read_once_the_next_step_is_queued(monkeypatch):
    """On CUDA a window's end is a mark in the stream and its losses a copy queued beside it: no drain. The host
    reads both once the next step is queued, and the window's seconds are the device's between two marks."""
    state = _count_forwards(monkeypatch)
    clock = _StreamClock(state)
    clock.install(monkeypatch)
    seen = []
    cfg = RunConfig(model="mlp", dataset="tiny", device="cpu", batch_size=16, steps=40, epochs=None, warmup_steps=4,
                    window_s=60.0)
    result = trainer.run(cfg, data=tiny_data(), on_event=lambda e: seen.append((e, state["calls"])))
    assert result.status == "finished", result.error
    [before] = [n - 4 for e, n in seen if isinstance(e, Warmup)]
    windows = [(e, n - before) for e, n in seen if isinstance(e, Window)]
    assert len(windows) >= 4
    assert all(n == e.steps_done + 1 for e, n in windows[:-1])  # recorded once the next step was queued
    assert [w.seconds for w in result.windows] == [float(w.steps) for w in result.windows]  # the marks' time
    assert len(result.losses) == 44 and all(isinstance(v, float) for v in result.losses)


def test_a_nan_in_a_window_timed_by_marks_names_its_step(monkeypatch):
    import torch

    state = _count_forwards(monkeypatch)
    _StreamClock(state).install(monkeypatch)
    real = models.build_model

    def build(name, spec, options=None):
        model = real(name, spec, options)
        model.register_forward_hook(lambda m, args, out: out * float("nan") if state["calls"] - 4 >= 12 else out)
        return model
    monkeypatch.setattr(models, "build_model", build)
    cfg = RunConfig(model="mlp", dataset="tiny", device="cpu", batch_size=16, steps=40, epochs=None, warmup_steps=4,
                    window_s=60.0)
    result = trainer.run(cfg, data=tiny_data())
    assert result.status == "failed" and "step" in result.error.lower() and "nan" in result.error.lower()
    losses = torch.tensor(result.losses)
    first = int(torch.isnan(losses).nonzero()[0])
    assert first == 4 + 12 - 1 and torch.isnan(losses[first:]).all()  # kept once: no finite loss after the NaNs
    assert f"NaN at step {first + 1};" in result.error  # the step the window held, counted from the first
