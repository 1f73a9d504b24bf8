"""A tool's settings before it runs: the largest batch worth trying is a dataset's training samples (a run's batch is
at most that), said in the result; synthetic data and a model's own batches are not capped."""

from __future__ import annotations

from PIL import Image

from mpsstudio.engine.basics.config import RunConfig
from mpsstudio.engine.tools import maxbatch


def _folder(root, per_class: int = 30):
    for cls in ("cats", "dogs"):
        (root / cls).mkdir(parents=True)
        for i in range(per_class):
            Image.new("RGB", (8, 8), (i * 8, 0, 0)).save(root / cls / f"{i}.png")
    return root


def test_max_batch_on_a_small_folder_stops_at_its_training_samples(tmp_path):
    folder = _folder(tmp_path / "pets")
    r = maxbatch.search(RunConfig(model="mlp", dataset=str(folder), device="cpu"), memory_limit=2**30)
    train = r["cap"]
    assert 40 <= train < 60 and r["cap_source"].startswith(f"the {train:,} training samples of pets")
    assert r["largest_batch"] == train and r["capped"] and r["smallest_failed"] is None
    assert max(p["batch_size"] for p in r["probes"]) == train  # never probed past what a run could take
    assert f"the search stopped at the {train:,} training samples of pets (a run's batch is at most that)" in \
        r["sentence"]


def test_synthetic_data_is_not_capped_by_its_samples():
    r = maxbatch.search(RunConfig(model="mlp", dataset="synthetic", device="cpu"), memory_limit=2**30, cap=2048)
    assert r["cap"] == 2048 and r["cap_source"] == "asked"


# ---------------------------------------------------------------- guards before a run

def test_a_small_folder_is_guarded_before_run_and_each_fix_is_one_click(qtbot, tmp_path):
    from mpsstudio.engine.data import datasets, folder as folders
    from mpsstudio.engine.machine import devices
    from mpsstudio.engine.models import registry as models
    from mpsstudio.engine.run import guards
    from mpsstudio.gui.setup.panel import SetupPanel

    root = _folder(tmp_path / "pets")
    report = folders.inspect_folder(str(root))
    config = RunConfig(dataset=str(root))  # the default setup: batch 64, 2 epochs, 10 warm-up steps
    train = guards.train_samples(config, folder_report=report)
    assert train == len(datasets.load_dataset(str(root)).train)  # the split a run makes
    [first] = guards.guards(config, train, "pets")
    assert first.blocking and first.fix == {"batch_size": 16} and first.button == "Use Batch 16"
    assert first.sentence.startswith(f"Batch 64 is more than the {train} training samples of pets")

    panel = SetupPanel()
    qtbot.addWidget(panel)
    panel.set_catalog(models.list_models(), datasets.list_datasets(), [devices.cpu_device()])
    panel.add_folder_dataset(str(root), report)  # as the window does once a folder is checked
    panel.apply_config(config)
    assert panel.guard_box.isVisibleTo(panel) and not panel.run_button.isEnabled()
    assert panel.run_button.toolTip() == first.sentence
    panel.guard_button.click()  # batch 16: 3 steps an epoch, 2 epochs, 5 of 6 steps warm-up
    assert panel.configs()[0].batch_size == 16 and panel.run_button.isEnabled()
    second = panel.guard()
    assert not second.blocking and second.fix == {"epochs": 6} and "1 measured after the 10 warm-up steps" in \
        second.sentence
    panel.guard_button.click()
    assert panel.configs()[0].epochs == 6 and panel.guard() is None and not panel.guard_box.isVisibleTo(panel)


def test_guards_of_steps_runs_scripts_and_synthetic_data():
    from mpsstudio.engine.run import guards

    assert guards.guards(RunConfig(steps=3, epochs=None), None)[0].fix == {"steps": guards.STEPS_OFFERED}
    assert guards.guards(RunConfig(steps=50, epochs=None), None) == []
    assert guards.guards(RunConfig(model="x.py", dataset="script", steps=None, epochs=None), 1) == []
    synthetic = RunConfig(model="mlp", dataset="synthetic", batch_size=512, epochs=1)
    assert guards.train_samples(synthetic) == 1024  # two steps an epoch: 1 epoch is all warm-up but 1
    [g] = guards.guards(synthetic, guards.train_samples(synthetic))
    assert g.fix == {"epochs": 9} and not g.blocking
