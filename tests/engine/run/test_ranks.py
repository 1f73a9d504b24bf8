"""Runs on several GPUs (run/distributed.py, run/ranks.py, process/rank.py), tried here as torchrun launches two
ranks on the CPU with the gloo backend: one run with both ranks' figures, windows agreed across ranks, a rank that
raises, dies or hangs named, Stop, two "machines" on one host, and nothing left behind."""

from __future__ import annotations

import json
import os
import socket
import threading
import time

import psutil
import pytest

from mpsstudio import cli
from mpsstudio.engine.basics.config import RunConfig
from mpsstudio.engine.basics.errors import UserError
from mpsstudio.engine.basics.events import Window
from mpsstudio.engine.run import distributed, session

BAD_RANK = '''
import os, signal, time
from torch import nn

class Rank(nn.Module):
    def __init__(self, num_classes, features):
        super().__init__()
        self.head = nn.Linear(features, num_classes)
        self.calls = 0

    def forward(self, x):
        self.calls += 1
        if os.environ.get("RANK") == "1" and self.calls == int(os.environ.get("BAD_AT", "6")):
            how = os.environ.get("BAD_HOW", "")
            if how == "raise":
                raise ValueError("rank trouble on purpose")
            if how == "hang":
                time.sleep(10_000)
        time.sleep(0.002)
        return self.head(x.flatten(1))

def build_model(num_classes, input_shape):
    size = 1
    for n in input_shape:
        size *= n
    return Rank(num_classes, size)
'''
NVLINK_OFF = {"NCCL_NVLS_ENABLE": "0", "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1", "NVSHMEM_DISABLE_NVLS": "1"}


def ranked(tmp_path, **kwargs) -> RunConfig:
    """Two ranks of the misbehaving model. Inference: the ranks still meet at every window's end (the agreement is a
    collective) without an optimizer, whose first use imports torch._dynamo (~1.6 s a rank on this machine)."""
    model = tmp_path / "bad_rank.py"
    model.write_text(BAD_RANK)
    settings = dict(model=str(model), dataset="synthetic", device="cpu", batch_size=8, steps=40, epochs=None,
                    warmup_steps=2, gpus=2, window_s=0.05, image_size=8, rank_timeout_s=2.0, mode="inference")
    settings.update(kwargs)
    return RunConfig(**settings).validate()


def ranks_of(pid: int) -> dict[int, psutil.Process]:
    """The rank processes under `pid`, by rank."""
    out = {}
    for p in psutil.Process(pid).children(recursive=True):
        try:
            if "mpsstudio.engine.process.rank" in " ".join(p.cmdline()):
                out[int(p.environ().get("RANK", "-1"))] = p
        except psutil.Error:
            pass
    return out


OWNER = "MPSSTUDIO_TEST_RANKS_OWNER"  # set to this test process's pid: ranks of another test worker are not ours


@pytest.fixture(autouse=True)
def _own_ranks(monkeypatch):
    monkeypatch.setenv(OWNER, str(os.getpid()))  # the run process, torchrun and the ranks inherit it


def assert_no_ranks_left() -> None:
    deadline = time.monotonic() + 10
    while True:
        left = [p.pid for p in psutil.process_iter(["cmdline"]) if p.info["cmdline"] and
                any("mpsstudio.engine.process.rank" in part or "torch.distributed.run" in part
                    for part in p.info["cmdline"]) and _ours(p)]
        if not left or time.monotonic() > deadline:
            break
        time.sleep(0.1)
    assert left == [], f"ranks or torchrun left behind: {left}"


def _ours(p: psutil.Process) -> bool:
    try:
        env = p.environ()
        mine = env.get(OWNER) == str(os.getpid())  # (a parallel test's ranks are its own to check)
        return mine and (env.get("MPSSTUDIO_RANKS_KEY") is not None or "torch.distributed.run" in " ".join(p.cmdline()))
    except psutil.Error:
        return False


