"""Nothing lost, nothing leaked (issue 47): impossible values refused where they enter (a run is never lost, the
history always reads back what it kept), a script's secrets redacted wherever its arguments and words go, user and
host names scrubbed inside words while prose stays prose, tool files whose rows contradict themselves refused,
another Python contained as a run is, and the edges answered with the right exit code and sentence."""

from __future__ import annotations

import json
import os
import resource
import sqlite3
import subprocess
import sys
import threading
import time

import pytest

from mpsstudio import cli
from mpsstudio.engine.basics.config import RunConfig
from mpsstudio.engine.basics.redact import REDACTED, redact_args, redact_text
from mpsstudio.engine.basics.results import RunResult, WindowRow
from mpsstudio.engine.history.store import RunStore
from tests.support.paths import ROOT
from tests.support.scripts import MT, tracked_run

TOOL_RESULTS = ROOT / "tests" / "data" / "tool_results"
HOSTILE = ROOT / "tests" / "data" / "hostile"

def _history_reads_back_everything() -> list[RunResult]:
    store = RunStore()
    try:
        runs = store.all()
        assert not store.notices, store.notices
        return runs
    finally:
        store.close()


# ---------------------------------------------------------------- values checked where they enter


@pytest.mark.parametrize("call, said", [
    ("mt.step(loss, batch_size=10**30)", "batch_size must be a whole number from 1 to 1,048,576"),
    ("mt.step(loss, batch_size=2**63)", "batch_size must be a whole number from 1 to 1,048,576"),
    ("mt.step(loss, batch_size=2**62)", "batch_size must be a whole number from 1 to 1,048,576"),
    ("mt.step(loss.to('meta'), batch_size=8)", "the loss is on the meta device, which holds shapes but no values"),
    ("mt.step(torch.complex(loss, loss), batch_size=8)", "the loss is complex; give a real number"),
    ("mt.step(loss.detach().reshape(1, 1).to_sparse(), batch_size=8)", "the loss is a sparse_coo tensor"),
    ("mt.step(float('nan'), batch_size=8)", "the loss is nan, not a finite number"),
])
def test_a_step_that_cannot_be_measured_fails_its_run_with_the_reason_and_loses_nothing(tmp_path, call, said):
    code, run = tracked_run(tmp_path, MT.format(n=30, call=call))
    assert code == cli.EXIT_RUN_FAILED and run.status == "failed" and said in run.error, run.error
    assert [r.id for r in _history_reads_back_everything()] == [run.id]


def test_the_hook_counter_refuses_a_batch_past_the_limit_and_a_complex_loss(tmp_path):
    huge = ("import torch\nfrom torch import nn\nm = nn.Linear(1, 1)\nopt = torch.optim.SGD(m.parameters(), lr=0.1)\n"
            "x = torch.zeros(2_000_000, 1)\nfor i in range(5):\n    loss = m(x).mean()\n"
            "    opt.zero_grad(); loss.backward(); opt.step()\n")
    code, run = tracked_run(tmp_path, huge)
    assert code == cli.EXIT_RUN_FAILED and run.error.startswith("Step 1 could not be measured: its samples (2000000, "
                                                                "from the first dimension of the model's first input)")
    complex_loss = ("import torch\nfrom torch import nn\nm = nn.Linear(4, 4).to(torch.complex64)\n"
                    "opt = torch.optim.SGD(m.parameters(), lr=0.01)\nfor i in range(5):\n"
                    "    out = m(torch.randn(8, 4, dtype=torch.complex64)).sum()\n    opt.zero_grad()\n"
                    "    torch.autograd.backward(out, grad_tensors=torch.ones_like(out))\n    opt.step()\n")
    code, run = tracked_run(tmp_path, complex_loss)
    assert code == cli.EXIT_RUN_FAILED and "the loss is complex" in run.error, run.error
    assert len(_history_reads_back_everything()) == 2


