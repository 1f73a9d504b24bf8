"""Shared fixtures: every test gets its own history folder, so nothing touches the user's real data."""

import pytest


@pytest.fixture(autouse=True)
def _private_data_dir(tmp_path_factory, monkeypatch):
    monkeypatch.setenv("MPSSTUDIO_DATA_DIR", str(tmp_path_factory.mktemp("data")))


@pytest.fixture(autouse=True)
def _private_settings(tmp_path_factory, monkeypatch):
    """QSettings and preferences go to a temporary folder, never to the user's real ones."""
    monkeypatch.setenv("MPSSTUDIO_CONFIG_DIR", str(tmp_path_factory.mktemp("config")))
    try:
        from PySide6.QtCore import QSettings
    except ImportError:
        yield
        return
    QSettings.setDefaultFormat(QSettings.IniFormat)
    QSettings.setPath(QSettings.IniFormat, QSettings.UserScope, str(tmp_path_factory.mktemp("qsettings")))
    yield


@pytest.fixture
def no_leftovers(qapp):
    """Fails a GUI test that leaves one of our QThreads running or an active QTimer in a closed window."""
    yield
    from PySide6.QtCore import QTimer
    from PySide6.QtWidgets import QApplication

    from mpsstudio.gui.worker import running_threads

    threads = running_threads()
    for t in threads:
        t.wait(5000)
    assert not threads, f"QThreads left running: {threads}"
    active = [t for w in QApplication.topLevelWidgets() if not w.isVisible()
              for t in w.findChildren(QTimer) if t.isActive() and t.interval() > 0 and not t.isSingleShot()]
    assert not active, f"active timers left in closed windows: {active}"
