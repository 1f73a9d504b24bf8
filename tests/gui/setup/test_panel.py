"""The setup panel: defaults, devices, precision, advanced options and folders become the right RunConfigs."""

from __future__ import annotations

from dataclasses import replace

import pytest

pytest.importorskip("pytestqt")

from mpsstudio.engine.data import datasets
from mpsstudio.engine.machine import devices
from mpsstudio.engine.models import registry as models
from mpsstudio.engine.basics.config import RunConfig
from mpsstudio.engine.machine.devices import Device
from mpsstudio.engine.basics.formatting import fmt_count
from mpsstudio.gui.setup.panel import LOADING_TEXT, NO_DEVICE_TIP, SetupPanel
from PySide6.QtCore import Qt

FAKE_MPS = Device(id="mps", kind="mps", available=True, name="Apple M2 (fake)")
FAKE_CUDA_OFF = Device(id="cuda", kind="cuda", available=False, reason="no NVIDIA GPU or driver found")
BF16_REASON = "bf16 autocast on MPS needs macOS 14 or newer (this Mac runs 13.6)"


@pytest.fixture
def fake_precisions(monkeypatch):
    """CPU runs everything; the fake MPS lacks bf16 (no real MPS here to ask)."""
    def reason(device, precision):
        return BF16_REASON if device.kind == "mps" and precision == "bf16" else ""
    from mpsstudio.engine.machine import precision

    monkeypatch.setattr(precision, "precision_unsupported_reason", reason)


@pytest.fixture
def make_panel(qtbot):
    def make(device_list=None) -> SetupPanel:
        panel = SetupPanel()
        qtbot.addWidget(panel)
        panel.set_catalog(models.list_models(), datasets.list_datasets(),
                          devices.discover_devices() if device_list is None else device_list)
        return panel
    return make


@pytest.fixture
def fake_panel(make_panel, fake_precisions):
    """CPU + a fake available MPS + an unavailable CUDA; only the CPU left checked."""
    panel = make_panel([devices.cpu_device(), FAKE_MPS, FAKE_CUDA_OFF])
    _check(panel, {"cpu"})
    return panel


def _check(panel: SetupPanel, ids: set[str]) -> None:
    for row in panel.devices.rows:
        if row.device.available:
            row.checkbox.setChecked(row.device.id in ids)


def _row(panel: SetupPanel, device_id: str):
    return next(row for row in panel.devices.rows if row.device.id == device_id)


def _precision_item(panel: SetupPanel, precision: str):
    return panel.training.precision_combo.model().item(panel.training.precision_combo.findData(precision))


def test_disabled_until_catalog_then_defaults(qtbot):
    panel = SetupPanel()
    qtbot.addWidget(panel)
    assert not panel._form.isEnabled() and not panel.footer.run_button.isEnabled()
    assert panel.summary_text() == LOADING_TEXT and panel.configs() == []

    panel.set_catalog(models.list_models(), datasets.list_datasets(), devices.discover_devices())
    assert panel._form.isEnabled() and panel.footer.run_button.isEnabled()
    assert panel.models.combo.currentData() == "mlp" and panel.datasets.combo.currentData() == "shapes"
    assert panel.checked_devices() == ["cpu"]  # mps and cuda are unavailable on this Linux machine
    assert panel.configs() == [RunConfig(device="cpu")]
    assert panel.footer.run_button.text() == "Run on CPU"


def test_apply_config_before_catalog_waits_for_it(qtbot):
    panel = SetupPanel()
    qtbot.addWidget(panel)
    panel.apply_config(RunConfig(model="mnist_cnn", batch_size=32))
    panel.set_catalog(models.list_models(), datasets.list_datasets(), devices.discover_devices())
    assert panel.configs() == [RunConfig(model="mnist_cnn", batch_size=32, device="cpu")]


def test_restored_device_that_is_gone_falls_back_to_cpu(qtbot):
    panel = SetupPanel()
    qtbot.addWidget(panel)
    panel.apply_config(RunConfig(device="mps", batch_size=16))  # saved on a Mac, restored on this Linux box
    panel.set_catalog(models.list_models(), datasets.list_datasets(), devices.discover_devices())
    assert panel.configs() == [RunConfig(device="cpu", batch_size=16)]