def test_a_run_the_history_could_not_read_back_is_kept_as_failed_saying_why(tmp_path):
    store = RunStore(tmp_path / "runs.sqlite3")
    run = RunResult(config=RunConfig(model="own.py", dataset="script", steps=None, epochs=None),
                    windows=[WindowRow(first_step=3, steps=2, seconds=1e-30, samples=16, samples_per_s=1.6e31)])
    run.summary = run.summary.replaced(samples_per_s=1.6e31)
    store.save(run)
    [back] = store.all()
    assert back.id == run.id and back.status == "failed" and not back.windows and not store.notices
    assert "could not be kept as measured" in back.error and "samples_per_s" in back.error


@pytest.mark.long
def test_a_script_run_by_python_keeps_what_the_history_can_read(tmp_path):
    path = tmp_path / "alone.py"
    path.write_text(MT.format(n=30, call="mt.step(loss, batch_size=8 if i < 20 else 2**62)"))
    env = {**os.environ, "PYTHONPATH": str(ROOT), "MPSSTUDIO_WARMUP": "2"}
    done = subprocess.run([sys.executable, str(path)], capture_output=True, text=True, timeout=120, env=env)
    assert done.returncode != 0 and "batch_size must be a whole number from 1 to 1,048,576" in done.stderr
    [run] = _history_reads_back_everything()
    assert run.status == "failed" and "batch_size must be a whole number" in run.error
    assert run.summary.measured_steps > 0  # what was measured before is kept


# ---------------------------------------------------------------- secrets

SECRET_SCRIPT = ("import argparse, torch\nfrom torch import nn\np = argparse.ArgumentParser()\n"
                 "p.add_argument('--api-key')\np.add_argument('--token')\np.add_argument('--lr', type=float)\n"
                 "a = p.parse_args()\nm = nn.Linear(4, 3)\nopt = torch.optim.SGD(m.parameters(), lr=a.lr)\n"
                 "for i in range(30):\n    loss = m(torch.randn(8, 4)).square().mean()\n"
                 "    opt.zero_grad(); loss.backward(); opt.step()\n")
KEY, TOKEN = "sk-proj-AbCdEfGhIjKlMnOpQrSt1234", "hf_AbCdEfGhIjKlMnOpQrSt"


def _exports(tmp_path, capsys, run_id: str) -> str:
    out = tmp_path / "history.json"
    assert cli.main(["history", "--json", str(out)]) == cli.EXIT_OK
    for fmt in ("md", "html"):
        assert cli.main(["report", run_id, "--format", fmt, "--out", str(tmp_path / f"r.{fmt}")]) == cli.EXIT_OK
    return out.read_text() + (tmp_path / "r.md").read_text() + (tmp_path / "r.html").read_text() + \
        capsys.readouterr().err


def test_script_arguments_that_look_like_secrets_are_stored_and_shared_redacted(tmp_path, capsys):
    code, run = tracked_run(tmp_path, SECRET_SCRIPT, "--", f"--api-key={KEY}", "--token", TOKEN, "--lr", "0.1")
    assert code == cli.EXIT_OK, run.error
    assert run.config.options["script_args"] == [f"--api-key={REDACTED}", "--token", REDACTED, "--lr", "0.1"]
    shared = _exports(tmp_path, capsys, run.id)
    assert "sk-" not in shared and "hf_" not in shared and "--lr" in shared
    code, run = tracked_run(tmp_path, SECRET_SCRIPT, "--keep-args", "--", f"--api-key={KEY}", "--lr", "0.1")
    assert code == cli.EXIT_OK and run.config.options["script_args"][0] == f"--api-key={KEY}"


def test_a_refused_secret_quoted_in_the_runs_error_is_redacted(tmp_path, capsys):
    code, run = tracked_run(tmp_path, SECRET_SCRIPT, "--", f"--api-key2={KEY}")
    said = [line for line in capsys.readouterr().err.splitlines() if line.startswith("mpsstudio:")]  # (the script's
    # own stderr is the test's here: the run is served in this process)
    assert code == cli.EXIT_RUN_FAILED and run.error.startswith("The script exited with code 2 (it wrote last: ")
    assert "unrecognized arguments: --api-key2=[redacted]" in run.error and "sk-" not in run.error
    assert said and not any("sk-" in line for line in said)
    assert "sk-" not in _exports(tmp_path, capsys, run.id)


