"""A tool's settings before it runs: the largest batch worth trying is a dataset's training samples (a run's batch is
at most that), said in the result; synthetic data and a model's own batches are not capped."""

from __future__ import annotations

import pytest
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
    assert panel.footer.guard_row.box.isVisibleTo(panel) and not panel.footer.run_button.isEnabled()
    assert panel.footer.run_button.toolTip() == first.sentence
    panel.footer.guard_row.button.click()  # batch 16: 3 steps an epoch, 2 epochs, 5 of 6 steps warm-up
    assert panel.configs()[0].batch_size == 16 and panel.footer.run_button.isEnabled()
    second = panel.guard()
    assert not second.blocking and second.fix == {"epochs": 6} and "1 measured after the 10 warm-up steps" in \
        second.sentence
    panel.footer.guard_row.button.click()
    assert panel.configs()[0].epochs == 6 and panel.guard() is None and not panel.footer.guard_row.box.isVisibleTo(panel)


def test_guards_of_steps_runs_scripts_and_synthetic_data():
    from mpsstudio.engine.run import guards

    assert guards.guards(RunConfig(steps=3, epochs=None), None)[0].fix == {"steps": guards.STEPS_OFFERED}
    assert guards.guards(RunConfig(steps=50, epochs=None), None) == []
    assert guards.guards(RunConfig(model="x.py", dataset="script", steps=None, epochs=None), 1) == []
    synthetic = RunConfig(model="mlp", dataset="synthetic", batch_size=512, epochs=1)
    assert guards.train_samples(synthetic) == 1024  # two steps an epoch: 1 epoch is all warm-up but 1
    [g] = guards.guards(synthetic, guards.train_samples(synthetic))
    assert g.fix == {"epochs": 9} and not g.blocking


# ---------------------------------------------------------------- the sheets

def _sheet(qtbot, kind, config=None, devices=("cpu",), runs=(), train=None):
    from mpsstudio.gui.tools.sheet import ToolSheet

    sheet = ToolSheet(kind, config or RunConfig(model="mlp", dataset="synthetic", device="cpu"), list(devices),
                      list(runs), train)
    qtbot.addWidget(sheet)
    return sheet


def test_each_sheet_gives_the_clis_options(qtbot):
    from mpsstudio.engine.tools import maxbatch, sweep

    s = _sheet(qtbot, "sweep", devices=("cpu", "mps"))
    assert s.chosen()["batch_sizes"] == sweep.default_batch_sizes()
    assert s.chosen()["payload"] == {"steps": sweep.DEFAULT_STEPS, "warmup": sweep.DEFAULT_WARMUP}
    s.fields["batch_sizes"].setText("8, 4, 64")
    s.fields["steps"].setValue(50)
    assert s.chosen()["batch_sizes"] == [4, 8, 64] and s.chosen()["payload"]["steps"] == 50
    assert s.plan.text().startswith("6 runs (3 batch sizes × 2 devices) of 3 warm-up + 50 measured steps; how long: "
                                    "unknown until the first point")
    m = _sheet(qtbot, "max-batch")
    assert m.chosen()["payload"] == {"memory_limit": None, "cap": maxbatch.DEFAULT_CAP}
    m.fields["memory_limit"].setText("1.5G")
    assert m.chosen()["payload"]["memory_limit"] == 3 * 2**29
    assert not m.fields["at_batch"].isEnabled()  # the batch of the longest-sequence search only
    m.fields["longest_sequence"].setChecked(True)
    m.fields["at_batch"].setValue(8)
    assert m.fields["at_batch"].isEnabled()
    assert m.chosen()["payload"] == {"memory_limit": 3 * 2**29, "cap": maxbatch.DEFAULT_CAP, "axis": "seq_len",
                                     "at": 8}
    assert "of the sequence length at batch 8" in m.plan.text()
    i = _sheet(qtbot, "inspect")
    i.fields["batch_size"].setValue(16)
    assert i.chosen()["config"].batch_size == 16
    d = _sheet(qtbot, "diagnose")
    assert d.chosen()["payload"] == {"layers": True, "after_steps": 0}
    b = _sheet(qtbot, "deploy-bench")
    b.fields["compress"]["int8"].setChecked(True)
    assert b.chosen()["payload"] == {"batch_sizes": [1, 8, 32], "compress": ["int8"]}


