"""Shared fixtures: every test gets its own history folder, so nothing touches the user's real data."""

import pytest


@pytest.fixture(autouse=True)
def _private_data_dir(tmp_path_factory, monkeypatch):
    monkeypatch.setenv("MPSSTUDIO_DATA_DIR", str(tmp_path_factory.mktemp("data")))
