"""Containment: whatever a model file starts ends with its run, and only that (issue 26).

Model files written here start processes that outlive their parents on purpose: a helper in a new session
(subprocess with start_new_session, as a tokenizer server is started) and a daemon made by a double fork with
setsid. Each test asserts the process table, the history and the exit status.
"""

from __future__ import annotations

import subprocess
import sys
import time

import psutil
import pytest

from mpsstudio import cli
from mpsstudio.engine.history.store import RunStore

pytestmark = pytest.mark.processes

LEAVER = '''import os, subprocess, sys, time
import torch
PIDS = {pids!r}
class M(torch.nn.Module):
    def __init__(self, n, shape):
        super().__init__()
        self.l = torch.nn.Linear(shape[0] * shape[1] * shape[2], n)
    def forward(self, x):
        if not os.path.exists(PIDS):  # once, at the first step
            helper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"], start_new_session=True)
            r, w = os.pipe()
            if os.fork() == 0:  # a daemon: fork, setsid, fork again, the middle one exits
                os.setsid()
                if os.fork() == 0:
                    os.write(w, str(os.getpid()).encode())
                    time.sleep(120)
                os._exit(0)
            daemon = int(os.read(r, 32))
            with open(PIDS, "w") as f:
                f.write(f"{{helper.pid}} {{daemon}}")
        return self.l(x.flatten(1))
def build_model(num_classes, input_shape):
    return M(num_classes, input_shape)
'''


def _alive(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


def test_what_a_model_starts_ends_with_its_run_and_the_run_says_so(tmp_path, capsys, run_pids):
    pids_file = tmp_path / "pids"
    model = tmp_path / "leaver.py"
    model.write_text(LEAVER.format(pids=str(pids_file)))
    bystander = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])  # not the run's
    try:
        code = cli.main(["bench", "--model", str(model), "--dataset", "synthetic", "--batch-size", "8", "--steps",
                         "3", "--warmup", "1", "--devices", "cpu", "--no-inspect"])
        err = capsys.readouterr().err
        assert code == 0, err
        helper, daemon = map(int, pids_file.read_text().split())
        deadline = time.monotonic() + 5
        while (_alive(helper) or _alive(daemon)) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not _alive(helper) and not _alive(daemon)
        assert bystander.poll() is None  # a process that is not the run's is never touched
        [run] = RunStore().all()
        sentence = run.summary["leftover_processes"]
        assert sentence.startswith("The model left 2 processes running (python")
        assert f"pid {helper}" in sentence and f"pid {daemon}" in sentence and sentence.endswith("they were ended.")
        assert f"cpu: {sentence}" in err
    finally:
        bystander.kill()
        bystander.wait()


def test_a_run_that_leaves_nothing_says_nothing(run_pids):
    assert cli.main(["bench", "--model", "mlp", "--dataset", "synthetic", "--batch-size", "8", "--steps", "3",
                     "--warmup", "1", "--devices", "cpu", "--no-inspect"]) == 0
    [run] = RunStore().all()
    assert "leftover_processes" not in run.summary


def test_the_window_closes_on_sigterm_keeping_what_it_has(tmp_path):
    """A logout's or `kill`'s SIGTERM: the window closes as Quit does (a run in progress stopped and kept, the
    settings saved) and the app exits 143, instead of dying with its run unsaved."""
    import signal

    from .test_user_folders import Sandbox

    box = Sandbox(tmp_path)
    proc = box.start()
    time.sleep(2.0)  # painted and idle (startup ~0.5 s here)
    proc.send_signal(signal.SIGTERM)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 143, err[-2000:]
    assert (box.folders["config"] / "window.ini").is_file()  # closeEvent ran: the window's settings were saved
