"""The setup form's rules (gui/setup/rules.py) as plain Python: importing them loads no Qt."""

from __future__ import annotations

import subprocess
import sys
from types import SimpleNamespace

import pytest

from mpsstudio.gui.setup import rules


def _device(id_, kind, available=True):
    return SimpleNamespace(id=id_, kind=kind, available=available, name=id_)


def test_the_rules_import_no_qt():
    code = ("import sys, mpsstudio.gui.setup.rules; "
            "print(any(m.startswith(('PySide6', 'shiboken6')) for m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "False"


def test_the_length_keeps_steps_and_epochs_apart():
    length = rules.Length(epochs=3)
    assert length.shown() == 3 and length.fields(3) == {"steps": None, "epochs": 3}
    assert length.switch("steps") and length.shown() == rules.DEFAULT_STEPS and not length.switch("steps")
    length.set(50)
    assert length.fields(50) == {"steps": 50, "epochs": None}
    length.switch("epochs")
    assert length.shown() == 3  # the epochs were kept while steps were shown
    length.restore(None, 7)
    assert (length.mode, length.epochs, length.steps) == ("epochs", 7, 50)
    length.restore(12, None)
    assert (length.mode, length.steps, length.epochs) == ("steps", 12, 7)


def test_gpu_counts_need_a_cuda_device_and_pytorch_needs_an_environment():
    assert rules.axes(["cpu", "cuda:0"], ["torch"], [None], [2]) == {
        "devices": ("cpu", "cuda:0"), "frameworks": ("torch",), "gpus": (2,), "pythons": (None,)}
    assert rules.axes(["cpu"], ["torch"], [None], [2])["gpus"] == ()  # no CUDA checked: the counts do not apply
    assert rules.axes(["cuda:0"], ["torch"], [None], [1])["gpus"] == ()  # one GPU a run: no ranks
    assert rules.axes(["cuda:0"], ["torch"], [None], [0, 1, 2, 4])["gpus"] == (1, 2, 4)
    assert rules.axes(["cpu"], ["torch", "mlx"], [], [])["frameworks"] == ("mlx",)  # every PyTorch unchecked


def test_early_stopping_and_the_best_epoch_are_for_epoch_runs_only():
    assert rules.epoch_fields(True, 3, True) == {"early_stop_patience": 3, "keep_best": True}
    assert rules.epoch_fields(True, 0, False) == {"early_stop_patience": None, "keep_best": False}
    assert rules.epoch_fields(False, 3, True) == {"early_stop_patience": None, "keep_best": False}


def test_the_run_button_says_what_will_run():
    cpu, mps, gpu = _device("cpu", "cpu"), _device("mps", "mps"), _device("cuda:0", "cuda")
    def name(d):
        return "Apple GPU" if d.kind == "mps" else d.id.upper()
    assert rules.run_words([], 1, [], name) == "Run"
    assert rules.run_words([mps], 1, [], name) == "Run on Apple GPU"
    assert rules.run_words([cpu, mps], 2, [], name) == "Compare 2 devices × 2 PyTorch"
    assert rules.run_words([cpu], 3, [], name) == "Compare 3 PyTorch on CPU"
    assert rules.run_words([gpu], 1, [2], name) == "Run on 2 GPUs"
    assert rules.run_words([cpu, gpu], 1, [1, 2, 4], name) == "Scale over 1, 2, 4 GPUs + 1 device"
    assert rules.run_problem("", 0, "") == rules.NO_PYTORCH
    assert rules.run_problem("The input shape is wrong.", 0, "") == "The input shape is wrong."
    assert rules.run_problem("", 1, "") == ""


def test_a_precision_a_checked_device_cannot_run_is_off_with_every_reason(monkeypatch):
    from mpsstudio.engine.machine import precision

    monkeypatch.setattr(precision, "precision_unsupported_reason",
                        lambda d, p: f"{p} is not on {d.id}" if d.kind == "mps" and p != "fp32" else "")
    monkeypatch.setattr(precision, "precision_caveat", lambda d, p: "slow on M1" if p == "bf16" else "")
    cpu, mps = _device("cpu", "cpu"), _device("mps", "mps")
    assert rules.precision_state([cpu, mps], "fp16") == (False, "fp16 is not on mps")
    assert rules.precision_state([cpu], "bf16") == (True, rules.PRECISION_TIPS["bf16"] + "\nslow on M1")
    assert rules.precision_state([cpu, mps], "fp32") == (True, rules.PRECISION_TIPS["fp32"])

    def broken(d, p):
        raise RuntimeError("no driver")
    monkeypatch.setattr(precision, "precision_unsupported_reason", broken)
    enabled, tip = rules.precision_state([mps], "fp16")
    assert not enabled and tip == "fp16 could not be checked on mps (no driver)"


@pytest.mark.parametrize("mode", ["steps", "epochs"])
def test_switching_to_the_shown_unit_changes_nothing(mode):
    length = rules.Length(mode=mode)
    assert not length.switch(mode)


def test_the_first_guard_is_the_engines_and_none_when_nothing_is_planned():
    from mpsstudio.engine.basics.config import RunConfig
    from mpsstudio.engine.data import datasets

    infos = {d.name: d for d in datasets.list_datasets()}
    assert rules.first_guard([], infos, {}) is None and rules.train_samples([], infos, {}) is None
    config = RunConfig(model="mlp", dataset="shapes", batch_size=60_000, steps=5, epochs=None)
    found = rules.first_guard([config], infos, {})
    assert found is not None and found.blocking and "60,000" in found.sentence
    assert rules.train_samples([config], infos, {}) == 6_000
    assert rules.dataset_title("~/photos/birds", {}) == "birds" and rules.dataset_title("shapes", infos) == "shapes"


def test_the_summary_facts_import_no_qt_and_count_once(monkeypatch, tmp_path):
    code = ("import sys, mpsstudio.gui.setup.summary; "
            "print(any(m.startswith(('PySide6', 'shiboken6')) for m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "False"
    from mpsstudio.engine.models import registry as models
    from mpsstudio.gui.setup.summary import SetupFacts

    facts = SetupFacts()
    facts.model_infos = {m.name: m for m in models.list_models()}
    spec = facts.model_default_spec("mlp")
    counted = []
    real = models.parameter_count
    monkeypatch.setattr(models, "parameter_count", lambda *a: counted.append(a) or real(*a))
    params = facts.parameters("mlp", spec, file_parameters=None)
    assert isinstance(params, int) and facts.parameters("mlp", spec, file_parameters=None) == params
    assert len(counted) == 1  # counted once
    line = facts.line("mlp", "shapes · 6,000 images", params, None)
    assert line.startswith("shapes · 6,000 images — mlp · ") and rules.MODEL_FILE_WARNING not in line
    assert rules.MODEL_FILE_WARNING in facts.line("/tmp/mine.py", "synthetic", "", None)
    mine = tmp_path / "mine.py"
    mine.write_text("import torch\ndef build_model(num_classes, input_shape):\n    return torch.nn.Linear(4, 2)\n")
    assert facts.parameters(str(mine), spec, file_parameters=lambda m, s: 42) == 42  # from its check, never run here
    assert "was not found" in facts.parameters(str(tmp_path / "gone.py"), spec, file_parameters=lambda m, s: 42)