def test_redaction_keeps_what_is_not_a_secret():
    assert redact_args(["--tokenizer", "gpt2", "--max_tokens", "512", "--pad_token", "<pad>", "--key-file", "k.pem",
                        "--lr", "-0.5", "OPENAI_API_KEY=abc", "--password", "--verbose", "AKIAABCDEFGHIJKLMNOP"]) == [
        "--tokenizer", "gpt2", "--max_tokens", "512", "--pad_token", "<pad>", "--key-file", "k.pem", "--lr", "-0.5",
        f"OPENAI_API_KEY={REDACTED}", "--password", "--verbose", REDACTED]
    prose = ("The tokenizer splits each sentence into tokens; a token is a word or a piece of one. Keep the key "
             "ideas short, and pass --lr 0.1 to train faster.")
    assert redact_text(prose) == prose
    assert redact_text("export HF_TOKEN=hf_abcdefghijklmnopqrstu and password: hunter2") == \
        f"export HF_TOKEN={REDACTED} and password: {REDACTED}"


ANY_ARGS_SCRIPT = ("import sys, torch\nfrom torch import nn\nprint('got', len(sys.argv) - 1, 'arguments')\n"
                   "m = nn.Linear(4, 3)\nopt = torch.optim.SGD(m.parameters(), lr=0.1)\nfor i in range(30):\n"
                   "    loss = m(torch.randn(8, 4)).square().mean()\n    opt.zero_grad(); loss.backward(); opt.step()\n")
PEM = "-----BEGIN RSA PRIVATE KEY-----\nMIIEpQIBAAKCAQEA3Tz2mr7SZiAMfQyuvBjM\n-----END RSA PRIVATE KEY-----"
# (the secret value, the argument(s) that carry it): every shape issue 57's probe found kept
SECRET_CORPUS = [
    ("-Zq81fTLNvKd0c3aPq", ["--hf-token", "-Zq81fTLNvKd0c3aPq"]),  # a value that starts with "-"
    ("MIIEpQIBAAKCAQEA3Tz2mr7SZiAMfQyuvBjM", ["--private-key", PEM]),
    ("s3cr3tDbPass", ["--db", "postgres://trainer:s3cr3tDbPass@db.internal:5432/runs"]),
    ("pgpw-771aa", ["PGPASSWORD=pgpw-771aa"]),
    ("mypass-882bb", ["MY_PASS=mypass-882bb"]),
    ("jsonkey-993cc", ['{"api_key": "jsonkey-993cc", "epochs": 3}']),
    ("bearer-tok-1234abcd", ["--header", "Authorization: Bearer bearer-tok-1234abcd"]),
    ("wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY", ["wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"]),
    ("npmtok-5566dd", ["--npm-authToken=npmtok-5566dd"]),
    ("cookie-7788ee", ["--cookie", "cookie-7788ee"]),
]
KEPT = ["--max_tokens", "512", "--pad_token", "<pad>", "--data", "/home/someone/data", "--key_dim", "64", "--lr",
        "-0.5", "3f786850e387550fdab836ed7e6dc881de23001b"]


