"""An MLX run beside PyTorch's (run/mlx/): measured by the same rules, parity before it is timed, and a twin that
differs refused with the layer that differs (MLX's CPU backend, mlx[cpu])."""

from __future__ import annotations

import textwrap

import pytest

pytest.importorskip("mlx.core")

from mpsstudio.engine.basics.config import RunConfig
from mpsstudio.engine.basics.errors import UserError
from mpsstudio.engine.machine import mlx as mlx_machine
from mpsstudio.engine.run import session, trainer
from mpsstudio.engine.run.mlx import steps as mlx_steps

QUICK = dict(model="mlp", dataset="synthetic", steps=6, warmup_steps=2, batch_size=32, epochs=None, framework="mlx")


def test_an_mlx_run_is_measured_and_records_its_parity():
    result = trainer.run(RunConfig(**QUICK))
    assert result.status == "finished", result.error
    s = result.summary
    assert s.measured_steps == 6 and s.windows >= 2 and s.samples_per_s > 0
    assert s.parity["passed"] is True and set(s.parity["checks"]) == {"forward", "loss", "step"}
    assert s.framework == "mlx" and result.env["mlx"] == mlx_machine.mlx_version()
    assert len(result.losses) == 8 and s.parameters == 1_708_298
    assert result.windows[0].memory is not None and s.memory_measure == "rss_growth"  # the process's, as PyTorch's CPU run


def test_work_a_step_leaves_unevaluated_is_timed_in_its_own_window(monkeypatch):
    """MLX is lazy: a step that never calls mx.eval computes nothing until its loss is read. The window's clock is read
    after its losses are, so the windows still hold the work: their throughput agrees with the wall clock's (an
    un-evaluated loop timed before the read looks ~100x faster)."""
    monkeypatch.setattr(mlx_steps.MlxSteps, "step", lambda self, x, y: self.body(x, y))
    result = trainer.run(RunConfig(**{**QUICK, "steps": 12}))
    s = result.summary
    assert result.status == "finished"
    assert s.samples_per_s < 2 * s.wall_samples_per_s


WRONG_TWIN = """
import mlx.nn as mnn
import torch.nn as nn

INPUT_SHAPE = (1, 8, 8)
NUM_CLASSES = 3

def build_model(num_classes, input_shape):
    return nn.Sequential(nn.Flatten(), nn.Linear(64, 32), nn.ReLU(), nn.Linear(32, num_classes))

class Flat(mnn.Module):
    def __call__(self, x):
        return x.reshape(x.shape[0], -1)

def build_mlx_model(num_classes, input_shape):
    model = mnn.Sequential(Flat(), mnn.Linear(64, 32), {act}, mnn.Linear(32, num_classes))
    model.input_layout = "nchw"
    return model
"""


def test_a_model_files_twin_that_differs_is_refused_with_the_layer(tmp_path):
    path = tmp_path / "wrong.py"
    path.write_text(textwrap.dedent(WRONG_TWIN.format(act="mnn.GELU()")))
    result = trainer.run(RunConfig(**{**QUICK, "model": str(path)}))
    assert result.status == "failed"
    assert "does not compute what it computes in PyTorch" in result.error
    assert "the first layer whose output differs is 2" in result.error and "its input agrees" in result.error
    assert result.summary.parity["passed"] is False and not result.windows


def test_a_model_files_right_twin_runs(tmp_path):
    path = tmp_path / "right.py"
    path.write_text(textwrap.dedent(WRONG_TWIN.format(act="mnn.ReLU()")))
    result = trainer.run(RunConfig(**{**QUICK, "model": str(path)}))
    assert result.status == "finished", result.error
    assert result.summary.parity["passed"]


def test_a_model_file_without_a_twin_is_told_what_to_define(tmp_path):
    path = tmp_path / "plain.py"
    path.write_text("import torch.nn as nn\ndef build_model(num_classes, input_shape):\n"
                    "    return nn.Sequential(nn.Flatten(), nn.LazyLinear(num_classes))\n")
    result = trainer.run(RunConfig(**{**QUICK, "model": str(path)}))
    assert result.status == "failed" and "has no build_mlx_model(num_classes, input_shape)" in result.error


@pytest.mark.parametrize("change, words", [
    (dict(channels_last=True), "channels_last is PyTorch's memory format"),
    (dict(tf32_conv=True), "TF32 in convolutions only is a PyTorch setting"),
    (dict(accumulate=2), "gradient accumulation"),
    (dict(gpus=2, device="cuda"), "several GPUs"),
    (dict(framework="jax"), "Unknown framework 'jax'"),
])
def test_settings_mlx_cannot_take_are_one_sentence(change, words):
    with pytest.raises(UserError, match=words):
        RunConfig(**{**QUICK, **change}).validate()


def test_a_plan_runs_each_device_in_each_framework_pytorch_first():
    found = session.plan(RunConfig(**{**QUICK, "framework": "torch"}), ["cpu", "mps"], frameworks=["mlx", "torch"])
    assert [(c.framework, c.device) for c in found.configs] == [("torch", "cpu"), ("mlx", "cpu")]
    assert any(line.startswith("skipping MLX \u00b7 gpu: MLX's Metal GPU is not available") for line in found.skipped)
    assert found.configs[0].where == "cpu" and found.configs[1].where == "MLX \u00b7 cpu"


def test_without_mlx_it_is_listed_as_unavailable_with_the_install_line(monkeypatch):
    monkeypatch.setattr(mlx_machine, "mlx_reason", lambda: "MLX is not installed; install it with pip install "
                                                           "'mpsstudio[mlx]'")
    found = session.plan(RunConfig(**QUICK), ["cpu"], frameworks=["torch", "mlx"])
    assert [c.framework for c in found.configs] == ["torch"]
    assert found.skipped == ["skipping MLX \u00b7 cpu: MLX is not installed; install it with pip install "
                             "'mpsstudio[mlx]'."]
    with pytest.raises(UserError, match="None of the devices can run this"):
        session.plan(RunConfig(**QUICK), ["cpu"], frameworks=["mlx"])


def test_a_model_without_a_twin_is_left_out_before_anything_runs():
    with pytest.raises(UserError, match="vgg16 has no MLX twin"):
        session.plan(RunConfig(**{**QUICK, "model": "vgg16"}), ["cpu"], frameworks=["mlx"])


def test_an_mlx_that_fails_to_initialize_says_the_import_behind_it(monkeypatch):
    """MLX's extension imports mlx._reprlib_fix from C at its start; where that fails (a frozen app that did not
    carry it, measured) nanobind says only "Encountered an error while initializing the extension": the sentence
    names its cause."""
    import builtins
    import sys

    real = builtins.__import__

    def broken(name, *args, **kwargs):
        if name == "mlx.core":
            try:
                raise ModuleNotFoundError("No module named 'mlx._reprlib_fix'", name="mlx._reprlib_fix")
            except ModuleNotFoundError as cause:
                raise ImportError("Encountered an error while initializing the extension.") from cause
        return real(name, *args, **kwargs)

    monkeypatch.delitem(sys.modules, "mlx.core")
    monkeypatch.setattr(builtins, "__import__", broken)
    mlx_machine.mlx_reason.cache_clear()
    try:
        said = mlx_machine.mlx_reason()
    finally:
        monkeypatch.undo()
        mlx_machine.mlx_reason.cache_clear()
    assert said.startswith("MLX is installed but does not load (Encountered an error while initializing the "
                           "extension: No module named 'mlx._reprlib_fix')"), said
