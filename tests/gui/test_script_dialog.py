"""Run Your Training Script… in the window: the dialog (checked by the engine, saying why it stays open), consent
to run the script's code, and runs on the checked devices through the one run path, drawn like any run."""

from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip("pytestqt")

from mpsstudio.engine.run.script.runner import script_config
from mpsstudio.gui.script_dialog import ScriptDialog, UNTIL_END
from mpsstudio.gui.setup.model_files import ModelFileGuard
from mpsstudio.gui.window import MainWindow
from tests.support.paths import ROOT

pytestmark = pytest.mark.usefixtures("no_leftovers")

SCRIPT = ROOT / "examples" / "train_script.py"


@pytest.fixture
def dialog(qtbot):
    d = ScriptDialog(["cpu", "mps"])
    qtbot.addWidget(d)
    return d


def test_the_dialog_needs_a_script_and_says_what_is_wrong(dialog, tmp_path):
    assert not dialog.run_button.isEnabled()
    assert dialog.steps_spin.text() == UNTIL_END
    cases = {
        str(tmp_path / "missing.py"): "was not found",
        str(tmp_path): "not a .py script",
        str(_write(tmp_path / "notes.txt", "x")): "is not a .py file",
    }
    for path, words in cases.items():
        dialog.path_edit.setText(path)
        assert dialog.run_button.isEnabled()
        dialog.accept()
        assert words in dialog.problem.text() and dialog.config is None and dialog.result() == 0
    dialog.path_edit.setText(str(SCRIPT))
    assert dialog.problem.text() == ""  # a change clears the old sentence
    dialog.args_edit.setText('--name "unclosed')
    dialog.accept()
    assert "close the quotes" in dialog.problem.text() and dialog.config is None


def test_the_dialog_makes_the_engines_config(dialog):
    dialog.path_edit.setText(str(SCRIPT))
    dialog.args_edit.setText('--epochs 2 --note "two words" --on {device}')
    dialog.steps_spin.setValue(30)
    dialog.warmup_spin.setValue(3)
    dialog.batch_spin.setValue(20)
    dialog.device_edits["cpu"].setText('--threads 2 --tag "a b"')
    dialog.accept()
    assert dialog.config == script_config(str(SCRIPT), ["--epochs", "2", "--note", "two words", "--on", "{device}"],
                                          30, 3, batch_size=20, device_args={"cpu": ["--threads", "2", "--tag", "a b"]})
    assert dialog.values() == {"path": str(SCRIPT), "args": '--epochs 2 --note "two words" --on {device}',
                               "steps": 30, "warmup": 3, "batch": 20, "keep_args": False,
                               "device_args": {"cpu": '--threads 2 --tag "a b"'}}
    again = ScriptDialog(["cpu"], dialog.values())
    assert again.values() == dialog.values()
    assert ScriptDialog(["cpu"], {"steps": "many", "warmup": -4, "path": None}).values()["steps"] == 0


@pytest.fixture
def window(qtbot):
    w = MainWindow(keep_spare=False)
    qtbot.addWidget(w)
    w.show()
    w.start_loading()
    qtbot.waitUntil(lambda: w.state.catalog is not None, timeout=120_000)
    yield w
    w.close()


@pytest.mark.processes  # a script runs as in the app: in a run process of its own (its hooks are process-wide)
def test_a_script_runs_on_the_checked_devices_once_allowed(qtbot, window, monkeypatch):
    asked = []
    monkeypatch.setattr(ModelFileGuard, "ask_script", lambda self, path: asked.append(path) or True)
    monkeypatch.setattr(window, "ask_script", lambda devices: script_config(str(SCRIPT), ["--epochs", "50"], 25, 2))
    assert window.menus.script_action.isEnabled()
    window.run_script_dialog()
    assert window.state.run_job is not None and not window.menus.script_action.isEnabled()
    qtbot.waitUntil(lambda: window.state.run_job is None, timeout=120_000)
    [result] = window.state.run_ended
    assert result.status == "finished", result.error
    assert result.config.dataset == "script" and result.config.device == "cpu"
    assert result.summary.measured_steps == 25 and len(result.losses) == 27
    assert asked == [str(SCRIPT)]
    assert [r.id for r in window.results.results()] == [result.id]
    assert window.progress.format().startswith("step 27 / 27")  # warm-up included, as for any run
    assert window.menus.script_action.isEnabled()


@pytest.mark.processes
def test_a_script_that_runs_until_it_ends_counts_its_steps(qtbot, window, monkeypatch, tmp_path):
    path = _write(tmp_path / "short.py", "import torch\nm = torch.nn.Linear(4, 2)\no = torch.optim.SGD(m.parameters(), 0.1)\n"
                  "for _ in range(30):\n    o.zero_grad(); m(torch.randn(8, 4)).sum().backward(); o.step()\n")
    monkeypatch.setattr(ModelFileGuard, "ask_script", lambda self, p: True)
    monkeypatch.setattr(window, "ask_script", lambda devices: script_config(str(path), [], None, 2))
    window.run_script_dialog()
    qtbot.waitUntil(lambda: window.progress.format().startswith("step "), timeout=60_000)
    assert window.progress.maximum() == 0  # busy: no end known
    qtbot.waitUntil(lambda: window.state.run_job is None, timeout=120_000)
    [result] = window.state.run_ended
    assert result.status == "finished", result.error
    assert window.progress.format().startswith("step ") and "/" not in window.progress.format()


def test_a_script_not_allowed_does_not_run(qtbot, window, monkeypatch):
    monkeypatch.setattr(ModelFileGuard, "ask_script", lambda self, path: False)
    monkeypatch.setattr(window, "ask_script", lambda devices: script_config(str(SCRIPT), [], 5, 1))
    window.run_script_dialog()
    assert window.state.run_job is None and window.state.run_ended == ()
    assert "only if you allow it" in window.statusBar().currentMessage()
    monkeypatch.setattr(window, "ask_script", lambda devices: None)  # cancelled: nothing at all
    window.run_script_dialog()
    assert window.state.run_job is None


def _write(path: Path, text: str) -> Path:
    path.write_text(text)
    return path


def test_the_model_picker_and_the_file_menu_open_the_script_dialog(window, monkeypatch):
    from mpsstudio.gui.setup.rules import RUN_SCRIPT

    asked = []
    monkeypatch.setattr(window, "ask_script", lambda devices: asked.append(devices))
    combo = window.setup.models.combo
    before = combo.currentData()
    combo.setCurrentIndex(combo.findData(RUN_SCRIPT))
    assert asked == [["cpu"]] and combo.currentData() == before  # the model stays what it was
    assert window.menus.file_script_action.isEnabled()
    window.menus.file_script_action.trigger()
    assert asked == [["cpu"], ["cpu"]] and window.state.run_job is None
