"""Training for real: early stopping, the best epoch, gradient accumulation, the evaluation and saving the
trained model (weights that load with weights_only=True, and the JSON beside them)."""

from __future__ import annotations

import json

import pytest
import torch

from mpsstudio.engine.analysis import evaluation
from mpsstudio.engine.models import saved as savedmodel
from mpsstudio.engine.run import trainer
from mpsstudio.engine.basics.config import RunConfig
from mpsstudio.engine.basics.errors import UserError
from mpsstudio.engine.analysis.runcheck import run_from_dict
from mpsstudio.engine.history.runfiles import export_json, import_json
from mpsstudio.engine.run.epochs import EarlyStop
from tests.support.data import tiny_data



def epochs_config(**kw) -> RunConfig:
    base = dict(model="mlp", dataset="tiny", batch_size=32, steps=None, epochs=8, warmup_steps=2, lr=0.05)
    return RunConfig(**{**base, **kw})


@pytest.mark.parametrize("values, patience, mode, stops_at, best", [
    ([0.5, 0.6, 0.6, 0.55, 0.7], 2, "max", 4, 2),  # no gain at 3 and 4: stop after epoch 4
    ([0.5, 0.6, 0.7, 0.8], 2, "max", None, 4),
    ([2.0, 1.0, 1.5, 1.2, 0.9], 2, "min", 4, 2),
    ([None, None, 0.5], 2, "max", 2, None),  # nothing measured is never an improvement
])
def test_early_stop_counts_epochs_without_improvement(values, patience, mode, stops_at, best):
    watch = EarlyStop(epochs_config(early_stop_patience=patience, early_stop_mode=mode))
    stopped = None
    for epoch, v in enumerate(values, start=1):
        watch.add(epoch, v)
        if watch.should_stop():
            stopped = epoch
            break
    assert stopped == stops_at and watch.best_epoch == best
    if stops_at:
        assert f"did not improve for {patience} epochs" in watch.summary()["stopped_early_reason"]


def test_a_run_that_stops_early_says_when_and_why_and_keeps_its_best_weights(monkeypatch):
    accs = iter([0.5, 0.9, 0.8, 0.7, 0.6, 0.95, 0.99, 0.99])
    from mpsstudio.engine.run.epochs import Epochs

    real = Epochs.validate

    def scripted(self):  # the real validation pass, with an accuracy that peaks at epoch 2
        out = real(self)
        return (out[0], next(accs)) if out is not None else out
    monkeypatch.setattr(Epochs, "validate", scripted)
    kept = {}
    real_after = Epochs.after_epoch

    def spy(self, epoch):
        stop = real_after(self, epoch)
        kept[epoch] = {k: v.clone() for k, v in self.model.state_dict().items()}
        kept["model"] = self.model
        return stop
    monkeypatch.setattr(Epochs, "after_epoch", spy)
    cfg = epochs_config(early_stop_patience=2, keep_best=True)
    result = trainer.run(cfg, data=tiny_data())
    s = result.summary
    assert result.status == "finished" and len(result.epochs) == 4  # epochs 3 and 4 did not beat epoch 2
    assert s.stopped_early_epoch == 4 and s.best_epoch == 2 and s.best_value == 0.9
    assert "val_accuracy did not improve for 2 epochs" in s.stopped_early_reason
    final = kept["model"].state_dict()
    assert all(torch.equal(final[k], kept[2][k]) for k in final)  # the best epoch's weights, not the last's
    assert not all(torch.equal(final[k], kept[4][k]) for k in final)
    assert result.evaluation is not None and result.evaluation.epoch == 2
    back = run_from_dict(json.loads(json.dumps(result.to_dict())), "the test")
    assert back.summary.stopped_early_epoch == 4 and back.evaluation == result.evaluation


def test_early_stopping_needs_epochs_training_and_a_validation_split():
    with pytest.raises(UserError, match="give a number of epochs, not of steps"):
        RunConfig(steps=100, epochs=None, early_stop_patience=3).validate()
    with pytest.raises(UserError, match="set the mode to train"):
        RunConfig(mode="inference", keep_best=True).validate()
    with pytest.raises(UserError, match="Early-stopping patience must be a whole number"):
        RunConfig(early_stop_patience=0).validate()
    with pytest.raises(UserError, match="Unknown early-stopping monitor"):
        RunConfig(early_stop_monitor="train_loss").validate()
    with pytest.raises(UserError, match="Gradient accumulation must be a whole number from 1"):
        RunConfig(accumulate=0).validate()
    data = tiny_data()
    data.val = None
    result = trainer.run(epochs_config(early_stop_patience=2), data=data)
    assert result.status == "failed" and "has none; choose a dataset with one" in result.error
    with pytest.raises(UserError, match="synthetic has none"):  # known before the run: bad input, not a failed run
        RunConfig(dataset="synthetic", epochs=3, steps=None, keep_best=True).validate()
    too_long = RunConfig(model="mlp", dataset="tiny", batch_size=16, steps=3, epochs=None, warmup_steps=2, accumulate=8)
    result = trainer.run(too_long, data=tiny_data())  # 5 micro-batches would never step the optimizer
    assert result.status == "failed" and "accumulate over fewer or run longer" in result.error


