"""The setup panel's input rows: synthetic data's Input and Classes, a folder's Image size, the model's own as default."""

from __future__ import annotations

from dataclasses import replace

import pytest

pytest.importorskip("pytestqt")

from mpsstudio.engine.basics.config import RunConfig
from mpsstudio.engine.basics.formatting import fmt_count
from mpsstudio.engine.data import datasets
from mpsstudio.engine.machine import devices
from mpsstudio.engine.models import registry as models
from mpsstudio.gui.setup.panel import SetupPanel
from tests.support.paths import ROOT


@pytest.fixture
def panel(qtbot):
    p = SetupPanel()
    qtbot.addWidget(p)
    p.set_catalog(models.list_models(), datasets.list_datasets(), [devices.cpu_device()])
    return p


def _visible(p: SetupPanel) -> set[str]:
    form = p.inputs.box.layout()
    rows = {"input": p.inputs.input_edit, "classes": p.inputs.classes_spin, "image size": p.inputs.image_size_spin}
    return {name for name, w in rows.items() if p.inputs.box.isVisibleTo(p) and form.isRowVisible(w)}


def _choose(p: SetupPanel, dataset: str) -> None:
    p.datasets.combo.setCurrentIndex(p.datasets.combo.findData(dataset))


def test_rows_follow_the_data(panel):
    assert _visible(panel) == set()  # shapes: a named dataset has its own shape
    _choose(panel, "synthetic")
    assert _visible(panel) == {"input", "classes"}
    spec = models.get_model_info("mlp").default_spec
    assert panel.inputs.input_edit.placeholderText() == f"{spec.channels} × {spec.height} × {spec.width} (model's)"
    assert panel.inputs.classes_spin.specialValueText() == f"{spec.num_classes} (model's)"
    assert panel.configs()[0].input_shape is None and panel.configs()[0].num_classes is None


def test_synthetic_input_becomes_the_config_and_the_summary(panel):
    _choose(panel, "synthetic")
    panel.inputs.input_edit.setText("3 × 64 × 48")
    panel.inputs.classes_spin.setValue(7)
    config = panel.configs()[0]
    assert (config.input_shape, config.num_classes, config.image_size) == ([3, 64, 48], 7, None)
    config.validate()
    assert "random 3×64×48 images · 7 classes" in panel.summary_text()
    params = models.parameter_count("mlp", models.input_spec_for("mlp", models.spec_of((3, 64, 48), 7)))
    assert f"mlp · {fmt_count(params)} parameters" in panel.summary_text()


@pytest.mark.parametrize("text", ["3,a", "3,224", "-1", "3x224x224x2", "9" * 12])
def test_a_shape_that_does_not_parse_keeps_run_off_and_says_why(panel, text):
    _choose(panel, "synthetic")
    panel.inputs.input_edit.setText(text)
    assert not panel.footer.run_button.isEnabled()
    assert panel.footer.run_button.toolTip().startswith("Give the input as C,H,W")
    assert "Give the input as C,H,W" in panel.summary_text()
    panel.inputs.input_edit.clear()
    assert panel.footer.run_button.isEnabled()


def test_a_shape_the_model_cannot_take_is_the_engines_sentence(panel):
    _choose(panel, "synthetic")
    panel.inputs.input_edit.setText("128")  # tokens, for an image model
    assert "takes image input, not tokens" in panel.summary_text()


def test_a_folder_takes_an_image_size(panel, tmp_path):
    from PIL import Image

    for name in ("cat", "dog"):
        (tmp_path / name).mkdir()
        for i in range(2):
            Image.new("RGB", (40, 30)).save(tmp_path / name / f"{i}.png")
    panel.apply_config(RunConfig(dataset=str(tmp_path), image_size=48))
    assert _visible(panel) == {"image size"}
    assert panel.configs()[0].image_size == 48
    panel.inputs.image_size_spin.setValue(panel.inputs.image_size_spin.minimum())  # back to the model's
    assert panel.configs()[0].image_size is None


def test_a_restored_setup_keeps_its_input(panel):
    config = RunConfig(dataset="synthetic", input_shape=[1, 28, 28], num_classes=3)
    panel.apply_config(config)
    assert panel.inputs.input_edit.text() == "1 × 28 × 28" and panel.inputs.classes_spin.value() == 3
    assert panel.configs()[0] == config
    # --image-size on synthetic data from the command line: the model's channels at that size
    panel.apply_config(RunConfig(dataset="synthetic", image_size=40))
    channels = models.get_model_info("mlp").default_spec.channels
    assert panel.configs()[0].input_shape == [channels, 40, 40] and panel.configs()[0].image_size is None
    # a named dataset drops what only synthetic data takes
    panel.apply_config(replace(config, dataset="shapes", input_shape=None, num_classes=None))
    assert panel.configs()[0].input_shape is None and _visible(panel) == set()


def test_a_model_files_declared_input_is_the_default(panel, tmp_path):
    path = tmp_path / "net.py"
    path.write_text("INPUT_SHAPE = (3, 96, 96)\nNUM_CLASSES = 5\n"
                    "def build_model(num_classes, input_shape):\n    raise SystemExit('never run here')\n")
    panel.apply_config(RunConfig(model=str(path), dataset="synthetic"))
    assert panel.inputs.input_edit.placeholderText() == "3 × 96 × 96 (model's)"
    assert panel.inputs.classes_spin.specialValueText() == "5 (model's)"
    assert "random 3×96×96 images · 5 classes" in panel.summary_text()


def test_the_summary_counts_a_built_ins_multiply_adds_and_never_runs_a_file(panel, tmp_path):
    _choose(panel, "synthetic")
    panel.inputs.input_edit.setText("1,28,28")
    macs = models.macs_per_sample("mlp", models.input_spec_for("mlp", models.spec_of((1, 28, 28), 10)))
    assert f"{fmt_count(macs)} MACs a sample (counted)" in panel.summary_text()
    path = tmp_path / "net.py"
    path.write_text("INPUT_SHAPE = (3, 8, 8)\ndef build_model(num_classes, input_shape):\n    raise SystemExit('no')\n")
    panel.apply_config(RunConfig(model=str(path), dataset="synthetic"))
    assert "MACs" not in panel.summary_text()


def test_a_model_that_makes_its_own_batches_has_no_input_rows(panel):

    two_inputs = ROOT / "examples" / "two_inputs.py"
    panel.apply_config(RunConfig(model=str(two_inputs), dataset="synthetic"))
    assert _visible(panel) == set()
    assert panel.configs()[0].input_shape is None and panel.configs()[0].num_classes is None
