"""Your script as it is (issue 46): a script measured on the device its run is for (the others hidden from it, or its
run says it trained elsewhere), its DataLoader workers started as plain Python starts them, its batch read from its
model's input (sequence-first layouts, tokens, gradient accumulation) or given, an early word when nothing is counted,
its settings read from PyTorch, its output shown as it comes, and two runs of it compared by the argument that
differs."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest
import torch

from mpsstudio import cli
from mpsstudio.engine.basics.config import RunConfig
from mpsstudio.engine.basics.events import UNBOUNDED_STEPS, Notice, Window
from mpsstudio.engine.history.store import RunStore
from mpsstudio.engine.run.script import counter as counting, machine, tracker as tracked
from mpsstudio.engine.run.script.runner import arguments_for, script_config

LOOP = """
for i in range({steps}):
    x = torch.randn({batch}, 8)
    loss = nn.functional.cross_entropy(model(x), torch.randint(0, 3, ({batch},)))
    opt.zero_grad(); loss.backward(); opt.step()
"""
MODEL = "import sys, os, torch\nfrom torch import nn\nmodel = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 3))\n" \
        "opt = torch.optim.SGD(model.parameters(), lr=0.1)\n"


def _run(tmp_path, text: str, *extra: str, name: str = "train.py") -> tuple[int, object]:
    path = tmp_path / name
    path.write_text(text)
    code = cli.main(["run", str(path), "--devices", "cpu", "--warmup", "2", *extra])
    return code, RunStore().all()[-1]


# ---------------------------------------------------------------- the device asked for is the device it trains on


def test_a_cpu_run_shows_the_script_no_accelerator_and_puts_the_machine_back(tmp_path):
    seen = tmp_path / "seen.json"
    probe = MODEL + (
        f"json_path = {str(seen)!r}\n"
        "import json\n"
        "acc = torch.accelerator.current_accelerator()\n"
        "json.dump({'accelerator': None if acc is None else str(acc), 'acc_available': torch.accelerator.is_available(),"
        " 'acc_count': torch.accelerator.device_count(), 'cuda': torch.cuda.is_available(),"
        " 'cuda_count': torch.cuda.device_count(), 'mps': torch.backends.mps.is_available(),"
        " 'mps_count': torch.mps.device_count(), 'visible': os.environ.get('CUDA_VISIBLE_DEVICES'),"
        " 'wrapped': hasattr(torch.backends.mps.is_available, '__wrapped__')}, open(json_path, 'w'))\n"
        "device = torch.accelerator.current_accelerator() if torch.accelerator.is_available() else 'cpu'\n"
        "model.to(device)\n" + LOOP.format(steps=30, batch=4))
    before = (torch.cuda.is_available, torch.accelerator.current_accelerator, os.environ.get("CUDA_VISIBLE_DEVICES"))
    code, run = _run(tmp_path, probe)
    assert code == cli.EXIT_OK and run.status == "finished" and run.config.device == "cpu", run.error
    assert json.loads(seen.read_text()) == {"accelerator": None, "acc_available": False, "acc_count": 0,
                                            "cuda": False, "cuda_count": 0, "mps": False, "mps_count": 0,
                                            "visible": "", "wrapped": True}
    # the run was served in this process (a test's InProcessRun): everything is as it was afterwards
    assert (torch.cuda.is_available, torch.accelerator.current_accelerator,
            os.environ.get("CUDA_VISIBLE_DEVICES")) == before


def test_the_visibility_mirrors_a_torch_without_accelerators_and_lifts_for_our_own_calls():
    visibility = machine.Visibility("cpu")
    real = torch.backends.mps.is_available
    with visibility:
        assert torch.accelerator.current_accelerator() is None and torch.cuda.device_count() == 0
        assert torch.backends.mps.is_available.__wrapped__ is real  # torch._dynamo reads it when it loads
        assert torch.backends.mps.is_available.__name__ == "is_available"
        with visibility.lifted():
            assert torch.backends.mps.is_available is real
        assert torch.backends.mps.is_available is not real
    assert torch.backends.mps.is_available is real
    assert machine.Visibility("cuda").hidden == ["mps"] and machine.Visibility("mps").hidden == ["cuda"]


def test_a_script_that_trains_elsewhere_than_asked_says_so_and_is_never_relabelled():
    events = []
    config = RunConfig(model="own.py", dataset="script", device="cuda", steps=None, epochs=None, warmup_steps=2,
                       batch_size=None, optimizer=None, lr=None, precision=None)
    tracker = tracked.Tracker(config, events.append, asked=True, machine={"hostname": "h", "os": "Linux"})
    with pytest.raises(tracked.ScriptDone):
        tracker.step(torch.tensor(1.0), 8)  # a loss on the CPU in the run for cuda
    result = tracker.result
    assert result.status == "failed" and result.config.device == "cuda" and result.summary.trained_on == "cpu"
    assert result.error.startswith("Asked for cuda; the script trained on cpu: it chooses its device itself")
    assert "--args-for cuda=" in result.error and not result.windows
    alone = tracked.Tracker(RunConfig(model="own.py", dataset="script", device="cuda", steps=None, epochs=None,
                                      warmup_steps=2), lambda e: None, limit=3)
    alone.step(torch.tensor(1.0), 8)  # run by python (nothing asked): the run is where its loss is
    assert alone.config.device == "cpu"
    assert tracked.trained_elsewhere("cuda:1", torch.device("cuda", 0)) == "cuda:0"
    assert tracked.trained_elsewhere("cuda", torch.device("cuda", 3)) == ""


def test_arguments_for_one_device_reach_that_run_alone(tmp_path):
    said = tmp_path / "args.txt"
    text = MODEL + f"open({str(said)!r}, 'a').write(' '.join(sys.argv[1:]) + '\\n')\n" + LOOP.format(steps=20, batch=4)
    code, run = _run(tmp_path, text, "--args-for", "cpu=--fast --tag 'a b'", "--args-for", "cuda=--accel", "--",
                     "--epochs", "1", "--on", "{device}")
    assert code == cli.EXIT_OK, run.error
    assert said.read_text().splitlines() == ["--epochs 1 --on cpu --fast --tag a b"]
    assert run.config.options["device_args"] == {"cpu": ["--fast", "--tag", "a b"], "cuda": ["--accel"]}
    cuda = run.config.with_device("cuda")
    assert arguments_for(cuda) == ["--epochs", "1", "--on", "cuda", "--accel"]
    assert cuda.comparison_key() == run.config.comparison_key()  # one setup: the devices are compared


@pytest.mark.parametrize("given, said", [
    ("cuda", "--args-for takes DEVICE=ARGUMENTS"),
    ("gpu=--x", "--args-for takes DEVICE=ARGUMENTS"),
    ("cpu=--name 'open", "The arguments for cpu cannot be split as a shell would"),
])
def test_arguments_for_a_device_that_cannot_be_used_are_one_sentence(tmp_path, capsys, given, said):
    path = tmp_path / "train.py"
    path.write_text(MODEL)
    assert cli.main(["run", str(path), "--devices", "cpu", "--args-for", given]) == cli.EXIT_BAD_INPUT
    err = capsys.readouterr().err
    assert said in err and "Traceback" not in err and not RunStore().all()


# ---------------------------------------------------------------- its workers, as python starts them

NO_GUARD = ("import torch\nfrom torch import nn\nx = torch.randn(256, 8); y = torch.randint(0, 3, (256,))\n"
            "loader = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(x, y), batch_size=16, num_workers=2)\n"
            "model = nn.Linear(8, 3); opt = torch.optim.SGD(model.parameters(), lr=0.1)\n"
            "for epoch in range(3):\n    for xb, yb in loader:\n"
            "        loss = nn.functional.cross_entropy(model(xb), yb)\n"
            "        opt.zero_grad(); loss.backward(); opt.step()\n")


@pytest.mark.skipif(sys.platform == "darwin", reason="macOS starts workers with spawn, as plain python does there")
def test_dataloader_workers_without_a_main_guard_train_as_under_python(tmp_path):
    code, run = _run(tmp_path, NO_GUARD)
    assert code == cli.EXIT_OK and run.status == "finished", run.error
    assert run.summary.measured_steps == 3 * 16 - 2 and run.config.batch_size == 16


@pytest.mark.long
def test_where_python_spawns_workers_the_missing_guard_is_named_with_its_fix(tmp_path, monkeypatch):
    monkeypatch.setenv(machine.START_METHOD_VAR, "spawn")  # macOS's default, and Linux's from Python 3.14 (forkserver)
    code, run = _run(tmp_path, NO_GUARD.replace("num_workers=2", "num_workers=1"))  # one fresh interpreter is enough
    assert code == cli.EXIT_RUN_FAILED and run.status == "failed"
    assert run.error.startswith("The script's DataLoader workers could not start: Python starts them with spawn here")
    assert 'if __name__ == "__main__":' in run.error and "num_workers=0" in run.error
    assert machine.has_main_guard(str(tmp_path / "train.py")) is False


def test_the_main_guard_is_recognised(tmp_path):
    path = tmp_path / "guarded.py"
    path.write_text("def main():\n    pass\n\nif '__main__' == __name__:\n    main()\n")
    assert machine.has_main_guard(str(path)) is True
    path.write_text("if __name__ == \"__main__\" and True:\n    pass\n")
    assert machine.has_main_guard(str(path)) is True
    path.write_text("def f(:\n")
    assert machine.has_main_guard(str(path)) is None


# ---------------------------------------------------------------- the batch

LM = ("import torch\nfrom torch import nn\n"
      "class RNNModel(nn.Module):\n"
      "    def __init__(self):\n        super().__init__()\n        self.encoder = nn.Embedding(50, 16)\n"
      "        self.rnn = nn.{layer}\n        self.decoder = nn.Linear(16, 50)\n"
      "    def forward(self, input, hidden):\n        out, hidden = self.rnn(self.encoder(input), hidden)\n"
      "        return self.decoder(out), hidden\n"
      "model = RNNModel(); criterion = nn.CrossEntropyLoss()\nopt = torch.optim.SGD(model.parameters(), lr=0.1)\n"
      "data = torch.randint(0, 50, ({shape}))\n"
      "for it in range(60):\n    inp, tgt = {slices}\n"
      "    out, _ = model(inp, {hidden})\n"
      "    loss = criterion(out.reshape(-1, 50), tgt.reshape(-1))\n    opt.zero_grad(); loss.backward(); opt.step()\n")


@pytest.mark.parametrize("layer, shape, slices, hidden, batch_from", [
    ("LSTM(16, 16)", "36, 20", "data[:35], data[1:36]", "(torch.zeros(1, 20, 16), torch.zeros(1, 20, 16))",
     "the second dimension of the model's first input (its LSTM takes sequence-first input)"),
    ("GRU(16, 16, batch_first=True)", "20, 36", "data[:, :35], data[:, 1:36]", "torch.zeros(1, 20, 16)",
     "the first dimension of the model's first input"),
])
def test_a_language_model_counts_sequences_and_tokens_whatever_its_layout(tmp_path, layer, shape, slices, hidden,
                                                                         batch_from):
    code, run = _run(tmp_path, LM.format(layer=layer, shape=shape, slices=slices, hidden=hidden))
    assert code == cli.EXIT_OK and run.status == "finished", run.error
    assert run.config.batch_size == 20 and run.summary.batch_from == batch_from
    assert run.summary.tokens_per_sample == 35
    assert run.summary.tokens_per_s == pytest.approx(35 * run.summary.samples_per_s)
    assert sum(w.samples for w in run.windows) == 20 * run.summary.measured_steps
    from mpsstudio.engine.run.script.words import script_lines

    lines = script_lines(run)
    assert lines[0] == f"Batch: 20 samples a step, from {batch_from}."
    assert lines[1].startswith("Tokens: ") and "tokens/s, measured (35 tokens a sequence x" in lines[1]


def test_micro_batches_add_up_to_the_step_and_a_given_batch_wins(tmp_path):
    accumulate = MODEL + ("for i in range(40):\n    for micro in range(4):\n"
                          "        loss = nn.functional.cross_entropy(model(torch.randn(8, 8)), torch.randint(0, 3, (8,)))\n"
                          "        (loss / 4).backward()\n    opt.step(); opt.zero_grad()\n")
    code, run = _run(tmp_path, accumulate)
    assert code == cli.EXIT_OK, run.error
    assert run.config.batch_size == 32 and {w.samples / w.steps for w in run.windows} == {32}
    code, run = _run(tmp_path, accumulate, "--batch-size", "5")
    assert code == cli.EXIT_OK and run.config.batch_size == 5 and run.summary.batch_from == "--batch-size"
    assert {w.samples / w.steps for w in run.windows} == {5}


def test_after_the_first_step_only_the_model_carries_a_hook(tmp_path):
    """What the count costs a step: PyTorch's global module hooks (every module call on the slow path) are removed
    at the first optimizer step; one forward pre-hook on the model stays."""
    from torch.nn.modules import module as modules

    counts = tmp_path / "hooks.json"
    text = MODEL + LOOP.format(steps=3, batch=4) + (
        "import json\nfrom torch.nn.modules import module as m\n"
        f"json.dump([len(m._global_forward_pre_hooks), len(m._global_forward_hooks), len(model._forward_pre_hooks),"
        f" sum(len(c._forward_pre_hooks) for c in model.children())], open({str(counts)!r}, 'w'))\n"
        + LOOP.format(steps=10, batch=4))
    code, run = _run(tmp_path, text)
    assert code == cli.EXIT_OK, run.error
    assert json.loads(counts.read_text()) == [0, 0, 1, 0]
    assert not modules._global_forward_pre_hooks and not modules._global_forward_hooks  # and none after the run


def test_a_failed_run_keeps_the_batch_it_saw_and_one_that_saw_none_says_not_known(tmp_path):
    code, run = _run(tmp_path, MODEL + "model(torch.randn(12, 8))\nraise ValueError('bad data')\n")
    assert code == cli.EXIT_RUN_FAILED and run.config.batch_size == 12 and "bad data" in run.error
    code, run = _run(tmp_path, "raise ValueError('before anything')\n")
    assert run.status == "failed" and run.config.batch_size is None and run.config.batch_words == "batch not known"
    assert run.summary.energy_reason == "not measured (the script ended before its first training step)"
    assert RunStore().get(run.id).config.batch_size is None  # stored and read back as not known


# ---------------------------------------------------------------- early word, settings, output


def test_a_script_with_no_optimizer_says_so_early_and_ends_failed_with_the_fix(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(counting, "NO_STEP_S", 0.3)
    manual = MODEL + ("import time\nstart = time.monotonic()\nwhile time.monotonic() - start < 1.5:\n"
                      "    loss = nn.functional.cross_entropy(model(torch.randn(8, 8)), torch.randint(0, 3, (8,)))\n"
                      "    model.zero_grad(); loss.backward()\n    with torch.no_grad():\n"
                      "        for p in model.parameters(): p -= 0.1 * p.grad\n")
    code, run = _run(tmp_path, manual)
    err = capsys.readouterr().err
    assert code == cli.EXIT_RUN_FAILED and "The script ended without a training step to measure" in run.error
    early = err.index("cpu: No training step counted 0.3 s after the script's first forward pass")
    assert early < err.index("cpu: failed") and "mpsstudio.track.step(loss, batch_size=n)" in err


def test_a_script_of_plain_tensors_with_no_optimizer_gets_the_early_word_too(tmp_path, capsys, monkeypatch):
    """No nn.Module and no torch.optim: its first backward starts the early word's clock (it never came before), and
    the word says how the run ends and how to end it now."""
    monkeypatch.setattr(counting, "NO_STEP_S", 0.3)
    plain = ("import time, torch\nw = torch.randn(8, 3, requires_grad=True)\nstart = time.monotonic()\n"
             "while time.monotonic() - start < 1.5:\n    loss = (torch.randn(4, 8) @ w).square().mean()\n"
             "    loss.backward()\n    with torch.no_grad():\n        w -= 0.01 * w.grad; w.grad = None\n")
    code, run = _run(tmp_path, plain)
    err = capsys.readouterr().err
    assert code == cli.EXIT_RUN_FAILED and "The script ended without a training step to measure" in run.error
    assert "cpu: No training step counted 0.3 s after the script's first forward pass" in err
    assert "Stop (Ctrl-C here) ends it now" in err


def test_the_settings_are_the_scripts_own(tmp_path):
    text = ("import torch\nfrom torch import nn\ntorch.backends.cuda.matmul.allow_tf32 = True\n"
            "model = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 3))\n"
            "opt = torch.optim.AdamW(model.parameters(), lr=3e-4)\n"
            "for i in range(40):\n    with torch.autocast('cpu', dtype=torch.bfloat16):\n"
            "        loss = nn.functional.cross_entropy(model(torch.randn(8, 8)), torch.randint(0, 3, (8,)))\n"
            "    opt.zero_grad(); loss.backward(); opt.step()\n")
    code, run = _run(tmp_path, text)
    assert code == cli.EXIT_OK, run.error
    c = run.config
    assert (c.optimizer, c.lr, c.precision, c.tf32, c.compile) == ("adamw", 3e-4, "bf16", False, False)
    found = run.summary.script_settings
    assert found["optimizer"] == "AdamW" and found["autocast"] == "bf16" and found["tf32_matmul"] is True
    assert run.summary.script_settings_words == ["optimizer AdamW, lr 0.0003", "bf16 autocast",
                                                    "weights in float32"]
    assert run.summary.precision_note == ""  # the engine's TF32 note is about its own runs


def test_a_script_run_is_compared_across_devices_whatever_it_chose_on_each():
    cpu = script_config(str(Path(__file__)), ["--x"]).changed(precision="fp32", optimizer="adamw", window_s=0.1)
    # the script's autocast on the GPU; our 1 s windows
    gpu = cpu.with_device("cuda").changed(precision="bf16", tf32=True, window_s=1.0)
    assert cpu.comparison_key() == gpu.comparison_key()
    other = script_config(str(Path(__file__)), ["--y"])
    assert other.comparison_key() != cpu.comparison_key()


def test_a_script_runs_progress_counts_steps_and_time_when_it_runs_to_its_end(capsys):
    from mpsstudio.cli.runs import Progress

    progress = Progress()
    progress.device = "cpu"
    window = Window(index=3, first_step=40, losses=[0.5], seconds=0.1, samples=8, samples_per_s=80.0, data_wait_s=0,
                    memory=0, memory_detail={}, steps_done=120, total_steps=UNBOUNDED_STEPS, elapsed_s=14.0, eta_s=None)
    progress(window)
    progress(Notice("a sentence for the run", "mps"))
    err = capsys.readouterr().err
    assert "cpu: step 120 · 14.0 s · 80 samples/s, loss 0.5000" in err and "%" not in err
    assert "mps: a sentence for the run" in err


@pytest.mark.processes  # the output pipe belongs to a run process
def test_the_scripts_output_is_shown_as_it_comes(tmp_path, capsys):
    text = MODEL + "print('hello from the script', flush=True)\n" + LOOP.format(steps=20, batch=4) + \
        "print('\\x1b[31mthe end\\x1b[0m')\n"
    code, run = _run(tmp_path, text, "--show-output")
    err = capsys.readouterr().err
    assert code == cli.EXIT_OK, run.error
    assert "cpu | hello from the script" in err and "cpu | ?[31mthe end" in err  # escapes shown, not obeyed


# ---------------------------------------------------------------- two runs of it, compared


def test_two_runs_of_a_script_are_compared_by_the_argument_that_differs(tmp_path, capsys):
    text = ("import argparse, torch\nfrom torch import nn\np = argparse.ArgumentParser()\n"
            "p.add_argument('--batch_size', type=int)\np.add_argument('--seed', type=int, default=0)\na = p.parse_args()\n"
            + MODEL.split("\n", 1)[1] + LOOP.format(steps=60, batch="a.batch_size"))
    ids = []
    for size in (8, 16):
        code, run = _run(tmp_path, text, "--", "--batch_size", str(size), "--seed", "1")
        assert code == cli.EXIT_OK, run.error
        ids.append(run.id)
    capsys.readouterr()
    assert cli.main(["history", "--compare", *ids]) == cli.EXIT_OK
    out = capsys.readouterr().out
    assert "--batch_size 16 against --batch_size 8" in out or "--batch_size 16 is " in out
    assert "nothing else differs (batch: 16; the baseline's: 8)" in out and "--seed" not in out
    for fmt in ("md", "html"):
        report = tmp_path / f"report.{fmt}"
        assert cli.main(["report", *ids, "--format", fmt, "--out", str(report)]) == cli.EXIT_OK
        shown = report.read_text()
        assert "selected runs compared" in shown and "--batch_size 16" in shown and "vs baseline" in shown
        assert "train.py (your script)" in shown


def test_a_scripts_model_column_shows_its_file_name_first(monkeypatch, tmp_path):
    monkeypatch.setenv("HOME", str(tmp_path))
    config = RunConfig(model=str(tmp_path / "projects" / "gpt" / "train.py"), dataset="script", steps=None,
                       epochs=None)
    assert config.model_label == "train.py \u2014 ~/projects/gpt"
    assert RunConfig(model="resnet18").model_label == "resnet18"


def test_the_idle_power_is_read_after_the_scripts_last_step_never_between_two(monkeypatch):
    """Reading a device's idle power sleeps about a second: inside a script's run it was a pause the script's own
    clock saw (and a GPU's clocks fell in). A script's run reads it once its last step is done."""
    import time

    from mpsstudio.engine.analysis.energy import describe_idle
    from mpsstudio.engine.machine.energy import base, meter as meters
    from mpsstudio.engine.run import setup

    class Counter(base.Counter):  # a board drawing 50 W, read as NVML's counter is
        name, scope = "counter", "the whole board"

        def read(self):
            return {"gpu": 50.0 * time.perf_counter()}

    calls = []

    class Watched(meters.Meter):
        def idle(self, seconds=None):
            calls.append(("idle", tracker.count))
            return super().idle(0.05)
    monkeypatch.setattr(setup.energy, "meter_for", lambda *a: Watched(part="gpu", counters=[Counter()]))
    config = RunConfig(model="own.py", dataset="script", device="cpu", steps=None, epochs=None, warmup_steps=3,
                       window_s=0.001)
    tracker = tracked.Tracker(config, lambda e: None, limit=30, asked=True)
    with pytest.raises(tracked.ScriptDone):
        for i in range(100):
            tracker.step(torch.tensor(1.0), 4)
    assert calls == [("idle", 33)]  # once, after the 3 warm-up and 30 measured steps
    s = tracker.result.summary
    assert s.idle_when == "after" and "after the script's last step" in describe_idle(s)


def test_an_lbfgs_closure_evaluated_many_times_is_one_batch(tmp_path):
    text = MODEL.replace("torch.optim.SGD(model.parameters(), lr=0.1)", "torch.optim.LBFGS(model.parameters(), max_iter=5)") + (
        "x, y = torch.randn(12, 8), torch.randint(0, 3, (12,))\n"
        "def closure():\n    opt.zero_grad()\n    loss = nn.functional.cross_entropy(model(x), y)\n"
        "    loss.backward()\n    return loss\n"
        "for i in range(30):\n    opt.step(closure)\n")
    code, run = _run(tmp_path, text)
    assert code == cli.EXIT_OK and run.status == "finished", run.error
    assert run.config.batch_size == 12 and {w.samples / w.steps for w in run.windows} == {12}
    assert run.config.optimizer == "lbfgs"
