"""A window's bookkeeping on a GPU: done while the device computes the next step, and never lost."""

from __future__ import annotations

import pytest

from mpsstudio.engine.basics.config import RunConfig
from mpsstudio.engine.basics.events import Ended, Warmup, Window
from mpsstudio.engine.models import registry as models
from mpsstudio.engine.run import trainer

from .test_trainer import tiny_data


def _count_forwards(monkeypatch, fail_at_step: int | None = None) -> dict:
    """Each forward pass of the model as built counted (`calls`); once the warm-up has ended (`base`: forwards
    before step 1, set by the test at the Warmup event), step `fail_at_step`'s forward raises, as a model that
    breaks mid-run does."""
    state = {"calls": 0, "base": None}
    real = models.build_model

    def build(name, spec):
        model = real(name, spec)

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
    assert [w["first_step"] + w["steps"] - 1 for w in result.windows] == [e.steps_done for e, _ in windows]


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
    assert [w["first_step"] + w["steps"] - 1 for w in result.windows] == [5, 10, 15]
    assert isinstance(seen[-1], Ended)
