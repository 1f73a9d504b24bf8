"""Window settings (geometry, splitters, the last setup) in one INI file in the app's config folder.

An explicit file under `paths.config_dir()` rather than QSettings' platform default, so MPSSTUDIO_CONFIG_DIR
moves it everywhere, also in a child process, and tests never touch the user's real settings.
"""

from __future__ import annotations

from PySide6.QtCore import QSettings

from ..engine.basics.paths import config_dir

SETTINGS_FILE = "window.ini"


def settings() -> QSettings:
    """The app's QSettings (INI format, in the config folder); create one when needed, never keep one."""
    return QSettings(str(config_dir() / SETTINGS_FILE), QSettings.Format.IniFormat)