def test_refreshed_catalog_keeps_choices(fake_panel):
    fake_panel.training.batch_spin.setValue(512)
    fake_panel.models.combo.setCurrentIndex(fake_panel.models.combo.findData("resnet18"))
    _check(fake_panel, {"mps"})
    fake_panel.set_catalog(models.list_models(), datasets.list_datasets(), [devices.cpu_device(), FAKE_MPS])
    assert fake_panel.configs() == [RunConfig(model="resnet18", batch_size=512, device="mps")]


def test_every_available_device_checked_and_compared(make_panel, fake_precisions, qtbot):
    panel = make_panel([devices.cpu_device(), FAKE_MPS, FAKE_CUDA_OFF])
    assert panel.checked_devices() == ["cpu", "mps"]
    cpu, mps = panel.configs()
    assert (cpu.device, mps.device) == ("cpu", "mps")
    assert cpu.comparison_key() == mps.comparison_key()
    assert replace(mps, device="cpu") == cpu
    assert panel.footer.run_button.text() == "Compare 2 devices"

    with qtbot.waitSignal(panel.changed):
        _check(panel, {"mps"})
    assert panel.footer.run_button.text() == "Run on Apple GPU"
    assert [c.device for c in panel.configs()] == ["mps"]


def test_no_device_checked_disables_run_with_reason(fake_panel):
    _check(fake_panel, set())
    assert fake_panel.configs() == [] and fake_panel.checked_devices() == []
    assert not fake_panel.footer.run_button.isEnabled()
    assert fake_panel.footer.run_button.toolTip() == NO_DEVICE_TIP


def test_unavailable_device_is_disabled_with_reason(make_panel):
    panel = make_panel()
    mps, cuda = _row(panel, "mps"), _row(panel, "cuda")
    real = {d.id: d for d in devices.discover_devices()}
    assert not mps.checkbox.isEnabled() and mps.checkbox.toolTip() == real["mps"].reason != ""
    assert not cuda.checkbox.isEnabled() and cuda.checkbox.toolTip() == real["cuda"].reason != ""
    assert _row(panel, "cpu").checkbox.text().startswith("CPU — ")
    fake = make_panel([devices.cpu_device(), FAKE_MPS])
    assert _row(fake, "mps").checkbox.text() == "Apple GPU (MPS) — Apple M2 (fake)"


def test_precision_limited_to_what_every_checked_device_runs(fake_panel):
    bf16 = fake_panel.training.precision_combo.findData("bf16")
    assert _precision_item(fake_panel, "bf16").isEnabled()  # the CPU alone runs bf16
    fake_panel.training.precision_combo.setCurrentIndex(bf16)
    assert fake_panel.configs()[0].precision == "bf16"

    _check(fake_panel, {"cpu", "mps"})
    assert not _precision_item(fake_panel, "bf16").isEnabled()
    assert fake_panel.training.precision_combo.itemData(bf16, 3) == BF16_REASON  # 3 = ToolTipRole
    assert _precision_item(fake_panel, "fp16").isEnabled()
    assert [c.precision for c in fake_panel.configs()] == ["fp32", "fp32"]  # fell back

    _check(fake_panel, {"cpu"})
    assert _precision_item(fake_panel, "bf16").isEnabled()


def test_advanced_fields_map_into_the_config(fake_panel):
    assert not fake_panel.advanced_section.advanced.isVisibleTo(fake_panel)  # collapsed by default
    fake_panel.advanced_section.set_open(True)
    assert fake_panel.advanced_section.advanced.isVisibleTo(fake_panel)
    fake_panel.advanced_section.lr_box.setValue(0.0003)
    fake_panel.advanced_section.optimizer_combo.setCurrentIndex(fake_panel.advanced_section.optimizer_combo.findData("adamw"))
    fake_panel.advanced_section.warmup_spin.setValue(25)
    fake_panel.advanced_section.workers_spin.setValue(3)
    fake_panel.advanced_section.mode_combo.setCurrentIndex(fake_panel.advanced_section.mode_combo.findData("inference"))
    fake_panel.advanced_section.resident_check.setChecked(True)
    fake_panel.advanced_section.channels_last_check.setChecked(True)
    fake_panel.advanced_section.compile_check.setChecked(True)
    fake_panel.training.batch_spin.setValue(256)
    (config,) = fake_panel.configs()
    assert config == RunConfig(lr=0.0003, optimizer="adamw", warmup_steps=25, workers=3, mode="inference",
                               resident=True, channels_last=True, compile=True, batch_size=256)


