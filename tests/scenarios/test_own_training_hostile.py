"""Your own training, thrown at: model files whose make_batch, loss or declarations are wrong, and scripts that count
twice, hide their loss, report nonsense, end early or are killed. Each gets one sentence that names what to change
and a number that counts what was trained (issue 36, found by a fresh-eyes pass)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pytest

from mpsstudio import cli
from mpsstudio.engine.basics.config import RunConfig
from mpsstudio.engine.basics.errors import UserError
from mpsstudio.engine.history.store import RunStore
from mpsstudio.engine.models import registry as models
from mpsstudio.engine.run import setup
from tests.support.paths import ROOT
from tests.support.scripts import MT, tracked_run

SHORT = ["--devices", "cpu", "--steps", "6", "--warmup", "1", "--no-inspect", "--batch-size", "4"]
NET = ("import torch\nfrom torch import nn\n"
       "def build_model(num_classes, input_shape):\n"
       "    return nn.Sequential(nn.Flatten(), nn.Linear(12, num_classes))\n")
MAKE = NET + "INPUT_SHAPE = (12,)\nVOCAB_SIZE = 5\n"


def _bench(capsys, tmp_path, text: str, *extra: str) -> tuple[int, str]:
    path = tmp_path / "mine.py"
    path.write_text(text)
    code = cli.main(["bench", "--model", str(path), "--dataset", "synthetic", *SHORT, *extra])
    return code, capsys.readouterr().err


@pytest.mark.parametrize("body, said", [
    ("def make_batch(n, g):\n    return torch.randn(8, 12), torch.randint(0, 2, (8,))\n",
     "returned targets for 8 samples (their first dimension); return 4, the batch size asked"),
    ("def make_batch(n, g):\n    x = torch.randn(n, 12)\n    return x, x, torch.zeros(n)\n",
     "returned a tuple of 3 items; return two items, (inputs, targets)"),
    ("import numpy as np\ndef make_batch(n, g):\n    return np.zeros((n, 12)), torch.zeros(n, dtype=torch.long)\n",
     "returned inputs that are numpy.ndarray, not tensors"),
    ("def make_batch(n, g):\n    return torch.randn(n, 12), [0] * n\n", "returned targets that are a list of 4 items"),
    ("def make_batch(n, g):\n    return torch.randn(n, 12), torch.zeros(n, dtype=torch.long)\n"
     "def loss(out, y):\n    return {'l': 1}['targets']\n", "loss in mine.py raised KeyError: 'targets'"),
])
def test_a_make_batch_or_loss_that_is_wrong_is_one_sentence(capsys, tmp_path, body, said):
    code, err = _bench(capsys, tmp_path, MAKE.replace("INPUT_SHAPE = (12,)\nVOCAB_SIZE = 5\n", "") + body)
    assert code in (cli.EXIT_BAD_INPUT, cli.EXIT_RUN_FAILED) and said in err, err
    assert "INPUT_SHAPE" not in err  # not the input's shape: make_batch's or loss's doing


def test_the_synthetic_options_are_refused_for_a_model_that_makes_its_own_batches(capsys):
    for extra in (["--input-shape", "3,8,8"], ["--num-classes", "3"], ["--image-size", "16"]):
        code = cli.main(["bench", "--model", str(ROOT / "examples" / "two_inputs.py"), "--dataset", "synthetic",
                         *SHORT, *extra])
        err = capsys.readouterr().err
        assert code == cli.EXIT_BAD_INPUT and "makes its own batches (make_batch)" in err, err


@pytest.mark.parametrize("text, said", [
    ("import torch\nfrom torch import nn\nINPUT_SHAPE = (16,)\n"
     "def build_model(num_classes, input_shape):\n"
     "    return nn.Sequential(nn.Embedding(100, 8), nn.Flatten(), nn.Linear(16 * 8, num_classes))\n",
     "token ids reach VOCAB_SIZE - 1 (9,999 here); set VOCAB_SIZE in the model file"),
    (NET, "set INPUT_SHAPE in the model file or --input-shape"),  # 3x32x32 into a Linear(12, ...)
])
def test_a_first_step_that_fails_says_what_to_change(capsys, tmp_path, text, said):
    code, err = _bench(capsys, tmp_path, text)
    assert code == cli.EXIT_RUN_FAILED and said in err, err


@pytest.mark.parametrize("line, said", [
    ('NUM_CLASSES = "7"', "NUM_CLASSES in 'mine.py' must be a whole number from 2 to 1,000,000 (e.g. NUM_CLASSES = "
                          "1000), not '7'."),
    ("NUM_CLASSES = 1", "from 2 to"),
    ("VOCAB_SIZE = 'abc'", "not 'abc'"),
    ("INPUT_SHAPE = (3, 2 * 16, 32)", "must be written out as numbers (e.g. INPUT_SHAPE = (3, 224, 224))"),
])
def test_a_declaration_that_is_wrong_is_quoted(tmp_path, line, said):
    path = tmp_path / "mine.py"
    path.write_text(f"{line}\n{NET}")
    with pytest.raises(UserError) as caught:
        models.get_model_info(str(path))
    assert said in str(caught.value), caught.value


def test_one_class_is_refused_and_a_large_input_makes_fewer_synthetic_samples(capsys):
    assert cli.main(["bench", "--model", "mlp", "--dataset", "synthetic", *SHORT, "--num-classes", "1"]) == \
        cli.EXIT_BAD_INPUT
    assert "number of classes must be a whole number from 2" in capsys.readouterr().err.lower()
    big = models.spec_of((3, 2048, 2048), 10)
    config = RunConfig(model="mlp", dataset="synthetic", batch_size=2)
    assert setup.synthetic_size(big, config) == setup.SYNTHETIC_BYTES // (3 * 2048 * 2048)  # 21 images, 252 MiB
    assert setup.synthetic_size(big, RunConfig(model="mlp", dataset="synthetic", batch_size=64)) == 128
    assert setup.synthetic_size(models.spec_of((1, 28, 28), 10), config) == setup.SYNTHETIC_SAMPLES


def test_the_tools_name_the_layer_a_user_model_fails_in(capsys, tmp_path):
    path = tmp_path / "mine.py"
    path.write_text(NET)  # 3x32x32 into a Linear(12, ...)
    for argv in (["max-batch", "--device", "cpu", "--max-batch", "8"], ["inspect", "--device", "cpu"]):
        code = cli.main([*argv, "--model", str(path), "--dataset", "synthetic", "--no-save"])
        err = capsys.readouterr().err
        assert code != cli.EXIT_OK and "in 1 (Linear), input 3x32x32: set INPUT_SHAPE" in err, err


# ---------------------------------------------------------------- scripts

GAN = ("import torch\nfrom torch import nn\nD = nn.Linear(4, 1)\nG = nn.Linear(2, 4)\n"
       "od = torch.optim.SGD(D.parameters(), lr=0.01)\nog = torch.optim.SGD(G.parameters(), lr=0.01)\n"
       "for i in range(200):\n"
       "    real = torch.randn(16, 4)\n    d = D(real).mean() - D(G(torch.randn(16, 2)).detach()).mean()\n"
       "    od.zero_grad(); d.backward(); od.step()\n"
       "    g = -D(G(torch.randn(16, 2))).mean()\n    og.zero_grad(); g.backward(); og.step()\n")
AUTOGRAD = ("import torch\nfrom torch import nn\nm = nn.Linear(4, 3)\nopt = torch.optim.SGD(m.parameters(), lr=0.01)\n"
            "for i in range(100):\n    out = m(torch.randn(8, 4))\n    opt.zero_grad()\n"
            "    torch.autograd.backward(out, grad_tensors=torch.ones_like(out))\n    opt.step()\n")

def test_a_step_is_one_round_of_the_scripts_optimizers_and_autograd_backward_counts(tmp_path):
    code, run = tracked_run(tmp_path, GAN, "--steps", "50")
    assert code == cli.EXIT_OK and run.status == "finished", run.error
    assert run.summary.measured_steps == 50 and run.config.batch_size == 16
    assert run.summary.parameters == (4 + 1) + (2 * 4 + 4)  # both optimizers' parameters
    assert sum(w.samples for w in run.windows) == 50 * 16  # one round is 16 samples, not 32
    code, run = tracked_run(tmp_path, AUTOGRAD, "--steps", "20")
    assert code == cli.EXIT_OK and run.status == "finished" and run.summary.measured_steps == 20, run.error


@pytest.mark.parametrize("call, said", [
    ("mt.step(loss, batch_size=0)", "mpsstudio.track.step: batch_size must be a whole number from 1 to 1,048,576 (the "
                                    "largest batch MPS Studio measures), not 0."),
    ("mt.step(loss, batch_size='16')", "batch_size must be a whole number from 1 to 1,048,576 (the largest batch MPS "
                                       "Studio measures), not '16'"),
    ("mt.step(loss, batch_size=16.5)", "not 16.5"),
    ("mt.step('abc', batch_size=8)", "mpsstudio.track.step: the loss must be a tensor or a number, not 'abc'."),
    ("mt.step(torch.randn(4), batch_size=8)", "the loss must hold one number (the batch's mean loss)"),
    ("mt.epoch(val_accuracy=5.0)", "mpsstudio.track.epoch: val_accuracy is a share from 0 to 1 (0.93 for 93 %)"),
])
def test_mt_says_what_is_wrong_with_what_it_is_given(tmp_path, call, said):
    code, run = tracked_run(tmp_path, MT.format(n=30, call=call))
    assert code == cli.EXIT_RUN_FAILED and run.status == "failed" and said in run.error, run.error


def test_a_script_that_only_warms_up_measured_nothing_and_says_so(tmp_path):
    code, run = tracked_run(tmp_path, MT.format(n=2, call="mt.step(loss, batch_size=8)"))
    assert code == cli.EXIT_RUN_FAILED and run.status == "failed"
    assert run.error.startswith("The script made 2 steps, all of them warm-up (2): nothing was measured"), run.error
    assert run.env.get("machine") or run.env.get("cpu")  # where it ran is said though nothing was measured


def test_a_script_that_exits_quotes_its_last_words_and_keeps_its_traceback(tmp_path):
    needs = "import argparse\nargparse.ArgumentParser().add_argument('--data', required=True)\n" \
            "argparse.ArgumentParser(prog='train.py').parse_args(['--x'])\n"
    code, run = tracked_run(tmp_path, needs)
    assert code == cli.EXIT_RUN_FAILED and run.error.startswith("The script exited with code 2 (it wrote last: "
                                                                 "train.py: error: unrecognized arguments: --x)")
    assert run.config.model == str((tmp_path / "train.py").resolve())


@pytest.mark.processes
def test_a_script_errors_traceback_is_in_its_output_log(tmp_path):
    from mpsstudio.engine.basics.paths import log_dir

    code, run = tracked_run(tmp_path, MT.format(n=30, call="assert i < 10, 'went wrong'\n    mt.step(loss, batch_size=8)"))
    assert code == cli.EXIT_RUN_FAILED and "AssertionError: went wrong" in run.error
    kept = (log_dir() / "runs" / f"{run.id}.txt").read_text()
    assert "Traceback (most recent call last)" in kept and 'train.py", line 9, in <module>' in kept
    assert "runpy" not in kept and "run_script" not in kept  # the script's frames, as python prints them


@pytest.mark.long
def test_a_script_run_by_python_keeps_its_run_when_it_gets_sigterm(tmp_path):
    path = tmp_path / "alone.py"
    path.write_text(MT.format(n=10**7, call="mt.step(loss, batch_size=8)\n    if i == 5:\n        print('measuring', "
                              "flush=True)"))
    env = {**os.environ, "PYTHONPATH": str(ROOT), "MPSSTUDIO_WARMUP": "2"}
    proc = subprocess.Popen([sys.executable, str(path)], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)
    try:
        assert proc.stdout.readline().strip() == "measuring"  # its run has started (and its SIGTERM handler)
        time.sleep(0.5)
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=60)
    finally:
        proc.kill()
    assert proc.returncode == -signal.SIGTERM  # it still ends as SIGTERM ends it
    [run] = RunStore().all()
    assert run.status == "cancelled" and run.error == "Ended by SIGTERM; what was measured until then is kept."
    assert run.summary.measured_steps > 0, err