def test_every_secret_shape_is_absent_from_the_history_exports_reports_logs_and_imports(tmp_path, capsys):
    args = [a for _, carried in SECRET_CORPUS for a in carried] + KEPT
    code, run = tracked_run(tmp_path, ANY_ARGS_SCRIPT, "--", *args)
    assert code == cli.EXIT_OK, run.error
    kept = run.config.options["script_args"]
    assert all(a in kept for a in KEPT), kept  # the ordinary arguments as given
    shared = _exports(tmp_path, capsys, run.id)
    from mpsstudio.engine.basics import paths

    logs = "".join(p.read_text(errors="replace") for p in paths.log_dir().rglob("*") if p.is_file())
    for secret, _ in SECRET_CORPUS:
        for where, text in (("history", " ".join(kept)), ("exports and reports", shared), ("logs", logs)):
            assert secret not in text, (secret, where)
    # a run imported from a file that carries a token is kept redacted, as a new run is
    doc = json.loads((tmp_path / "history.json").read_text())
    doc["runs"][0]["id"] = "imported-0001"
    doc["runs"][0]["config"]["options"] = {**doc["runs"][0]["config"]["options"], "keep_args": True,
                                           "script_args": ["--token", "imported-tok-42", "--lr", "0.1"]}
    (tmp_path / "in.json").write_text(json.dumps(doc))
    assert cli.main(["history", "--import", str(tmp_path / "in.json")]) == cli.EXIT_OK
    [imported] = [r for r in RunStore().all() if r.id == "imported-0001"]
    assert imported.config.options["script_args"] == ["--token", REDACTED, "--lr", "0.1"]


def test_the_script_dialog_remembers_the_arguments_redacted(qapp):
    from mpsstudio.gui.script_dialog import ScriptDialog

    dialog = ScriptDialog(["cpu"], {"path": "train.py", "args": f"--api-key {KEY} --lr 0.1"})
    assert dialog.remembered()["args"] == f"--api-key {REDACTED} --lr 0.1"
    dialog.keep_args.setChecked(True)
    assert dialog.remembered()["args"] == f"--api-key {KEY} --lr 0.1"


# ---------------------------------------------------------------- names scrubbed inside words

PROSE = ("MPS Studio measured the model on the CPU and on the GPU of this machine. The samples per second are the "
         "median of the measurement windows; the interval says how sure it is. Also see the hosting notes, the "
         "users guide and the alice in wonderland example; could not open cfg nor python3.")
NAMED = ["alicex-train.py", "alicex-data", "alicex_net.py", "Python environment: alicex-env", "AliceX2",
         "alicebox-7_node", "ALICEX", "/home/alicex/runs/alicex-run.json", "alicebox-7.corp.example",
         "ran on alicebox-7"]


def test_user_and_host_names_are_scrubbed_inside_words_and_prose_survives(tmp_path, monkeypatch, capsys):
    from mpsstudio.engine.report import Part, Report, scrub, scrubbed, secrets
    from mpsstudio.engine.report.render import to_html, to_markdown

    monkeypatch.setenv("HOME", "/home/alicex")
    monkeypatch.setattr("getpass.getuser", lambda: "alicex")
    hidden = secrets(["alicebox-7.corp.example"])
    assert scrub(PROSE, hidden) == PROSE
    for text in NAMED:
        shown = scrub(text, hidden)
        assert "alice" not in shown.lower(), (text, shown)
    assert scrub("alicex-train.py on alicex-data", hidden) == "user-train.py on user-data"
    assert scrub("alicebox-7_node", hidden) == "host_node" and scrub("ran on alicebox-7", hidden) == "ran on a host"
    report = Report("alicex_net.py on alicex-data", [Part("Run: alicex_net.py", PROSE, NAMED)],
                    hosts=["alicebox-7.corp.example"])
    for text in (to_markdown(scrubbed(report)), to_html(scrubbed(report))):
        assert "alice" not in text.lower().replace("alice in wonderland", "")
        assert "The samples per second are the median of the measurement windows" in text


# ---------------------------------------------------------------- tool files that contradict themselves


def _tune_with(change) -> dict:
    doc = json.loads((TOOL_RESULTS / "tune.json").read_text())
    change(doc["candidates"])
    return doc