@pytest.mark.long
def test_two_ranks_keep_one_run_with_both_ranks_figures_and_the_scaling(tmp_path, monkeypatch, capsys):
    for name, value in NVLINK_OFF.items():  # a shared host's switches: every rank must see them
        monkeypatch.setenv(name, value)
    out = tmp_path / "runs.json"
    code = cli.main(["bench", "--model", "mlp", "--dataset", "synthetic", "--devices", "cpu", "--gpus", "1,2",
                     "--steps", "24", "--warmup", "2", "--batch-size", "16", "--no-inspect", "--rank-timeout", "30",
                     "--json", str(out)])
    printed = capsys.readouterr()
    assert code == 0, printed.err
    runs = json.loads(out.read_text())["runs"]
    assert [r["config"]["gpus"] for r in runs] == [1, 2]
    one, two = runs
    s = two["summary"]
    assert s["ranks_world"] == 2 and s["global_batch"] == 32
    assert two["env"]["ranks"]["world"] == 2 and two["env"]["ranks"]["backend"] == "gloo"
    assert all(two["env"]["env"][name] == value for name, value in NVLINK_OFF.items())  # passed to the ranks
    ranks = s["ranks"]
    assert [r["rank"] for r in ranks] == [0, 1]
    assert all(r["peak_memory"] > 0 and r["window_s_median"] > 0 for r in ranks)
    # every rank's windows ended at the same steps (the warm-up's end first), and a window is the slowest rank's
    assert ranks[0]["window_steps"] == ranks[1]["window_steps"]
    windows = two["windows"]
    ends = [w["first_step"] + w["steps"] - 1 for w in windows]
    assert ranks[0]["window_steps"][1:] == ends
    for i, w in enumerate(windows):
        slowest = max(ranks[0]["window_s"][i + 1], ranks[1]["window_s"][i + 1])
        assert w["seconds"] == pytest.approx(slowest, abs=2e-6)
        assert w["samples"] == w["steps"] * 16 * 2  # both ranks' samples
    comm = s["communication"]
    assert comm["pairs"] == 6 and comm["low"] <= comm["share"] <= comm["high"]
    assert "cpu \u00d72" in printed.out and "Scaling: mlp on synthetic, batch 16 per CPU rank" in printed.out
    assert "CPU ranks" in printed.out and ("faster than one" in printed.out or "gain nothing" in printed.out
                                           or "Too short to tell the scaling" in printed.out)  # 2 busy cores
    assert "2 CPU processes sharing this CPU's cores" in printed.err
    assert_no_ranks_left()


@pytest.mark.long
@pytest.mark.parametrize("how, words", [
    ("raise", "Rank 1 of 2 failed: The run stopped with an error: ValueError: rank trouble on purpose"),
    ("hang", "Rank 1 stopped answering: rank 0 of 2 waited 2 s for it at a collective (the ranks' timeout, "
             "--rank-timeout) and the run was ended (RuntimeError: "),
])
def test_a_rank_that_raises_or_hangs_fails_the_run_naming_it(tmp_path, monkeypatch, how, words):
    monkeypatch.setenv("BAD_HOW", how)
    events = []
    result = session.run_one(ranked(tmp_path), on_event=events.append, prepared=lambda: None)
    assert result.status == "failed"
    assert result.error.startswith(words)
    assert any(isinstance(e, Window) for e in events) or how == "raise"  # rank 0's windows until then are kept
    assert_no_ranks_left()


@pytest.mark.long
@pytest.mark.processes
def test_a_rank_killed_mid_run_fails_the_run_naming_it_and_nothing_is_left(tmp_path, run_pids, monkeypatch):
    from mpsstudio.engine import process

    killed = []

    def on_event(event):
        if isinstance(event, Window) and not killed:
            victims = ranks_of(run_pids[-1])
            victims[1].kill()
            killed.append(victims[1].pid)
    results = process.run_isolated([ranked(tmp_path, steps=100_000)], on_event=on_event)
    assert killed
    result = results[0]
    assert result.status == "failed"
    assert result.error.startswith("Rank 1 of 2 ended without a word (killed by signal 9 (SIGKILL))")
    assert result.windows  # what rank 0 measured before is kept
    assert_no_ranks_left()