def test_early_stopping_on_synthetic_data_is_bad_input_on_the_command_line(capsys):
    from mpsstudio import cli

    assert cli.main(["bench", "--dataset", "synthetic", "--epochs", "2", "--early-stop", "2", "--devices", "cpu"]) == 2
    assert "synthetic has none" in capsys.readouterr().err


def test_gradient_accumulation_steps_the_optimizer_every_n_batches_and_counts_samples(monkeypatch):
    steps = []
    real = torch.optim.SGD.step

    def counting(self, *a, **k):
        steps.append(1)
        return real(self, *a, **k)
    monkeypatch.setattr(torch.optim.SGD, "step", counting)
    cfg = RunConfig(model="mlp", dataset="tiny", batch_size=16, steps=24, epochs=None, warmup_steps=0, accumulate=4)
    result = trainer.run(cfg, data=tiny_data())
    assert result.status == "finished" and len(result.losses) == 24
    assert len(steps) == 6  # 24 micro-batches / 4
    samples = sum(w.samples for w in result.windows)
    assert samples == 24 * 16  # throughput counts samples of micro-batches, as without accumulation


def test_the_evaluation_is_the_validation_confusion_matrix():
    result = trainer.run(epochs_config(epochs=3), data=tiny_data())
    ev = result.evaluation
    assert ev is not None and ev.classes == ["0", "1", "2", "3"] and ev.epoch == 3 and ev.split == "validation"
    assert sum(map(sum, ev.matrix)) == 64  # every validation sample once
    assert evaluation.overall(ev) == pytest.approx(result.summary.val_accuracy)
    rows = evaluation.per_class(ev)
    assert [r.samples for r in rows] == [sum(row) for row in ev.matrix]


@pytest.mark.parametrize("bad, field", [
    ({"classes": ["a"], "matrix": [[1]]}, "evaluation.classes"),
    ({"classes": ["a", "b"], "matrix": [[1, 2]]}, "evaluation.matrix"),
    ({"classes": ["a", "b"], "matrix": [[1, -2], [0, 1]]}, "evaluation.matrix"),
    ({"classes": ["a", "b"], "matrix": [[1, 2.5], [0, 1]]}, "evaluation.matrix"),
    ({"classes": ["a", "b"], "matrix": [[1, 2], [0, 1]], "epoch": "x"}, "evaluation.epoch"),
    ({"classes": ["a", "b"], "matrix": [[1, 2], [0, 1]], "code": "import os"}, "evaluation"),
    ("not an object", "evaluation"),
])
def test_a_bad_evaluation_in_a_file_is_one_sentence(tmp_path, bad, field):
    result = trainer.run(epochs_config(epochs=1), data=tiny_data())
    path = tmp_path / "runs.json"
    export_json([result], path)
    doc = json.loads(path.read_text())
    doc["runs"][0]["evaluation"] = bad
    path.write_text(json.dumps(doc))
    with pytest.raises(UserError, match=f"invalid '{field}'"):
        import_json(path)


def test_a_saved_model_loads_with_weights_only_and_says_how_to_rebuild_it(tmp_path):
    target = tmp_path / "digits.pt"
    result = trainer.run(epochs_config(epochs=2), data=tiny_data(), save_model=str(target))
    assert result.summary.saved_model == str(target)
    state = torch.load(target, weights_only=True)
    from mpsstudio.engine.models import registry as models
    from mpsstudio.engine.basics.spec import DataSpec

    model = models.build_model("mlp", models.input_spec_for("mlp", DataSpec("image", 4, channels=1, height=8,
                                                                          width=8)))
    model.load_state_dict(state)  # the whole state_dict, nothing else
    meta = json.loads(savedmodel.meta_path(target).read_text())
    assert meta["format"] == "mpsstudio.model" and meta["weights"] == "digits.pt" and meta["model"] == "mlp"
    assert meta["classes"] == ["0", "1", "2", "3"] and meta["input"] == {"kind": "image", "channels": 1,
                                                                         "height": 8, "width": 8}
    assert meta["normalization"]["mean"] == [0.2] and meta["run_id"] == result.id
    copied = savedmodel.copy_saved(target, tmp_path / "copy.pt")
    assert json.loads(savedmodel.meta_path(copied).read_text())["weights"] == "copy.pt"
    assert torch.load(copied, weights_only=True).keys() == state.keys()