@pytest.mark.parametrize("name, change, said", [
    ("two-current", lambda rows: rows[1].update(baseline=True), "mark 2 rows as the current settings on cpu"),
    ("low-above-high", lambda rows: rows[0].update(samples_per_s_low=1e9, samples_per_s_high=1.0),
     "samples_per_s_low is above its samples_per_s_high"),
    ("duplicate", lambda rows: rows.append(dict(rows[5])), "repeats the candidate"),
    ("measured-no-figure", lambda rows: rows[5].update(samples_per_s=None), "is missing from a measured candidate"),
    ("failed-with-speedup", lambda rows: rows[5].update(status="failed"), "has a throughput or a ratio though it is failed"),
])
def test_a_tune_file_whose_rows_contradict_each_other_is_refused(tmp_path, capsys, name, change, said):
    path = tmp_path / f"{name}.json"
    path.write_text(json.dumps(_tune_with(change)))
    assert cli.main(["history", "--import", str(path)]) == cli.EXIT_BAD_INPUT
    err = capsys.readouterr().err
    assert said in err and "Traceback" not in err and not RunStore().tools()


def test_the_hostile_corpus_is_refused_one_sentence_each(capsys):
    for path in sorted(HOSTILE.glob("*.json")):
        assert cli.main(["history", "--import", str(path)]) == cli.EXIT_BAD_INPUT, path.name
        err = capsys.readouterr().err
        assert err.startswith("mpsstudio: ") and err.count("\n") == 1 and "Traceback" not in err, (path.name, err)


def test_a_right_to_left_override_is_shown_not_obeyed_and_a_future_date_refused(tmp_path, capsys):
    doc = _tune_with(lambda rows: rows[0].update(label="fp32\u202e46 hctab"))
    (tmp_path / "rtl.json").write_text(json.dumps(doc))
    assert cli.main(["history", "--import", str(tmp_path / "rtl.json")]) == cli.EXIT_OK
    [tool] = RunStore().tools()
    label = tool.result["candidates"][0]["label"]
    assert "\u202e" not in label and label == "fp32?46 hctab"
    doc["created_at"], doc["id"] = "9999-12-31T00:00:00+00:00", "another-id"
    (tmp_path / "future.json").write_text(json.dumps(doc))
    assert cli.main(["history", "--import", str(tmp_path / "future.json")]) == cli.EXIT_BAD_INPUT
    assert "is dated 9999-12-31" in capsys.readouterr().err


def test_a_run_dated_in_the_future_is_refused(tmp_path, capsys):
    from mpsstudio.engine.history.runfiles import export_json

    run = RunResult(config=RunConfig(), created_at="9999-12-31T00:00:00+00:00")
    export_json([run], tmp_path / "runs.json")
    assert cli.main(["history", "--import", str(tmp_path / "runs.json")]) == cli.EXIT_BAD_INPUT
    assert "a date in the future" in capsys.readouterr().err and not RunStore().all()


# ---------------------------------------------------------------- another Python, contained

FAKES = {
    "flood": "#!/bin/sh\nwhile true; do echo not a python, not a python, not a python; done\n",
    "background": "#!/bin/sh\n(setsid sleep 1000{mark} >/dev/null 2>&1 &)\n(sleep 1001{mark} &)\nexit 0\n",
    "garbage": "#!/bin/sh\nhead -c 4000 /dev/urandom\nexit 0\n",
    "exits": "#!/bin/sh\nexit 0\n",
}


@pytest.mark.parametrize("name, said", [
    ("flood", "printed more than 256 KiB without answering MPS Studio's check, so it was ended"),
    ("background", "exited with code 0 without answering MPS Studio's check (it printed nothing)"),
    ("garbage", "bytes that are not text"),
    ("exits", "exited with code 0 without answering MPS Studio's check"),
])
def test_another_python_that_misbehaves_is_contained_and_said_as_itself(tmp_path, name, said):
    from mpsstudio.engine.basics.errors import UserError
    from mpsstudio.engine.process import interpreter

    mark = str(os.getpid())[-3:]
    fake = tmp_path / name
    fake.write_text(FAKES[name].format(mark=mark))
    fake.chmod(0o755)
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    started = time.monotonic()
    with pytest.raises(UserError) as caught:
        interpreter.check(str(fake))
    assert said in str(caught.value) and "model" not in str(caught.value)
    assert time.monotonic() - started < 10
    assert resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before < 200 * 1024  # KiB: not the flood's output
    left = subprocess.run(["pgrep", "-f", f"sleep 100[01]{mark}"], capture_output=True, text=True).stdout.split()
    assert left == []  # the setsid child and the one in its group were ended with the check


