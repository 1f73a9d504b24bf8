"""Every run in its own process: model files that misbehave on purpose, through the engine, the CLI and the window.

Each case must end in one recorded run with one sentence, earlier runs intact, and no process left behind.
"""

from __future__ import annotations

import os
import signal
import time

import psutil
import pytest

from mpsstudio import cli
from mpsstudio.engine import process
from mpsstudio.engine.basics.config import RunConfig
from mpsstudio.engine.history.store import RunStore

from tests.support.processes import process_group
from tests.support.models import bad_model


CRASH_SENTENCES = {
    "abort": "The run's process was killed by signal 6 (abort); PyTorch's Metal backend aborts on some errors",
    "segfault": "The run's process was killed by signal 11 (segmentation fault); native code",
    "sys_exit": "The model's code called sys.exit(3) during the run; a model file must not exit the program.",
    "os_exit": "The run's process exited with code 0 before its work was done (a model that calls os._exit",
    "killed": "The run's process was killed by signal 9 (kill); the system ends processes this way when memory",
    "memory": "The run ran out of memory on cpu (Python could not allocate more at batch size 8)",
    "keyboard_interrupt": "The model's code raised KeyboardInterrupt during the run; a model file must not",
    "base_exception": "The model's code raised Weird, which is meant to end a program, during the run",
}
HANGS = ("loop_in_body", "loop_in_forward", "sleep_in_init")


def bench(model: str, *extra: str) -> int:
    return cli.main(["bench", "--model", model, "--dataset", "synthetic", "--batch-size", "8", "--steps", "3",
                     "--warmup", "1", *extra])


# -- the CLI ---------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("name", list(CRASH_SENTENCES))
def test_a_model_that_crashes_its_process_is_a_failed_run_in_the_cli(name, tmp_path, capsys, run_pids):
    code = bench(bad_model(tmp_path, name))
    err = capsys.readouterr().err
    assert code == 1
    [failed] = RunStore().all()
    assert failed.status == "failed" and failed.error.startswith(CRASH_SENTENCES[name]), failed.error
    assert "\n" not in failed.error
    assert f"the run on cpu failed: {failed.error}" in err


def test_earlier_runs_stay_intact_when_a_run_crashes(tmp_path, run_pids):
    assert bench("mlp") == 0
    [earlier] = RunStore().all()
    assert bench(bad_model(tmp_path, "segfault")) == 1
    runs = {r.id: r for r in RunStore().all()}
    assert len(runs) == 2 and runs[earlier.id].to_dict() == earlier.to_dict()


@pytest.mark.parametrize("name", HANGS)
def test_a_model_that_hangs_is_ended_by_the_cli_timeout(name, tmp_path, capsys, run_pids):
    started = time.monotonic()
    code = bench(bad_model(tmp_path, name), "--timeout", "1")
    assert code == 1
    [run] = RunStore().all()
    assert run.status == "failed"
    assert run.error == ("The run did not end within the time limit of 1.00 s, so it was stopped; what it "
                         "measured until then is kept.")
    assert time.monotonic() - started < 60  # not the 600 s the model would sleep


def test_a_crash_log_keeps_the_last_lines_of_the_dead_process(tmp_path, run_pids):
    from mpsstudio.engine.basics.paths import log_file

    assert bench(bad_model(tmp_path, "abort"), "--no-save") == 1
    log = log_file().read_text()
    assert "killed by signal 6 (abort)" in log
    assert "Fatal Python error: Aborted" in log and "abort.py" in log  # faulthandler's traceback from the child


def test_the_next_device_still_runs_after_a_crash(tmp_path, run_pids):
    """A comparison goes on after one run's process dies (here two configs, as two devices would be)."""
    crash = RunConfig(model=bad_model(tmp_path, "segfault"), dataset="synthetic", batch_size=8, steps=3,
                      epochs=None, warmup_steps=1)
    fine = RunConfig(dataset="synthetic", batch_size=8, steps=3, epochs=None, warmup_steps=1)
    ended = []
    results = process.run_isolated([crash, fine], on_event=lambda e: ended.append(e)
                                     if type(e).__name__ == "Ended" else None)
    assert [r.status for r in results] == ["failed", "finished"]
    assert [e.result.id for e in ended] == [r.id for r in results]
    assert results[1].summary.windows > 0


def test_stop_ends_a_hung_run_and_keeps_it_as_cancelled(tmp_path, run_pids):
    """Stop asks first; a run stuck in a model's forward is ended after the grace time, with its windows kept."""
    cfg = RunConfig(model=bad_model(tmp_path, "loop_in_forward"), dataset="synthetic", batch_size=8, steps=3,
                    epochs=None, warmup_steps=1)
    events = []
    asked = []

    def stop() -> bool:
        if any(type(e).__name__ == "Started" for e in events) and not asked:
            asked.append(time.monotonic())
        return bool(asked)
    [result] = process.run_isolated([cfg], on_event=events.append, should_stop=stop, grace_s=0.5)
    assert result.status == "cancelled" and result.error == ""
    assert time.monotonic() - asked[0] < 30
    assert events[0].run_id == result.id  # the same run the child started