def test_steps_and_epochs(fake_panel):
    fake_panel.training.length_unit.setCurrentIndex(fake_panel.training.length_unit.findData("steps"))
    assert (fake_panel.configs()[0].steps, fake_panel.configs()[0].epochs) == (200, None)
    fake_panel.training.length_spin.setValue(500)
    assert fake_panel.configs()[0].steps == 500
    fake_panel.training.length_unit.setCurrentIndex(fake_panel.training.length_unit.findData("epochs"))
    assert (fake_panel.configs()[0].steps, fake_panel.configs()[0].epochs) == (None, 2)
    fake_panel.training.length_unit.setCurrentIndex(fake_panel.training.length_unit.findData("steps"))
    assert fake_panel.training.length_spin.value() == 500  # each unit keeps its own number


def test_learning_rate_box_steps_and_shows_plain_numbers(fake_panel):
    box = fake_panel.advanced_section.lr_box
    assert box.text() == "0.01"
    box.stepBy(1)
    assert box.value() == pytest.approx(0.02)
    box.stepBy(2)
    assert box.value() == pytest.approx(0.1)
    box.stepBy(-4)
    assert box.value() == pytest.approx(0.005)
    assert box.text() == "0.005"


def test_add_folder_dataset_selects_it_once(fake_panel, qtbot, tmp_path):
    from pathlib import Path

    from mpsstudio.engine.data.folder import FolderReport

    folder = tmp_path / "flowers"
    report = FolderReport(root=Path(folder), classes=list("abcde"), counts={}, total=3670, skipped=[], modes=["RGB"],
                          sizes=[(64, 64)], channels=3, target_size=(64, 64))
    summary = report.summary()
    count = fake_panel.datasets.combo.count()
    with qtbot.waitSignal(fake_panel.changed):
        fake_panel.add_folder_dataset(str(folder), report)
    assert fake_panel.datasets.combo.currentText() == "flowers" and not fake_panel.datasets.combo.itemIcon(fake_panel.datasets.combo.currentIndex()).isNull()
    assert fake_panel.configs()[0].dataset == str(folder)
    tip = fake_panel.datasets.combo.itemData(fake_panel.datasets.combo.currentIndex(), 3)
    assert str(folder) in tip and summary in tip
    # mlp decodes folders at its preferred 32x32: 3*32*32 inputs -> 1024 -> 512 -> 256 -> 5 classes
    expected = 3 * 32 * 32 * 1024 + 1024 + 1024 * 512 + 512 + 512 * 256 + 256 + 256 * 5 + 5
    assert fmt_count(expected) == "3.80 M"
    assert "mlp · 3.80 M parameters" in fake_panel.summary_text()
    # what mlp gets, the model named once
    assert "flowers · 5 classes · 3,670 images · 32×32 RGB for mlp · 3.80 M parameters" in fake_panel.summary_text()

    after_first = fake_panel.datasets.combo.count()
    fake_panel.datasets.combo.setCurrentIndex(fake_panel.datasets.combo.findData("mnist"))
    fake_panel.add_folder_dataset(str(folder) + "/", report)
    assert fake_panel.datasets.combo.count() == after_first > count
    assert fake_panel.configs()[0].dataset == str(folder)


def test_apply_config_round_trips(fake_panel, tmp_path):
    config = RunConfig(model="resnet18", dataset="cifar10", device="mps", batch_size=128, steps=300, epochs=None,
                       warmup_steps=5, optimizer="adam", lr=0.0005, precision="fp16", channels_last=True,
                       compile=True, workers=2, resident=True, mode="inference", seed=7, tf32=True, threads=4,
                       options={"note": "kept"})
    fake_panel.apply_config(config)
    assert fake_panel.configs() == [config]

    folder = RunConfig(dataset=str(tmp_path / "cats"), device="cpu")
    fake_panel.apply_config(folder)
    assert fake_panel.configs() == [folder]
    assert fake_panel.datasets.combo.currentText() == "cats"