def test_a_run_process_of_another_python_that_exits_is_not_blamed_on_a_model():
    from mpsstudio.engine.process.handles import RunProcess

    proc = RunProcess.__new__(RunProcess)
    proc.exitcode, proc.python = 0, "/opt/envs/torch215/bin/python"
    said = proc.death_sentence()
    assert "the Python at /opt/envs/torch215/bin/python" in said and "os._exit" not in said


# ---------------------------------------------------------------- edges


def test_a_baseline_on_several_gpus_is_another_setup_for_a_bench_on_one(tmp_path, capsys):
    from mpsstudio.engine.history.runfiles import export_json

    base = RunResult(config=RunConfig(model="mlp", dataset="synthetic", device="cpu", gpus=2, steps=6, epochs=None,
                                      batch_size=4),
                     windows=[WindowRow(first_step=2, steps=3, seconds=0.1, samples=24, samples_per_s=240.0),
                              WindowRow(first_step=5, steps=3, seconds=0.1, samples=24, samples_per_s=250.0)])
    base.summary = base.summary.replaced(samples_per_s=245.0)
    export_json([base], tmp_path / "base.json")
    code = cli.main(["bench", "--model", "mlp", "--dataset", "synthetic", "--devices", "cpu", "--steps", "6",
                     "--batch-size", "4", "--no-inspect", "--baseline", str(tmp_path / "base.json")])
    assert code == cli.EXIT_BAD_INPUT and "is another setup" in capsys.readouterr().err and not RunStore().all()


def test_ctrl_c_keeps_the_run_as_cancelled_with_its_reason():
    from mpsstudio.engine import process
    from mpsstudio.engine.basics.events import Ended, Window

    ended = []

    def on_event(event):
        if isinstance(event, Ended):
            ended.append(event.result)
        elif isinstance(event, Window):
            raise KeyboardInterrupt
    with pytest.raises(KeyboardInterrupt):
        process.run_isolated([RunConfig(model="mlp", dataset="synthetic", steps=200, epochs=None, warmup_steps=1,
                                        batch_size=8)], on_event=on_event)
    [run] = ended
    assert run.status == "cancelled" and run.error == "Stopped with Ctrl-C; what was measured until then is kept."


def test_a_sparse_operation_on_the_cpu_is_never_blamed_on_mps():
    from mpsstudio.engine.run.failures import explain_failure

    exc = NotImplementedError("Could not run 'aten::addmm' with arguments from the 'SparseCPU' backend. 'aten::addmm' "
                              "is only available for these backends: [CPU, CUDA, MPS, SparseCPU, SparseMPS].")
    said = explain_failure(exc, RunConfig(device="cpu"))
    assert "fallback" not in said and said.startswith("The run stopped with an error: NotImplementedError")
    assert "fallback" in explain_failure(NotImplementedError("The operator 'aten::x' is not currently implemented "
                                                             "for the MPS device."), RunConfig(device="mps"))


def test_a_thousand_gpus_is_said_as_a_count_not_as_a_word(capsys):
    code = cli.main(["bench", "--model", "mlp", "--dataset", "synthetic", "--devices", "cpu", "--gpus", "1000"])
    assert code == cli.EXIT_BAD_INPUT
    assert "The number of GPUs must be a whole number from 1 to 64, not 1000." in capsys.readouterr().err