def test_a_model_that_cannot_be_written_leaves_the_run_finished_with_the_reason(tmp_path):
    result = trainer.run(epochs_config(epochs=1), data=tiny_data(), save_model=str(tmp_path / "gone" / "m.pt"))
    assert result.status == "finished" and "could not be written" in result.summary.saved_model_error
    with pytest.raises(UserError, match="no longer kept"):
        savedmodel.copy_saved(tmp_path / "gone" / "m.pt", tmp_path / "x.pt")


def test_save_model_on_the_command_line(tmp_path, capsys):
    from mpsstudio import cli

    target = tmp_path / "shapes.pt"
    code = cli.main(["bench", "--model", "mlp", "--dataset", "shapes", "--devices", "cpu", "--epochs", "1",
                     "--batch-size", "256", "--warmup", "1", "--no-inspect", "--no-save", "--save-model", str(target)])
    err = capsys.readouterr().err
    assert code == 0 and f"saved the trained model to {target} (and its description to shapes.json)" in err
    assert torch.load(target, weights_only=True) and savedmodel.meta_path(target).is_file()
    assert cli.main(["bench", "--save-model", str(tmp_path), "--devices", "cpu"]) == 2
    assert "is a folder" in capsys.readouterr().err
    assert cli.main(["bench", "--save-model", str(tmp_path / "no" / "m.pt"), "--devices", "cpu"]) == 2
    assert "does not exist" in capsys.readouterr().err


@pytest.mark.parametrize("name, says", [
    ("m.json", "weights and their description at once"),
    ("m.JSON", "weights and their description at once"),
    ("~no-such-user-here-9/m.pt", "not a path this user can reach"),
    ("new/", "is a folder"),
    ("/dev/null", "not a regular file"),
    ("y" * 236 + ".pt", "too long"),  # its description, y...y.json, and a -cuda0 would not fit
    ("desc-is-a-folder.pt", "cannot be written"),
])
def test_a_save_model_target_that_would_go_wrong_is_refused_before_the_run(tmp_path, capsys, monkeypatch, name, says):
    from mpsstudio import cli
    from mpsstudio.engine import process

    def no_runs(*a, **k):
        raise AssertionError("a run started before --save-model was checked")

    monkeypatch.setattr(process, "run_isolated", no_runs)
    monkeypatch.chdir(tmp_path)
    (tmp_path / "desc-is-a-folder.json").mkdir()
    assert cli.main(["bench", "--devices", "cpu", "--save-model", name]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and says in err, err
    with pytest.raises(UserError, match="at once"):  # the window's copy too: model.json would replace model.json
        savedmodel.copy_saved(tmp_path / "kept.pt", tmp_path / "m.json")


def test_several_devices_save_one_file_each():
    from mpsstudio.cli import model_paths

    cfgs = [RunConfig(device="cpu"), RunConfig(device="mps"), RunConfig(device="cpu")]
    assert model_paths("/x/m.pt", cfgs) == ["/x/m-cpu.pt", "/x/m-mps.pt", "/x/m-cpu-2.pt"]
    assert model_paths("/x/m.pt", cfgs[:1]) == ["/x/m.pt"]


def test_a_script_whose_memory_ran_out_before_its_batch_was_seen_gets_a_sentence():
    """A script's failure worded as the CPU allocator words it ("can't allocate memory") with no batch seen: the
    sentence asked the batch for half of None (TypeError) before RunConfig.batch made the checker see it."""
    from mpsstudio.engine.basics.config import RunConfig
    from mpsstudio.engine.run.failures import explain_failure

    cfg = RunConfig(model="own.py", dataset="script", steps=None, epochs=None, batch_size=None)
    said = explain_failure(RuntimeError("DefaultCPUAllocator: can't allocate memory: you tried to allocate 8 GB"), cfg)
    assert said.startswith("The run ran out of memory on cpu") and "the script's own setting" in said
    cfg = RunConfig(model="mlp", dataset="synthetic", batch_size=64)
    said = explain_failure(RuntimeError("DefaultCPUAllocator: can't allocate memory"), cfg)
    assert "try a batch size of 32 or less" in said
