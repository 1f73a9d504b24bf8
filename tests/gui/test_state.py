"""The window's state (gui/state.py): its rules, as plain Python; importing it loads no Qt."""

from __future__ import annotations

import subprocess
import sys
from types import SimpleNamespace

import pytest

from mpsstudio.gui.state import WindowState
from mpsstudio.engine.basics.summary_fields import RunSummary


def _device(name, available=True):
    return SimpleNamespace(id=name, available=available)


def _run(device="cpu", status="finished", error="", saved=None, rid="r1"):
    return SimpleNamespace(id=rid, status=status, error=error, config=SimpleNamespace(device=device),
                           summary=RunSummary.made({"samples_per_s": 10.0, **({"saved_model": saved} if saved else {})}))


def test_nothing_starts_before_pytorch_has_loaded_or_while_something_runs():
    s = WindowState()
    assert not s.may_start() and s.actions() == {"start": False, "stop": False}
    s.set_catalog({"devices": [_device("cpu"), _device("mps", available=False)]})
    assert s.may_start() and s.available_devices() == ["cpu"]
    s.start_run("job")
    assert s.busy and not s.may_start() and not s.may_apply() and not s.may_show_stored()
    assert s.actions() == {"start": False, "stop": True}
    with pytest.raises(RuntimeError):
        s.start_tool("tool")  # one job at a time
    assert s.end_run() == "job" and s.may_start()
    s.start_tool("tool", automatic=True)
    assert s.tool_automatic and s.may_apply() and not s.may_start() and s.may_show_stored()
    assert s.end_tool() == "tool" and s.end_tool() is None


def test_stop_is_asked_once_per_job():
    s = WindowState(catalog={"devices": []})
    assert s.ask_stop() == [] and not s.stopping  # idle: nothing to stop
    s.start_run("job")
    assert s.ask_stop() == ["job"] and s.actions()["stop"] is False  # asked: the command goes off
    s.end_run()
    assert not s.stopping
    s.start_run("again")
    assert s.actions()["stop"] and not s.stopping  # a new Run can be stopped again


def test_a_run_forgets_what_the_last_left_and_keeps_its_trained_models():
    s = WindowState(catalog={"devices": []})
    s.start_run("job")
    s.rejected = "the dataset did not load"
    s.run_has_ended(_run(saved="/cache/1.pt"))
    s.run_has_ended(_run(device="mps", status="failed", error="out of memory", rid="r2"))
    assert s.trained == {"r1": "/cache/1.pt"} and s.ended_ids() == ["r1", "r2"]
    assert s.failures() == ["mps: out of memory", "the dataset did not load"]
    s.end_run()
    s.start_run("next", probing=True)
    assert s.run_ended == () and s.rejected == "" and s.probing
    s.run_has_ended(_run(saved="/cache/probe.pt", rid="p"))  # a probe's runs keep nothing
    assert "p" not in s.trained and s.probe_rates() == {"cpu": 10.0}


def test_views_hear_every_change_made_through_it():
    s = WindowState()
    heard = []
    s.subscribe(lambda: heard.append(s.actions()))
    s.set_catalog({"devices": []})
    s.start_run("job")
    s.ask_stop()
    s.end_run()
    assert heard == [{"start": True, "stop": False}, {"start": False, "stop": True},
                     {"start": False, "stop": False}, {"start": True, "stop": False}]


def test_the_state_imports_no_qt():
    code = "import sys, mpsstudio.gui.state; print(any(m.startswith(('PySide6', 'shiboken6')) for m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "False"


def test_a_run_config_cannot_change_after_it_is_made():
    import dataclasses

    from mpsstudio.engine.basics.config import RunConfig

    cfg = RunConfig(model="mlp").validate()
    with pytest.raises(dataclasses.FrozenInstanceError):
        cfg.batch_size = 10**30  # type: ignore[misc]
    changed = cfg.changed(batch_size=8)
    assert (changed.batch_size, cfg.batch_size) == (8, 64) and changed.options is not cfg.options


def test_every_change_of_every_field_notifies_once():
    """Setting any field notifies its observers; a method's several changes notify once; the containers are read
    only from outside (a view never misses a change made around it)."""
    from dataclasses import fields

    s = WindowState()
    seen = []
    s.subscribe(lambda: seen.append(1))
    new = {"catalog": {"devices": []}, "run_job": "job", "tool_job": "tool", "tool_automatic": True,
           "probing": True, "launch_jobs": ["a"], "rejected": "no", "run_ended": ("r",), "pending_folder": "/d",
           "rechecking": True, "stopping": True}
    public = [f.name for f in fields(WindowState) if not f.name.startswith("_")]
    assert sorted(public) == sorted(new)  # a new field gets a value here
    for name in public:
        before = len(seen)
        setattr(s, name, new[name])
        assert len(seen) == before + 1, name
        setattr(s, name, new[name])  # the same value again: nothing changed, nothing said
        assert len(seen) == before + 1, name
    s = WindowState(catalog={"devices": []})
    seen.clear()
    s.subscribe(lambda: seen.append(1))
    s.start_run("job")
    s.run_has_ended(_run(saved="/cache/1.pt"))
    s.note_epochs("r1", 2, 40)
    s.forget_trained()
    s.ask_stop()
    s.end_run()
    assert len(seen) == 6 and s.epochs == {"r1": (2, 40)} and s.trained == {}
    with pytest.raises(TypeError):
        s.trained["r1"] = "/elsewhere.pt"  # type: ignore[index]