def test_an_import_waits_for_a_held_history_and_says_busy_when_it_stays_held(tmp_path, capsys, monkeypatch):
    from mpsstudio.cli import history as history_cli
    from mpsstudio.engine.history import schema
    from mpsstudio.engine.history.runfiles import export_json

    monkeypatch.setattr(schema, "LOCK_WAIT_S", 0.2)
    monkeypatch.setattr(history_cli, "IMPORT_WAIT_S", 1.0)
    export_json([RunResult(config=RunConfig())], tmp_path / "runs.json")
    path = RunStore().path
    held = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    held.execute("BEGIN EXCLUSIVE")
    try:
        assert cli.main(["history", "--import", str(tmp_path / "runs.json")]) == cli.EXIT_BUSY
        err = capsys.readouterr().err
        assert "waiting up to 1 s" in err and "in use by another program" in err
        threading.Timer(0.5, held.rollback).start()  # released while the import waits: it goes through
        assert cli.main(["history", "--import", str(tmp_path / "runs.json")]) == cli.EXIT_OK
    finally:
        held.close()
    assert len(RunStore().all()) == 1


def test_torchrun_killed_mid_run_is_said_never_an_empty_reason():
    """kill -9 of torchrun during --gpus 2: its ranks go with it; the run keeps rank 0's windows and says why."""
    import signal as signals

    from mpsstudio.engine.basics.events import Started, Window
    from mpsstudio.engine.run import distributed

    config = RunConfig(model="mlp", dataset="synthetic", device="cpu", gpus=2, steps=50, epochs=None, batch_size=4)
    launch = distributed._Launch(config, lambda e: None, lambda: False, None)
    launch.proc = subprocess.Popen(["sleep", "30"])
    launch.proc.send_signal(signals.SIGKILL)
    launch.proc.wait()
    launch.recorder.add(Started(run_id="r1", config=config.to_dict(), env={"os": "Linux"}, device={}, dataset="d",
                                parameters=1, total_steps=52, warmup_steps=2))
    launch.recorder.add(Window(index=0, first_step=3, losses=[1.0], seconds=0.1, samples=8, samples_per_s=80.0,
                               data_wait_s=0.0, memory=0, memory_detail={}, steps_done=3, total_steps=52,
                               elapsed_s=0.2, eta_s=None))
    result = launch._result()
    assert result.status == "failed" and result.windows
    assert result.error == ("torchrun, which started the 2 ranks, was killed by signal 9 (SIGKILL) during the run; the "
                            "ranks were ended with it and what rank 0 measured until then is kept.")


# what a probe of the redaction found hidden or kept wrongly (ML scripts' real arguments)
ORDINARY = ["--text_key", "text", "--label_key", "label", "--metric_key", "eval_loss", "--placeholder_token",
            "<cat-toy>", "--initializer_token", "toy", "--stop_token", "</s>", "--eot_token", "<|eot_id|>", "--pass", "2",
            "--eval-pass", "1", "--prompt", "Explain basic arithmetic to a child", "--task", "token classification",
            "/data/ImageNet/train/n01440764/n01440764_10026.JPEG", "runs/sk-experiment-2024-01-01",
            "xoxo-gossip-girl-model", "--cookies_dir", "x", "--pat", "3", "--num_key_value_heads", "8",
            "--token_budget", "100", "meta-llama/Llama-3-8B", "https://example.org/data/train.jsonl"]
SECRETS = [("redis://:mypassword@localhost:6379/0", "mypassword"), ("https://user:p@ss@host/", "p@ss"),
           ('{"credentials": {"token": "abc123"}}', "abc123"), ('{"headers":{"Authorization":"abc123def456"}}',
                                                                 "abc123def456"),
           ("{'api_key': 'abc123def'}", "abc123def"), ("sk_live_abcdefghijklmnop1234", "abcdefghijklmnop1234"),
           ("https://hooks.slack.com/services/T0000/B0000/XXXXXXXXXXXXXXXX", "XXXXXXXXXXXXXXXX"),
           ("ya29.a0AfH6SMBabcdefghijklmnop", "a0AfH6SMB"), ("password = hunter2", "hunter2")]


def test_the_redaction_corpus_keeps_ordinary_arguments_and_hides_every_secret():
    assert redact_args(ORDINARY) == ORDINARY
    for text, secret in SECRETS:
        assert secret not in " ".join(redact_args([text])), text
        assert secret not in redact_text(text), text
    assert redact_text('{"credentials": {"token": "abc123"}}') == '{"credentials": {"token": "[redacted]"}}'  # whole