def test_model_file_entry(fake_panel, tmp_path, qtbot, monkeypatch):
    from mpsstudio.gui.setup.model_files import ModelFileGuard

    asked = []
    monkeypatch.setattr(ModelFileGuard, "ask", lambda self, path: asked.append(path) or True)
    path = tmp_path / "tiny_net.py"
    path.write_text("import torch.nn as nn\n\ndef build_model(num_classes, input_shape):\n"
                    "    return nn.Sequential(nn.Flatten(), nn.Linear(input_shape[0] * input_shape[1] * "
                    "input_shape[2], num_classes))\n")
    combo = fake_panel.models.combo
    from mpsstudio.gui.setup.rules import CHOOSE_FILE

    fake_panel.models.ask_file = lambda: ""  # cancelled: the previous model stays
    combo.setCurrentIndex(combo.findData(CHOOSE_FILE))
    assert combo.currentData() == "mlp"
    fake_panel.models.ask_file = lambda: str(path)
    combo.setCurrentIndex(combo.findData(CHOOSE_FILE))
    assert fake_panel.configs()[0].model == str(path)
    assert asked == [str(path)]  # chosen just now: the user is asked, then it is checked in its own process
    qtbot.waitUntil(lambda: "tiny_net.py · 7,850 parameters" in fake_panel.summary_text(), timeout=60_000)
    assert "runs its code" in fake_panel.summary_text()  # 28*28*10 + 10 on shapes


def test_summary_mentions_mlp_parameters_on_shapes(fake_panel):
    text = fake_panel.summary_text()
    assert text.startswith("shapes · 6,000 + 1,000 images · 1×28×28 · 10 classes — mlp")
    # 784 -> 1024 -> 512 -> 256 -> 10 = 1,462,538 parameters
    assert models.parameter_count("mlp", models.input_spec_for("mlp", datasets.load_dataset("shapes").spec)) \
        == 1_462_538
    assert "1.46 M parameters" in text
    assert fake_panel.footer.summary.text() == text


def test_summary_shows_the_error_sentence(fake_panel, monkeypatch):
    from mpsstudio.engine.basics.errors import UserError

    def refuse(name, spec):
        raise UserError("Model 'vgg16' needs more memory than this test allows.")
    monkeypatch.setattr(models, "parameter_count", refuse)
    fake_panel.models.combo.setCurrentIndex(fake_panel.models.combo.findData("vgg16"))
    assert fake_panel.summary_text().endswith("vgg16: Model 'vgg16' needs more memory than this test allows.")


def test_set_running_blocks_editing_and_run_becomes_stop(fake_panel, qtbot):
    fake_panel.set_running(True)
    assert not fake_panel._form.isEnabled()
    assert fake_panel.footer.run_button.isEnabled() and fake_panel.footer.run_button.text() == "Stop"
    with qtbot.waitSignal(fake_panel.stop_requested):
        fake_panel.footer.run_button.click()
    fake_panel.set_stopping()
    assert fake_panel.footer.run_button.text() == "Stopping…" and not fake_panel.footer.run_button.isEnabled()
    fake_panel.set_running(False)
    assert fake_panel._form.isEnabled() and fake_panel.footer.run_button.isEnabled()
    with qtbot.waitSignal(fake_panel.run_requested):
        fake_panel.footer.run_button.click()
    with qtbot.waitSignal(fake_panel.open_folder_requested):
        fake_panel.datasets.open_folder_button.click()


def test_a_restored_comparison_checks_all_its_devices(fake_panel):
    fake_panel.apply_config(RunConfig(batch_size=32, device="cpu"), ["cpu", "mps", "cuda:0"])
    assert fake_panel.checked_devices() == ["cpu", "mps"]  # cuda:0 is not available here
    assert [c.device for c in fake_panel.configs()] == ["cpu", "mps"]
    fake_panel.apply_config(RunConfig(device="mps"))
    assert fake_panel.checked_devices() == ["mps"]