@pytest.mark.parametrize("kind, field, text, said", [
    ("sweep", "batch_sizes", "1, a", "Batch sizes must be whole numbers"),
    ("max-batch", "memory_limit", "lots", "The memory limit must be a size such as 8G"),
    ("deploy-bench", "batch_sizes", "0", "Batch sizes must be whole numbers"),
])
def test_a_setting_the_engine_refuses_keeps_start_off_with_its_sentence(qtbot, kind, field, text, said):
    sheet = _sheet(qtbot, kind)
    sheet.fields[field].setText(text)
    assert not sheet.start_button.isEnabled() and said in sheet.problem.text()
    sheet.accept()
    assert sheet.result() == 0


def test_a_small_folders_sheet_caps_the_search_and_an_earlier_run_gives_an_estimate(qtbot):
    from mpsstudio.engine.basics.results import RunResult

    m = _sheet(qtbot, "max-batch", train=54)
    assert m.fields["max_batch"].value() == 54 and "the 54 training samples" in m.plan.text()
    earlier = RunResult(config=RunConfig(model="mlp", dataset="synthetic", device="cpu"), status="finished")
    earlier.summary = earlier.summary.replaced(samples_per_s=1000.0)
    s = _sheet(qtbot, "sweep", runs=[earlier])
    s.fields["batch_sizes"].setText("10, 100")  # (3 + 24) steps x 110 samples at 1,000 samples/s, and a process start per point
    assert "; about 13.0 s (estimated from your last runs of this setup; could be 2-3× off)" in s.plan.text()


@pytest.mark.usefixtures("no_leftovers")
def test_the_tools_menu_opens_the_sheet_and_runs_what_it_chose(qtbot, monkeypatch):
    from tests.support.gui import open_window

    w = open_window(qtbot)
    try:
        w.setup.apply_config(RunConfig(model="mlp", dataset="synthetic"), ["cpu"])
        asked, started = [], []
        monkeypatch.setattr(w, "ask_tool_settings", lambda kind, config, devices, train: asked.append(
            (kind, devices, train)) or None)
        w.menus.tool_actions[0].trigger()  # Batch-Size Sweep…, cancelled
        assert asked == [("sweep", ["cpu"], 1024)] and w.state.tool_job is None
        monkeypatch.setattr(w, "ask_tool_settings", lambda kind, config, devices, train: {
            "config": config, "batch_sizes": [2, 4], "payload": {"steps": 6, "warmup": 1}})
        monkeypatch.setattr(w, "start_tool", lambda *a, **k: started.append((a, k)))
        w.menus.tool_actions[0].trigger()
        [(args, kwargs)] = started
        assert args[0] == "sweep" and kwargs["batch_sizes"] == [2, 4] and kwargs["devices"] == ["cpu"]
        assert kwargs["payload"] == {"steps": 6, "warmup": 1}
    finally:
        w.close()


def test_the_generation_sheet_gives_the_commands_payload(qtbot):
    from mpsstudio.engine.tools.generate import words

    s = _sheet(qtbot, "generate", devices=("cpu", "mps"))
    assert s.chosen()["payload"] == {"devices": ["cpu", "mps"], "contexts": list(words.CONTEXTS),
                                     "new_tokens": words.NEW_TOKENS, "repeats": words.REPEATS,
                                     "precisions": ["fp32"], "batch": 1, "frameworks": ["torch"]}
    s.fields["frameworks"]["mlx"].setChecked(True)  # mlx-lm beside transformers (installed here: mlx-lm[cpu])
    assert s.chosen()["payload"]["frameworks"] == ["torch", "mlx"]
    assert "in fp32 with PyTorch and with MLX (mlx-lm)" in s.plan.text()
    s.fields["contexts"].setText("256, 1024")
    s.fields["new_tokens"].setValue(32)
    assert s.chosen()["payload"]["contexts"] == [256, 1024] and s.chosen()["payload"]["new_tokens"] == 32
    assert s.plan.text().startswith("Generates 32 tokens after 256, 1,024 tokens of context on cpu, mps in fp32")
    s.fields["contexts"].setText("many")
    assert not s.start_button.isEnabled() and "--contexts must be whole numbers" in s.problem.text()