def test_dataloader_workers_end_with_their_run(tmp_path, run_pids):
    """A run with DataLoader worker processes that is ended leaves none of them behind (its process group)."""
    folder = tmp_path / "pets"
    from PIL import Image

    for c in ("cats", "dogs"):
        (folder / c).mkdir(parents=True)
        for i in range(40):
            Image.new("RGB", (16, 16), (6 * i, 100, 200)).save(folder / c / f"{i}.png")
    cfg = RunConfig(model=bad_model(tmp_path, "loop_in_forward"), dataset=str(folder), batch_size=4, steps=3,
                    epochs=None, warmup_steps=1, workers=2, image_size=16)
    events = []
    workers_seen = []

    def stop() -> bool:
        if events and not workers_seen:
            group = run_pids[-1]
            members = [p.pid for p in psutil.process_iter(["pid"]) if process_group(p.pid) == group]
            if len(members) >= 3:  # the run's process and its two workers
                workers_seen.append(members)
        return bool(workers_seen)
    [result] = process.run_isolated([cfg], on_event=events.append, should_stop=stop, grace_s=0.2, timeout_s=60)
    assert workers_seen, "the DataLoader workers never started"
    assert result.status == "cancelled"


@pytest.mark.long
@pytest.mark.spawn
def test_the_mps_fallback_setting_reaches_the_run_process_before_torch(tmp_path, run_pids):
    probe = tmp_path / "env.py"
    seen = tmp_path / "seen.txt"
    probe.write_text("import os, torch\n"
                     f"open({str(seen)!r}, 'a').write(os.environ.get('PYTORCH_ENABLE_MPS_FALLBACK', '-'))\n"
                     "def build_model(num_classes, input_shape):\n"
                     "    return torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(3 * 32 * 32, num_classes))\n")
    assert bench(str(probe), "--no-mps-fallback") == 0
    assert bench(str(probe)) == 0
    assert seen.read_text() == "01"
    assert [r.config.mps_fallback for r in sorted(RunStore().all(), key=lambda r: r.created_at)] == [False, True]


def test_a_spare_process_is_used_for_the_next_run(run_pids):
    spare = process.Spare(mps_fallback=True)
    spare.fill()
    first = run_pids[-1]
    try:
        cfg = RunConfig(dataset="synthetic", batch_size=8, steps=3, epochs=None, warmup_steps=1)
        [result] = process.run_isolated([cfg], spare=spare)
        assert result.status == "finished" and run_pids == [first]  # no other process was started
        assert spare.take(mps_fallback=False) is None  # a spare started with other settings is not reused
    finally:
        spare.close()


def test_a_user_model_is_probed_in_a_child_with_a_time_limit(tmp_path, run_pids):
    from mpsstudio.engine.basics.errors import UserError
    from mpsstudio.engine.basics.spec import DataSpec

    spec = DataSpec("image", 10, channels=3, height=32, width=32)
    good = tmp_path / "good.py"
    good.write_text("import os, torch\nPID = os.getpid()\n"
                    "def build_model(num_classes, input_shape):\n"
                    "    return torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(3 * 32 * 32, num_classes))\n")
    probe = process.probe_model(str(good), spec)
    assert probe.parameters == 3 * 32 * 32 * 10 + 10 and probe.output_shape == (2, 10)
    with pytest.raises(UserError, match=r"sleep_in_init.py took longer than 1.00 s to build and check"):
        process.probe_model(bad_model(tmp_path, "sleep_in_init"), spec, timeout_s=1)
    with pytest.raises(UserError, match=r"The process checking os_exit.py exited with code 0"):
        process.probe_model(bad_model(tmp_path, "os_exit"), spec)


def test_ending_a_process_twice_or_after_it_died_is_harmless(run_pids):
    proc = process.RunProcess()
    os.kill(proc.pid, signal.SIGKILL)
    proc.end()
    proc.end()
    assert proc.exitcode == -signal.SIGKILL
    proc.discard_output()


def test_a_process_ended_right_after_its_start_is_gone(run_pids):
    """Ended before it could make itself a process group leader: it must still be ended, and at once."""
    proc = process.RunProcess()
    started = time.monotonic()
    proc.end()
    assert proc.exitcode is not None
    assert time.monotonic() - started < 4  # not the 5 s join of a process nobody signalled
    proc.discard_output()


GARBAGE = {
    "pickle_noise": "conn.send_bytes(b'\\x80\\x05 not a pickle')",
    "wrong_message": "conn.send('hello')",
    "forged_rejection": "conn.send(('rejected', 'everything is fine, nothing to see'))",
    "code_in_a_pickle": "conn.send(('event', type('Evil', (), {'__reduce__': lambda s: (os._exit, (0,))})()))",
    "fake_event": "conn.send(('event', 'not an event'))",
    "bad_window": "conn.send(('event', __import__('mpsstudio.engine.basics.events', fromlist=['Window']).Window("
                  "0, 1, ['x'], 1.0, 8, 8.0, 0.0, 0, {}, 1, 2, 1.0, None)))",
}


@pytest.mark.parametrize("name", list(GARBAGE))
def test_a_model_that_writes_to_the_pipe_cannot_confuse_the_parent(name, tmp_path, capsys, run_pids):
    """The child's messages are untrusted like an imported file: garbage ends the run, never the CLI."""
    path = tmp_path / f"{name}.py"
    path.write_text("import gc, multiprocessing.connection, os, torch\n"
                    "def build_model(num_classes, input_shape):\n"
                    "    gc.unfreeze()  # the run process froze what it had when it started (a model can undo that)\n"
                    "    [conn] = [c for c in gc.get_objects() if isinstance(c, multiprocessing.connection.Connection)\n"
                    "              and not c.closed]\n"
                    f"    {GARBAGE[name]}\n"
                    "    return torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(3 * 32 * 32, num_classes))\n")
    assert bench(str(path)) == 1
    [run] = RunStore().all()
    assert run.status == "failed"
    assert run.error.startswith("The run's process sent ") and "so it was ended" in run.error, run.error
    assert "Traceback" not in capsys.readouterr().err