def test_a_cuda_run_in_full_fp32_is_explained_and_tf32_is_a_switch(make_panel, fake_precisions):
    from mpsstudio.engine.basics.config import TF32_NOTE, RunConfig

    gpu = Device(id="cuda:0", kind="cuda", available=True, name="NVIDIA H100")
    panel = make_panel([devices.cpu_device(), gpu])
    _check(panel, {"cpu", "cuda:0"})
    assert TF32_NOTE in panel.summary_text() and not any(c.tf32 for c in panel.configs())
    panel.advanced_section.tf32_check.setChecked(True)
    assert TF32_NOTE not in panel.summary_text() and all(c.tf32 for c in panel.configs())
    panel.advanced_section.tf32_check.setCheckState(Qt.CheckState.PartiallyChecked)  # convolutions only, PyTorch's default
    assert all(c.tf32_conv and not c.tf32 for c in panel.configs()) and TF32_NOTE not in panel.summary_text()
    panel.apply_config(RunConfig(model="mlp", dataset="shapes", tf32_conv=True), ["cuda:0"])
    assert panel.advanced_section.tf32_check.checkState() == Qt.CheckState.PartiallyChecked
    panel.apply_config(RunConfig(model="mlp", dataset="shapes", tf32=False), ["cuda:0"])
    assert not panel.advanced_section.tf32_check.isChecked() and TF32_NOTE in panel.summary_text()
    _check(panel, {"cpu"})
    assert TF32_NOTE not in panel.summary_text()


MLX_HERE = {"cpu": "", "mps": "MLX's Metal GPU is not available here (it needs Apple silicon)",
            "cuda": "MLX here has no CUDA backend"}


def test_mlx_beside_pytorch_runs_each_checked_device_mlx_runs_on(fake_panel):
    fake_panel.frameworks.set_mlx(MLX_HERE)
    _check(fake_panel, {"cpu", "mps"})
    assert fake_panel.frameworks.mlx_check.isEnabled() and "runs on its CPU" in fake_panel.frameworks.mlx_check.toolTip()
    fake_panel.frameworks.mlx_check.setChecked(True)
    assert [(c.framework, c.device) for c in fake_panel.configs()] == [("torch", "cpu"), ("torch", "mps"),
                                                                        ("mlx", "cpu")]
    fake_panel.frameworks.torch_check.setChecked(False)
    assert [(c.framework, c.device) for c in fake_panel.configs()] == [("mlx", "cpu")]


def test_mlx_that_cannot_run_is_off_with_the_reason(fake_panel):
    fake_panel.frameworks.set_mlx({kind: "MLX is not installed; install it with pip install 'mpsstudio[mlx]'"
                        for kind in MLX_HERE})
    assert not fake_panel.frameworks.mlx_check.isEnabled() and "pip install 'mpsstudio[mlx]'" in fake_panel.frameworks.mlx_check.toolTip()
    assert [c.framework for c in fake_panel.configs()] == ["torch"]


def test_a_model_folder_is_the_model_with_its_fine_tuning(fake_panel, tmp_path):
    pytest.importorskip("transformers")
    from tests.support.hf_folders import gpt_causal_lm

    folder = str(gpt_causal_lm(tmp_path / "gpt"))
    assert not fake_panel.training.form.isRowVisible(fake_panel.training.finetune_combo)  # a built-in: no such row
    fake_panel.use_model_folder(folder, "Hugging Face GPT2LMHeadModel (causal LM) from gpt.")
    assert fake_panel.models.combo.currentData() == folder and fake_panel.datasets.combo.currentData() == "synthetic"
    assert fake_panel.training.form.isRowVisible(fake_panel.training.finetune_combo)
    assert not fake_panel.models.check_button.isVisible()  # safetensors: nothing to run to check it
    assert "30,720 parameters" in fake_panel.summary_text() and "runs its code" not in fake_panel.summary_text()
    # a causal LM predicts tokens: its vocabulary is said, not "2 classes"
    assert "causal LM, vocabulary 100" in fake_panel.summary_text() and "classes" not in fake_panel.summary_text()
    fake_panel.training.finetune_combo.setCurrentIndex(fake_panel.training.finetune_combo.findData("lora"))
    [config] = fake_panel.configs()
    assert config.model == folder and config.options["finetune"] == "lora"