@pytest.mark.long
@pytest.mark.processes
def test_stop_while_a_rank_hangs_ends_every_rank(tmp_path, run_pids, monkeypatch):
    """Stop cannot be agreed with a hung rank: the run's process is ended after its grace, and with it every rank
    (they run in sessions of their own) and torchrun."""
    from mpsstudio.engine import process

    monkeypatch.setenv("BAD_HOW", "hang")
    monkeypatch.setenv("BAD_AT", "8")
    seen = []
    results = process.run_isolated([ranked(tmp_path, steps=100_000, rank_timeout_s=600.0)], on_event=seen.append,
                                   should_stop=lambda: any(isinstance(e, Window) for e in seen), grace_s=1.0)
    assert results[0].status == "cancelled"
    assert_no_ranks_left()


@pytest.mark.long
def test_two_machines_on_one_host_meet_at_a_rendezvous(tmp_path):
    """Two launches with --nnodes 2 and one c10d rendezvous on localhost, one rank each: the machine of rank 0 keeps
    the run with both ranks' figures; the other says where it is."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    base = ranked(tmp_path, gpus=1, steps=10, rank_timeout_s=30.0, torchrun=["--nnodes=2", "--rdzv-backend=c10d",
                                                       f"--rdzv-endpoint=127.0.0.1:{port}", "--rdzv-id=test"])
    answers: dict = {}

    def node(i):
        try:
            answers[i] = session.run_one(base, prepared=lambda: None)
        except UserError as exc:
            answers[i] = str(exc)
    threads = [threading.Thread(target=node, args=(i,)) for i in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    results = [a for a in answers.values() if not isinstance(a, str)]
    said = [a for a in answers.values() if isinstance(a, str)]
    assert len(results) == 1 and len(said) == 1, answers
    run = results[0]
    assert run.status == "finished", run.error
    assert run.summary.ranks_world == 2 and run.env["ranks"]["nodes"] == 2
    assert [r["node"] for r in run.summary.ranks] == [0, 1]
    assert said[0] == "This machine ran rank 1 of 2; the run is kept on the machine of rank 0, with every rank's figures."
    assert_no_ranks_left()


# ---------------------------------------------------------------------------------------------- bad input


@pytest.mark.parametrize("args, words", [
    (["--gpus", "two"], "--gpus takes a number of GPUs or a list such as 1,2,4, not 'two'."),
    (["--gpus", "0"], "The number of GPUs must be a whole number from 1 to 64, not 0."),
    (["--gpus", "1,,2"], "--gpus takes a number of GPUs"),
    (["--gpus", "\u00b2"], "--gpus takes a number of GPUs"),  # a digit to isdigit(), not to int()
    (["--gpus", ",".join(["1"] * 17)], "--gpus takes at most 16 counts, not 17"),
    (["--gpus", "2", "--devices", "cpu", "--master-port", "abc"], "--master-port must be a port from 1 to 65535"),
    (["--gpus", "2", "--devices", "cpu", "--master-port", "99"], "on one machine torchrun picks a free port itself"),
    (["--gpus", "2", "--devices", "cpu", "--nnodes", "abc"], "--nnodes is a number of machines (or MIN:MAX)"),
    (["--gpus", "2", "--devices", "cpu", "--nnodes", "2", "--rdzv-endpoint", "nohost"], "--rdzv-endpoint is HOST:PORT"),
    (["--gpus", "2", "--devices", "cpu", "--nnodes", "2", "--master-addr", "h", "--node-rank", "2"],
     "--node-rank is this machine's number, from 0 to 1"),
    (["--gpus", "2", "--devices", "cpu", "--early-stop", "2", "--dataset", "shapes"],
     "Early stopping and the best epoch are for one device"),
    (["--gpus", "2", "--devices", "cpu", "--save-model", "m.pt"], "--save-model saves one device's model"),
    (["--gpus", "2", "--devices", "cpu", "--rank-timeout", "0.5"], "The ranks' timeout must be between 1 and 3600"),
    (["--gpus", "2", "--devices", "cpu", "--rdzv-endpoint", "h:1", "--rdzv-conf", "x"], "unrecognized arguments"),
])
def test_bad_gpu_arguments_are_one_sentence(args, words, capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    try:
        code = cli.main(["bench", "--model", "mlp", "--dataset", "synthetic", *args])
    except SystemExit as exc:
        code = exc.code
    err = capsys.readouterr().err
    assert code == 2 and words in err and "Traceback" not in err


@pytest.mark.parametrize("changes, words", [
    (dict(device="mps"), "Runs on several GPUs name the device cuda"),
    (dict(device="cuda:1"), "Runs on several GPUs name the device cuda"),
    (dict(dataset="script", model="train.py"), "--gpus runs MPS Studio's own loop on several GPUs"),
    (dict(torchrun=["--nproc-per-node=8"]), "'--nproc-per-node=8' is not a torchrun option MPS Studio passes on"),
    (dict(torchrun=["--max-restarts=3"]), "is not a torchrun option"),
    (dict(torchrun="--nnodes=2"), "torchrun's options must be a list"),
    (dict(torchrun=["--nnodes=2"]), "A run on several machines needs where they meet: give --rdzv-endpoint"),
    (dict(gpus=True), "The number of GPUs must be a whole number"),
    (dict(rank_timeout_s=float("nan")), "The ranks' timeout must be between"),
])
def test_configs_no_run_on_ranks_can_use_are_refused(changes, words):
    settings = dict(model="mlp", dataset="synthetic", device="cpu", steps=5, epochs=None, gpus=2)
    settings.update(changes)
    with pytest.raises(UserError, match=None) as caught:
        RunConfig(**settings).validate()
    assert words in str(caught.value)


def test_more_gpus_than_the_machine_has_is_skipped_with_a_sentence(monkeypatch):
    import torch

    from mpsstudio.engine.machine import devices

    real = devices.resolve_device
    monkeypatch.setattr(devices, "resolve_device", lambda name: real("cpu") if name == "cuda" else real(name))
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 2)
    plan = session.plan(RunConfig(model="mlp", dataset="synthetic", steps=5, epochs=None), ["cuda"], [1, 2, 4])
    # (the faked "cuda" resolves to the CPU here: what matters is the count's sentence)
    assert "skipping 4 GPUs: this machine has 2." in plan.skipped or [c.gpus for c in plan.configs] == [1, 2, 4]
    with pytest.raises(UserError, match="This machine has 2 CUDA GPUs; --gpus 4 needs 4"):
        distributed.check_launch(RunConfig(model="mlp", dataset="synthetic", steps=5, epochs=None, device="cuda",
                                           gpus=4))


def test_every_rank_gets_the_whole_environment_and_nothing_turns_multicast_on(monkeypatch):
    for name, value in NVLINK_OFF.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("PYTHONPATH", "/somewhere")
    env = distributed.rank_environment("/tmp/x/s", "ab" * 16)
    assert all(env[name] == value for name, value in NVLINK_OFF.items())
    assert env["PYTHONPATH"].endswith(os.pathsep + "/somewhere") and env["MPSSTUDIO_RANKS_KEY"] == "ab" * 16
    assert {k: v for k, v in env.items() if k not in ("PYTHONPATH", "MPSSTUDIO_RANKS_ADDRESS",
                                                      "MPSSTUDIO_RANKS_KEY")} == {
        k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    cmd = distributed.command(RunConfig(model="mlp", device="cuda", gpus=4))
    assert cmd[1:5] == ["-m", "torch.distributed.run", "--nproc-per-node=4", "--standalone"]
    assert "--max-restarts=0" in cmd and cmd[-2:] == ["-m", "mpsstudio.engine.process.rank"]
    assert not any("NVLS" in part or "MULTICAST" in part for part in cmd)
    cmd = distributed.command(RunConfig(model="mlp", device="cuda", gpus=2, torchrun=[
        "--nnodes=2", "--rdzv-backend=c10d", "--rdzv-endpoint=host:29400", "--rdzv-id=job"]))
    assert "--standalone" not in cmd and "--rdzv-endpoint=host:29400" in cmd
