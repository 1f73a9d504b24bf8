"""The window with runs in their own processes: misbehaving model files never freeze or kill it, Stop and
close work within their limits, and a user's model file runs only with the user's say-so, never in here."""

from __future__ import annotations

import time

import pytest

pytest.importorskip("PySide6")

from PySide6.QtCore import QTimer

from mpsstudio.engine import process
from mpsstudio.engine.basics.config import RunConfig
from mpsstudio.engine.history.store import RunStore
from mpsstudio.gui.window import MainWindow
from mpsstudio.gui.setup.model_files import NOT_CHECKED, ModelFileGuard
from mpsstudio.gui.jobs import running_threads
from tests.support.gui import open_window
from tests.support.models import bad_model


pytestmark = pytest.mark.usefixtures("no_leftovers")


@pytest.fixture
def asked(monkeypatch):
    """Consent answers: every question is recorded; the answer is `asked.answer` (Yes by default)."""
    class Asked(list):
        answer = True
    questions = Asked()

    def ask(self, path):
        questions.append(path)
        return questions.answer
    monkeypatch.setattr(ModelFileGuard, "ask", ask)
    return questions


@pytest.fixture
def window(qtbot, run_pids, asked):
    w = open_window(qtbot, keep_spare=False)
    yield w
    w.close()


class Heartbeat:
    """A timer in the GUI thread: the longest gap between its ticks shows whether the window ever froze."""

    def __init__(self):
        self.ticks: list[float] = []
        self.timer = QTimer()
        self.timer.timeout.connect(self.tick)
        self.timer.start(20)

    def tick(self) -> None:
        self.ticks.append(time.monotonic())

    def stop(self) -> float:
        self.timer.stop()
        gaps = [b - a for a, b in zip(self.ticks, self.ticks[1:])]
        return max(gaps) if gaps else float("inf")


def config(model: str) -> RunConfig:
    return RunConfig(model=model, dataset="synthetic", device="cpu", batch_size=8, steps=3, epochs=None,
                     warmup_steps=1)


def run(qtbot, w, cfg, stop_after_start: bool = False) -> float:
    beat = Heartbeat()
    w.setup.apply_config(cfg)
    w.start_run()
    assert w.state.run_job is not None
    if stop_after_start:
        qtbot.wait(3000)  # the run's process is importing torch, or the model file
        w.stop_run()
    qtbot.waitUntil(lambda: w.state.run_job is None, timeout=120_000)
    return beat.stop()


@pytest.mark.parametrize("name, sentence", [
    ("abort", "cpu: The run's process was killed by signal 6 (abort)"),
    ("os_exit", "cpu: The run's process exited with code 0 before its work was done"),
])
def test_a_crashing_model_is_a_failed_row_and_the_window_lives_on(qtbot, window, tmp_path, name, sentence):
    gap = run(qtbot, window, config(bad_model(tmp_path, name)))
    [result] = window.state.run_ended
    assert result.status == "failed"
    assert window.banner.text().startswith(sentence)
    assert [r.id for r in RunStore(window.store.path).all()] == [result.id]
    assert window.menus.run_action.isEnabled()
    assert gap < 5  # the GUI thread never stalled (a frozen window would show a gap as long as the run)


def test_stop_ends_a_model_stuck_in_forward(qtbot, window, tmp_path):
    window.setup.apply_config(config(bad_model(tmp_path, "loop_in_forward")))
    beat = Heartbeat()
    window.start_run()
    qtbot.waitUntil(lambda: window.run_label.text() == "cpu", timeout=60_000)  # Started: the model is built
    stopped = time.monotonic()
    window.stop_run()
    qtbot.waitUntil(lambda: window.state.run_job is None, timeout=30_000)
    assert time.monotonic() - stopped < process.STOP_GRACE_S + 5
    assert beat.stop() < 5
    [result] = window.state.run_ended
    assert result.status == "cancelled"
    assert RunStore(window.store.path).all()[0].status == "cancelled"


def test_stop_during_a_hung_import_keeps_a_cancelled_run(qtbot, window, tmp_path):
    run(qtbot, window, config(bad_model(tmp_path, "loop_in_body")), stop_after_start=True)
    [result] = window.state.run_ended
    assert result.status == "cancelled"


def test_closing_while_a_model_sleeps_in_init_takes_under_two_seconds(qtbot, run_pids, asked, tmp_path):
    w = open_window(qtbot, keep_spare=False)
    w.setup.apply_config(config(bad_model(tmp_path, "sleep_in_init")))
    w.start_run()
    qtbot.waitUntil(lambda: len(run_pids) == 1, timeout=10_000)
    qtbot.wait(1500)  # the run's process is importing torch or sitting in the model's __init__
    store_path = w.store.path
    started = time.monotonic()
    w.close()
    assert time.monotonic() - started < 2.0
    assert running_threads() == []
    [kept] = RunStore(store_path).all()
    assert kept.status == "cancelled"


# -- a user's model file: consent, and never in the window's process ---------------------------------------------

def marker_model(tmp_path, name="mine.py"):
    """A model file that records, on import, the pid of the process that ran it."""
    marks = tmp_path / f"{name}.pids"
    path = tmp_path / name
    path.write_text("import os, torch\n"
                    f"open({str(marks)!r}, 'a').write(f'{{os.getpid()}}\\n')\n"
                    "def build_model(num_classes, input_shape):\n"
                    "    return torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(3 * 32 * 32, num_classes))\n")
    return str(path), marks


def test_restoring_a_setup_with_a_model_file_runs_nothing(qtbot, window, tmp_path, asked):
    path, marks = marker_model(tmp_path)
    window.setup.apply_config(config(path))
    assert NOT_CHECKED in window.setup.summary_text()
    assert window.setup.models.check_button.isVisible()
    qtbot.wait(200)
    assert not marks.exists() and asked == []


def test_a_model_file_is_checked_in_a_child_after_consent(qtbot, window, tmp_path, asked, monkeypatch, run_pids):
    import os

    path, marks = marker_model(tmp_path)
    window.setup.apply_config(config(path))
    asked.answer = False
    assert window.setup.check_model_file() is False
    assert asked == [path] and not marks.exists()
    window.start_run()  # asked again, declined again: no run
    assert window.state.run_job is None and asked == [path, path] and not marks.exists()
    asked.answer = True
    assert window.setup.check_model_file() is True
    qtbot.waitUntil(lambda: "30,730 parameters" in window.setup.summary_text(), timeout=60_000)
    [pid] = marks.read_text().split()
    assert int(pid) != os.getpid() and int(pid) == run_pids[-1]  # built in a child, never in the window
    window.start_run()  # the same content: not asked again
    assert asked == [path, path, path]
    qtbot.waitUntil(lambda: window.state.run_job is None, timeout=120_000)
    assert window.state.run_ended[0].status == "finished"
    with open(path, "a") as f:
        f.write("# changed\n")
    assert window.setup.confirm_model_file() is True
    assert asked == [path, path, path, path]  # new content: asked again


def test_the_window_uses_its_spare_process_for_the_next_run(qtbot, run_pids, asked):
    w = MainWindow(keep_spare=True)
    qtbot.addWidget(w)
    w.show()
    w.start_loading()
    qtbot.waitUntil(lambda: w.state.catalog is not None and len(run_pids) == 1, timeout=120_000)
    spare = run_pids[0]
    run(qtbot, w, config("mlp"))
    assert w.state.run_ended[0].status == "finished"
    assert run_pids[:2] == [spare, run_pids[1]] and len(run_pids) == 2  # the run used it; a new spare waits
    w.close()