def test_the_form_plans_through_the_engine_and_says_its_refusal(make_panel, fake_precisions):
    """The window's runs are session.plan_request's of its request: several GPUs with MLX refused as the CLI says."""
    from mpsstudio.engine.basics.errors import UserError
    from mpsstudio.engine.run import session

    gpus = [Device(id=f"cuda:{i}", kind="cuda", available=True, name=f"fake GPU {i}") for i in range(2)]
    panel = make_panel([devices.cpu_device(), *gpus])
    panel.frameworks.set_mlx({"cpu": "", "cuda": "MLX here has no CUDA backend"})
    panel.gpus.set_count(2)
    panel.gpus.combo.setCurrentIndex(panel.gpus.combo.findData([2]))
    _check(panel, {"cuda:0"})
    assert [(c.device, c.gpus) for c in panel.configs()] == [("cuda", 2)]
    assert panel.configs() == session.plan_request(panel.request(), panel.here()).configs
    _check(panel, {"cpu", "cuda:0"})
    panel.frameworks.mlx_check.setChecked(True)
    assert panel.request().frameworks == ("torch", "mlx") and panel.configs() == []
    with pytest.raises(UserError, match="compare frameworks on one device at a time"):
        panel.plan()


def test_a_model_folder_in_both_frameworks_plans_mlx_lm_unless_its_fine_tuning_is_pytorchs(fake_panel, tmp_path):
    """The window plans a folder's MLX side as the CLI does (session.plan_request: mlx-lm's plan_reason): LoRA and
    full in both, head-only PyTorch's alone with the reason."""
    pytest.importorskip("mlx_lm")
    from tests.support.hf_folders import llama_text_lm

    folder = str(llama_text_lm(tmp_path / "llama"))
    fake_panel.use_model_folder(folder, "Hugging Face LlamaForCausalLM (causal LM) from llama.")
    fake_panel.frameworks.set_mlx(MLX_HERE)
    fake_panel.frameworks.mlx_check.setChecked(True)
    combo = fake_panel.training.finetune_combo
    combo.setCurrentIndex(combo.findData("lora"))
    assert [(c.framework, c.options["finetune"]) for c in fake_panel.configs()] == [("torch", "lora"), ("mlx", "lora")]
    combo.setCurrentIndex(combo.findData("head"))
    assert [c.framework for c in fake_panel.configs()] == ["torch"]
    assert any("head-only fine-tuning is PyTorch's" in s for s in fake_panel.plan().skipped)


def test_the_mlx_weights_row_quantizes_the_mlx_side_only_where_mlx_is_ticked(fake_panel, tmp_path):
    """Training ▸ MLX weights (shown for a folder with MLX ticked): 4-bit planned on the MLX side only, said in the
    plan's notes; full fine-tuning of quantized weights left out with the reason, as the CLI's plan does."""
    pytest.importorskip("mlx_lm")
    from tests.support.hf_folders import llama_text_lm

    folder = str(llama_text_lm(tmp_path / "llama", hidden=64))
    fake_panel.use_model_folder(folder, "Hugging Face LlamaForCausalLM (causal LM) from llama.")
    training = fake_panel.training
    assert not training.form.isRowVisible(training.weights_combo)  # PyTorch alone: no MLX weights to choose
    fake_panel.frameworks.set_mlx(MLX_HERE)
    fake_panel.frameworks.mlx_check.setChecked(True)
    assert training.form.isRowVisible(training.weights_combo)
    training.finetune_combo.setCurrentIndex(training.finetune_combo.findData("lora"))
    training.weights_combo.setCurrentIndex(training.weights_combo.findData(4))
    configs = fake_panel.configs()
    assert [(c.framework, c.options.get("quantize")) for c in configs] == [("torch", None), ("mlx", 4)]
    assert configs[1].where == "MLX \u00b7 cpu \u00b7 4-bit"
    assert any("4-bit weights" in n and "not the same arithmetic" in n for n in fake_panel.plan().notes)
    training.finetune_combo.setCurrentIndex(training.finetune_combo.findData("full"))
    assert [c.framework for c in fake_panel.configs()] == ["torch"]
    assert any("trains LoRA adapters on its frozen weights" in s for s in fake_panel.plan().skipped)
    fake_panel.frameworks.mlx_check.setChecked(False)  # PyTorch alone: the row hides and quantizes nothing
    assert not training.form.isRowVisible(training.weights_combo)
    assert [c.options.get("quantize") for c in fake_panel.configs()] == [None]
