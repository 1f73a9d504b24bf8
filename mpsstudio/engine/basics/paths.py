"""Where MPS Studio keeps its files: platformdirs folders, each overridable by an environment variable.

Never next to the code or inside the .app bundle. Overrides serve tests and portable installs.
"""

from __future__ import annotations

import os
from pathlib import Path

import platformdirs

APP_NAME = "MPS Studio"


def _folder(env_var: str, default) -> Path:
    override = os.environ.get(env_var)
    return Path(override) if override else Path(default(APP_NAME, appauthor=False))


def data_dir() -> Path:
    """The run history (MPSSTUDIO_DATA_DIR overrides)."""
    return _folder("MPSSTUDIO_DATA_DIR", platformdirs.user_data_dir)


def config_dir() -> Path:
    """Preferences (MPSSTUDIO_CONFIG_DIR overrides)."""
    return _folder("MPSSTUDIO_CONFIG_DIR", platformdirs.user_config_dir)


def cache_dir() -> Path:
    """Downloaded datasets live below this (MPSSTUDIO_CACHE_DIR overrides)."""
    return _folder("MPSSTUDIO_CACHE_DIR", platformdirs.user_cache_dir)


def log_dir() -> Path:
    """Logs and crash reports (MPSSTUDIO_LOG_DIR overrides)."""
    return _folder("MPSSTUDIO_LOG_DIR", platformdirs.user_log_dir)


LOG_NAME = "mpsstudio.log"


def log_file() -> Path:
    """The app's log: crash reports, and the last output of a run's process that died
    (macOS: ~/Library/Logs/MPS Studio/mpsstudio.log)."""
    return log_dir() / LOG_NAME
