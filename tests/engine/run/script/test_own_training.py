"""Your own training, measured (issue 36): a model file's declared input (INPUT_SHAPE, NUM_CLASSES, VOCAB_SIZE,
make_batch, loss) and the command line's --input-shape, --num-classes and --image-size on synthetic data, in runs and
tools; a first step that fails names the layer and the input; a user's own training script measured by
mpsstudio.track or by the optimizer's hook, run alone or by `mpsstudio run`, and contained when it misbehaves."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

from mpsstudio import cli
from mpsstudio.engine.basics.config import RunConfig
from mpsstudio.engine.basics.errors import UserError
from mpsstudio.engine.history.store import RunStore
from mpsstudio.engine.models import registry as models
from mpsstudio.engine.run import setup
from tests.support.paths import ROOT

EXAMPLES = ROOT / "examples"
SHORT = ["--devices", "cpu", "--steps", "6", "--warmup", "1", "--no-inspect", "--batch-size", "4"]

DECLARED = """import math, torch
from torch import nn
INPUT_SHAPE = (3, 20, 24)
NUM_CLASSES = 7
def build_model(num_classes, input_shape):
    return nn.Sequential(nn.Flatten(), nn.Linear(math.prod(input_shape), num_classes))
"""


def _bench(model: str, *extra: str) -> int:
    return cli.main(["bench", "--model", model, "--dataset", "synthetic", *SHORT, *extra])


def test_a_model_file_declares_its_input_and_runs_at_it(tmp_path, capsys):
    path = tmp_path / "declared.py"
    path.write_text(DECLARED)
    info = models.get_model_info(str(path))
    assert info.default_spec.sample_shape == (3, 20, 24) and info.default_spec.num_classes == 7
    assert _bench(str(path)) == cli.EXIT_OK
    assert "3x20x24 images, 7 classes" in capsys.readouterr().out + RunStore().all()[-1].summary.dataset


@pytest.mark.parametrize("extra, shape, classes", [
    (["--input-shape", "1,12,12"], (1, 12, 12), 7),
    (["--image-size", "16"], (3, 16, 16), 7),  # synthetic images at that size: never ignored
    (["--num-classes", "3"], (3, 20, 24), 3),
])
def test_the_command_line_sets_the_synthetic_input(tmp_path, extra, shape, classes):
    path = tmp_path / "declared.py"
    path.write_text(DECLARED)
    from mpsstudio.cli.common import config_from_args

    cfg = config_from_args(cli.build_parser().parse_args(["bench", "--model", str(path), "--dataset", "synthetic",
                                                          *extra]))
    spec = setup.synthetic_input(cfg)
    assert spec.sample_shape == shape and spec.num_classes == classes


@pytest.mark.parametrize("argv, said", [
    (["--model", "mlp", "--dataset", "shapes", "--input-shape", "3,8,8"], "shape synthetic data"),
    (["--model", "lstm", "--dataset", "synthetic", "--image-size", "32"], "--image-size sets the height and width"),
    (["--model", "mlp", "--dataset", "synthetic", "--input-shape", "128"], "takes image input, not tokens"),
    (["--model", "mlp", "--dataset", "synthetic", "--input-shape", "3,x,8"], "give the input as C,H,W for images"),
    (["--model", "mlp", "--dataset", "synthetic", "--input-shape", "3,8,8", "--image-size", "16"],
     "Give the synthetic input's size once"),
])
def test_a_synthetic_input_that_cannot_be_is_one_sentence(capsys, argv, said):
    assert cli.main(["bench", *argv, *SHORT]) == cli.EXIT_BAD_INPUT
    err = capsys.readouterr().err
    assert said in err and err.count("\n") == 1, err


def test_a_declaration_that_is_not_written_out_is_refused_without_running_the_file(tmp_path):
    path = tmp_path / "computed.py"
    path.write_text("import os\nos.system('touch ran')\nINPUT_SHAPE = tuple([3, 8, 8])\n"
                    "def build_model(n, s):\n    pass\n")
    with pytest.raises(UserError, match="INPUT_SHAPE in 'computed.py' must be written out as numbers"):
        models.get_model_info(str(path))
    assert not (tmp_path / "ran").exists() and not Path("ran").exists()  # the file was read, not run
    path.write_text("INPUT_SHAPE = (3, 0, 8)\n")
    with pytest.raises(UserError, match="must be \\(channels, height, width\\)"):
        models.get_model_info(str(path))


def test_a_first_batch_that_fails_names_the_layer_and_the_input(tmp_path, capsys):
    path = tmp_path / "wrong.py"
    path.write_text("from torch import nn\nclass M(nn.Module):\n    def __init__(self, n):\n        super().__init__()\n"
                    "        self.fc1 = nn.Linear(100, n)\n    def forward(self, x):\n"
                    "        return self.fc1(x.flatten(1))\n"
                    "def build_model(num_classes, input_shape):\n    return M(num_classes)\n")
    assert _bench(str(path)) == cli.EXIT_RUN_FAILED
    err = capsys.readouterr().err
    assert ("mat1 and mat2 shapes cannot be multiplied (4x3072 and 100x10) in fc1 (Linear), input 3x32x32: set "
            "INPUT_SHAPE in the model file or --input-shape") in err


@pytest.mark.parametrize("example", ["text_classifier.py", "two_inputs.py"])
def test_the_examples_of_several_inputs_run_and_their_tools_too(example, capsys):
    model = str(EXAMPLES / example)
    assert _bench(model) == cli.EXIT_OK
    [run] = RunStore().all()
    assert run.status == "finished" and run.summary.dataset == f"synthetic: batches made by make_batch in {example}"
    assert cli.main(["max-batch", "--model", model, "--dataset", "synthetic", "--device", "cpu", "--max-batch", "8",
                     "--no-save"]) == cli.EXIT_OK
    assert cli.main(["diagnose", "--model", model, "--dataset", "synthetic", "--devices", "cpu", "--no-save",
                     "--batch-size", "4"]) == cli.EXIT_OK
    assert "Parity with the CPU in float64 was not checked" in capsys.readouterr().out


def test_the_convnext_example_declares_224(tmp_path):
    spec = setup.synthetic_input(RunConfig(model=str(EXAMPLES / "convnext_file.py"), dataset="synthetic"))
    assert spec.sample_shape == (3, 224, 224) and spec.num_classes == 1000


# ---------------------------------------------------------------- your own script


def test_a_script_with_mt_step_run_by_mpsstudio_run_is_a_run(capsys):
    code = cli.main(["run", str(EXAMPLES / "train_script.py"), "--devices", "cpu", "--steps", "60", "--",
                     "--epochs", "3"])
    assert code == cli.EXIT_OK, capsys.readouterr().err
    [run] = RunStore().all()
    assert run.status == "finished" and run.config.is_script and run.config.device == "cpu"
    assert run.env["tracked"] == "mt.step" and run.summary.tracked == "mt.step"
    assert run.summary.measured_steps == 60 and len(run.windows) >= 1 and len(run.losses) == 70
    assert run.summary.stability in ("stable", "noisy")
    assert 0 <= run.summary.val_accuracy <= 1 and len(run.epochs) >= 1


SCRIPTS = {
    "hooks": ("import sys, torch\nfrom torch import nn\nmodel = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), "
              "nn.Linear(16, 3))\nopt = torch.optim.SGD(model.parameters(), lr=0.1)\nassert sys.argv[1] == 'cpu'\n"
              "for i in range(400):\n    x = torch.randn(24, 8)\n    loss = nn.functional.cross_entropy(model(x), "
              "torch.randint(0, 3, (24,)))\n    opt.zero_grad(); loss.backward(); opt.step()\n"),
    "crash": ("import torch\nfrom torch import nn\nmodel = nn.Linear(4, 2)\nopt = torch.optim.SGD(model.parameters(), "
              "lr=0.1)\nfor i in range(30):\n    loss = model(torch.randn(8, 4)).square().mean()\n"
              "    opt.zero_grad(); loss.backward(); opt.step()\n    if i == 20:\n        raise ValueError('bad batch')\n"),
    "no_steps": "print('this script trains nothing')\n",
}


def test_a_script_without_mt_step_is_counted_by_the_optimizer_hook(tmp_path):
    path = tmp_path / "hooks.py"
    path.write_text(SCRIPTS["hooks"])
    assert cli.main(["run", str(path), "--devices", "cpu", "--steps", "50", "--", "{device}"]) == cli.EXIT_OK
    [run] = RunStore().all()
    assert run.status == "finished" and run.summary.tracked == "optimizer hook"
    assert run.config.batch_size == 24  # the outermost module's input
    assert run.summary.measured_steps == 50 and run.summary.parameters == 8 * 16 + 16 + 16 * 3 + 3


@pytest.mark.parametrize("name, said", [
    ("crash", "The script stopped with an error: ValueError: bad batch"),
    ("no_steps", "The script ended without a training step to measure"),
])
def test_a_script_that_fails_is_a_failed_run_with_the_reason(tmp_path, name, said):
    path = tmp_path / f"{name}.py"
    path.write_text(SCRIPTS[name])
    assert cli.main(["run", str(path), "--devices", "cpu", "--warmup", "2"]) == cli.EXIT_RUN_FAILED
    [run] = RunStore().all()
    assert run.status == "failed" and run.error.startswith(said), run.error


@pytest.mark.processes
@pytest.mark.parametrize("body, status, said", [
    ("import time\ntime.sleep(600)\n", "failed", "did not end within the time limit"),  # ended at 2 s
    ("import torch\nfrom torch import nn\nprint('a line from the script', flush=True)\nm = nn.Linear(4, 2)\nopt = torch.optim.SGD(m.parameters(), lr=0.1)\n"
     "while True:\n    try:\n        loss = m(torch.randn(8, 4)).square().mean()\n        opt.zero_grad(); "
     "loss.backward(); opt.step()\n    except BaseException:\n        pass\n", "finished", ""),
])
def test_a_script_that_hangs_or_ignores_its_end_is_contained(tmp_path, run_pids, body, status, said):
    """A script that hangs is ended at its time limit; one that swallows the end of its run (--steps) is ended with
    its process once its run is over: kept either way, nothing left behind (run_pids)."""
    path = tmp_path / "misbehaves.py"
    path.write_text(body)
    timeout = "2" if status == "failed" else "30"  # the hang waits for it; the other ends long before
    code = cli.main(["run", str(path), "--devices", "cpu", "--steps", "20", "--warmup", "2", "--timeout", timeout])
    [run] = RunStore().all()
    assert run.status == status and said in (run.error or ""), run.error
    assert code == (cli.EXIT_OK if status == "finished" else cli.EXIT_RUN_FAILED)
    if status == "finished":  # the script's own output goes to the run's output log
        from mpsstudio.engine.basics.paths import log_dir

        kept = log_dir() / "runs" / f"{run.id}.txt"
        assert str(kept) in run.summary.output_note
        assert "a line from the script" in kept.read_text()


@pytest.mark.long
def test_a_script_with_mt_step_run_by_python_alone_is_kept_in_the_history(tmp_path):
    env = {**os.environ, "PYTHONPATH": str(ROOT), "MPSSTUDIO_WARMUP": "5"}
    done = subprocess.run([sys.executable, str(EXAMPLES / "train_script.py"), "--epochs", "2"], capture_output=True,
                          text=True, timeout=120, env=env)
    assert done.returncode == 0, done.stderr
    assert "samples/s (median of" in done.stderr and "kept in the history as" in done.stderr
    [run] = RunStore().all()
    assert run.status == "finished" and run.summary.tracked == "mt.step" and run.config.warmup_steps == 5
    assert run.windows and run.summary.stability in ("stable", "noisy")


def test_where_the_device_overlaps_a_windows_books_wait_for_the_next_step_and_nothing_is_lost():
    """On a GPU a window's record goes out once the script has queued its next step (tracked.Tracker.overlap); every
    window is still recorded once, in order, before the epoch that follows it and before the run's end."""
    from mpsstudio.engine.basics.events import Ended, EpochEnd, Window
    from mpsstudio.engine.run.script import tracker as tracked

    events = []
    config = RunConfig(model="own.py", dataset="script", device="cpu", steps=None, epochs=None, warmup_steps=2,
                       window_s=0.001)
    tracker = tracked.Tracker(config, events.append, limit=40)
    tracker.step(torch.tensor(1.0), 8)  # the first step starts the run on the cpu ...
    tracker.overlap = True  # ... whose books are then kept as a GPU's are
    with pytest.raises(tracked.ScriptDone):
        for i in range(2, 100):
            time.sleep(0.0005)
            tracker.step(torch.tensor(1.0 / i), 8 if i % 7 else 5)
            if i == 20:
                tracker.epoch(val_accuracy=0.5)
    windows = [e for e in events if isinstance(e, Window)]
    result = tracker.result
    assert result.status == "finished" and tracker.pending is None
    assert len(windows) == len(result.windows) >= 3
    steps = [s for w in windows for s in range(w.first_step, w.first_step + len(w.losses))]
    assert steps == list(range(3, 43))  # every measured step once, in order
    assert sum(w.samples for w in windows) == sum(8 if i % 7 else 5 for i in range(3, 43))
    epoch_at = next(i for i, e in enumerate(events) if isinstance(e, EpochEnd))
    assert all(w.first_step + len(w.losses) - 1 <= 20 for w in events[:epoch_at] if isinstance(w, Window))
    assert all(w.first_step + len(w.losses) - 1 > 20 for w in events[epoch_at:] if isinstance(w, Window))
    assert isinstance(events[-1], Ended)

    events.clear()  # a script that ends by itself: the window waiting for its books is kept at the end
    tracker = tracked.Tracker(config, events.append)
    tracker.step(torch.tensor(1.0), 8)
    tracker.overlap = True
    for i in range(2, 31):
        time.sleep(0.0005)
        tracker.step(torch.tensor(1.0 / i), 8)
    assert tracker.pending is not None or tracker.win_losses
    tracker.finish()
    windows = [e for e in events if isinstance(e, Window)]
    assert [s for w in windows for s in range(w.first_step, w.first_step + len(w.losses))] == list(range(3, 31))


def test_numbers_past_a_floats_range_are_one_sentence_not_an_overflow_error():
    import pytest

    import mpsstudio.track as mt

    with pytest.raises(ValueError, match=r"the loss is 1000000000000000000000000000000000000000, not a finite"):
        mt.step(10**400, batch_size=8)
    with pytest.raises(ValueError, match="val_accuracy is a share from 0 to 1"):
        mt.epoch(0.5, 10**400)
