"""Preferences (a JSON file in the config folder, ⌘,): what they hold, what a damaged file gives, the window that
edits them, and the live plots' refresh they choose (10 Hz where drawing is free, every 2 s while a CPU run uses
every core: docs/benchmarks.md)."""

from __future__ import annotations

import json

import pytest

pytest.importorskip("PySide6")

from mpsstudio.engine.basics.config import RunConfig
from mpsstudio.engine.basics.request import RunRequest
from mpsstudio.engine.basics.paths import config_dir
from mpsstudio.gui.plots import BUSY_REDRAW_INTERVAL_MS, REDRAW_INTERVAL_MS, interval_for
from mpsstudio.gui.preferences import Preferences, PreferencesDialog


@pytest.mark.parametrize("refresh, device, threads, cores, ms", [
    ("auto", "cuda:0", 16, 16, REDRAW_INTERVAL_MS),  # a GPU run: the host has cores to spare
    ("auto", "mps", 10, 10, REDRAW_INTERVAL_MS),
    ("auto", "cpu", 1, 2, REDRAW_INTERVAL_MS),  # a core left free
    ("auto", "cpu", 2, 2, BUSY_REDRAW_INTERVAL_MS),  # every core: drawing would take time from the run
    ("auto", "cpu", None, 2, REDRAW_INTERVAL_MS),  # threads unknown (a run that failed to say)
    ("10", "cpu", 2, 2, REDRAW_INTERVAL_MS),  # the user's fixed choice
    ("2", "cuda:0", 16, 16, 500),
])
def test_the_live_plots_refresh_rule(refresh, device, threads, cores, ms):
    assert interval_for(refresh, device, threads, cores) == ms


def test_preferences_round_trip_and_a_damaged_file_gives_the_defaults():
    prefs = Preferences(cpu_threads=3, window_s=0.2, plot_refresh="2")
    prefs.save()
    assert Preferences.load() == prefs
    path = config_dir() / "preferences.json"
    for text in ("{not json", json.dumps({"plot_refresh": "60"}), json.dumps([1, 2]), json.dumps({"window_s": "x"})):
        path.write_text(text)
        loaded = Preferences.load()
        assert loaded.plot_refresh == "auto" and loaded.cpu_threads in (0, 3)
    request = RunRequest()
    applied = request.changed(**Preferences(cpu_threads=2, window_s=0.5).settings()).settings
    assert (applied.threads, applied.window_s) == (2, 0.5) and request.settings.threads is None  # a new config


def test_the_preferences_window_shows_and_keeps_the_refresh(qtbot, tmp_path):
    dialog = PreferencesDialog(tmp_path / "runs.sqlite3")
    qtbot.addWidget(dialog)
    assert dialog.refresh.currentData() == "auto"
    assert "every 2 s while a CPU run uses every core" in dialog.refresh.currentText()
    dialog.refresh.setCurrentIndex(dialog.refresh.findData("10"))
    dialog.accept()
    assert Preferences.load().plot_refresh == "10"


def test_the_window_redraws_as_the_preferences_say(qtbot):
    from mpsstudio.engine.basics.events import Started
    from tests.support.gui import open_window

    Preferences(plot_refresh="2").save()
    w = open_window(qtbot)
    try:
        started = Started(run_id="r1", config=RunConfig(device="cpu").to_dict(), env={"threads": 1}, device={},
                          dataset="shapes", parameters=1, total_steps=10, warmup_steps=1)
        w.live.on_event(started)
        assert w.plots.redraw_interval_ms() == 500  # a core free, but the user chose 2 Hz
        Preferences(plot_refresh="auto").save()
        w.live.on_event(started)
        assert w.plots.redraw_interval_ms() == REDRAW_INTERVAL_MS
    finally:
        w.close()


def test_preferences_that_cannot_be_saved_say_so_and_the_window_stays(qtbot, tmp_path, monkeypatch):
    from PySide6.QtWidgets import QMessageBox

    said = []
    monkeypatch.setattr(QMessageBox, "warning", lambda parent, title, text: said.append(text))
    monkeypatch.setattr(Preferences, "save", lambda self: (_ for _ in ()).throw(PermissionError(13, "Permission denied")))
    dialog = PreferencesDialog(tmp_path / "runs.sqlite3")
    qtbot.addWidget(dialog)
    dialog.show()
    dialog.accept()
    assert dialog.isVisible() and len(said) == 1
    assert "could not be saved" in said[0] and "Permission denied" in said[0]


def test_the_team_server_is_kept_as_its_address_and_one_with_a_secret_is_refused(qtbot, tmp_path, monkeypatch):
    from PySide6.QtWidgets import QMessageBox

    said = []
    monkeypatch.setattr(QMessageBox, "warning", lambda parent, title, text: said.append(text))
    dialog = PreferencesDialog(tmp_path / "runs.sqlite3")
    qtbot.addWidget(dialog)
    dialog.team_server.url.setText("http://alice:pw@mlflow.team:5000")
    dialog.accept()
    assert said and "must not carry a user, a password" in said[0] and Preferences.load().team_server == ""
    dialog.team_server.url.setText(" http://mlflow.team:5000/ ")
    dialog.accept()
    assert Preferences.load().team_server == "http://mlflow.team:5000"
    path = config_dir() / "preferences.json"
    path.write_text(json.dumps({"team_server": "http://bob:secret@host"}))  # edited by hand: not taken
    assert Preferences.load().team_server == ""


def test_a_token_typed_in_preferences_goes_to_the_keychain_never_to_a_file(qtbot, tmp_path, monkeypatch):
    """The keychain is conftest's (keyring's macOS backend over a faked Security API): the token is kept there, for
    the address as the engine keeps it; the preferences file has the address alone; Forget removes it."""
    from PySide6.QtWidgets import QMessageBox

    from mpsstudio.engine.team import credentials

    said = []
    monkeypatch.setattr(QMessageBox, "warning", lambda parent, title, text: said.append(text))
    secret = "prefs-token-77aa"
    dialog = PreferencesDialog(tmp_path / "runs.sqlite3")
    qtbot.addWidget(dialog)
    assert "never in MPS Studio's files" in dialog.team_server.note.text()
    dialog.team_server.token.setText(secret)
    dialog.accept()  # a token without an address: said, nothing kept
    assert said and "needs the team server's address" in said[-1]
    dialog.team_server.url.setText("http://mlflow.team:5000/")
    dialog.accept()
    assert credentials.find("http://mlflow.team:5000", {})[0].header == f"Bearer {secret}"
    assert secret not in (config_dir() / "preferences.json").read_text()
    again = PreferencesDialog(tmp_path / "runs.sqlite3")
    qtbot.addWidget(again)
    assert "keeps a token for this server" in again.team_server.note.text() and again.team_server.forget.isEnabled()
    again.team_server.forget.click()
    assert credentials.kept("http://mlflow.team:5000") is False and "Removed" in again.team_server.note.text()
    monkeypatch.setattr(credentials, "system_keychain", lambda: (None, "no system keychain answers here"))
    third = PreferencesDialog(tmp_path / "runs.sqlite3")
    qtbot.addWidget(third)
    assert "No keychain to keep a token in (no system keychain answers here)" in third.team_server.note.text()
