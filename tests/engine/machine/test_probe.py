"""The functional device check: an accelerator that says it is available but does not work is reported as such
(in `devices`, `doctor`, the window and a run), never left to fail later with out-of-memory advice.

MPS is faked as GitHub's macOS runners show it: is_available() is True, then a tiny allocation fails with
"MPS backend out of memory (MPS allocated: 0 bytes ...)", or a computation returns wrong values.
"""

from __future__ import annotations

import pytest

from mpsstudio import cli
from mpsstudio.engine.machine import devices, environment, probe
from mpsstudio.engine.run import session
from mpsstudio.engine.basics.config import RunConfig
from mpsstudio.engine.basics.errors import UserError
from tests.support.fake_mps import fake_mac, vm_error

VM_ERROR = vm_error(16 << 20)


@pytest.fixture(autouse=True)
def fresh_checks():
    probe.forget()
    yield
    probe.forget()


def broken_mps(fake_mps, how: str = "oom"):
    """MPS available on a faked Mac (tests/support/fake_mps.py), then failing the way virtual Macs fail: "oom" (every
    allocation raises the allocator's out-of-memory error), "wrong" (zeros from a matrix product), "nan"."""
    return fake_mps(available=True, broken=how)


def working_mps(fake_mps):
    return fake_mps(available=True)


def test_cpu_needs_no_check():
    assert probe.check("cpu").ok


def test_a_real_computation_passes_on_this_cpu():
    result = probe._run("cpu")
    assert result.ok and "matched the CPU" in result.detail


def test_vm_out_of_memory_is_not_working(monkeypatch, fake_mps):
    broken_mps(fake_mps, "oom")
    result = probe.check("mps")
    assert not result.ok
    assert "MPS backend out of memory" in result.detail


@pytest.mark.parametrize("how, words", [("wrong", "differed from the CPU's by 99.8%"),
                                        ("nan", "differed from the CPU's by not a number")])
def test_wrong_values_are_not_working(monkeypatch, how, words, fake_mps):
    broken_mps(fake_mps, how)
    result = probe.check("mps")
    assert not result.ok and words in result.detail


def test_a_wrong_block_sum_is_not_working(monkeypatch):
    fake_mac(monkeypatch, available=True)
    monkeypatch.setattr(probe, "_block_sum", lambda device_id: 0.0)
    result = probe.check("mps")
    assert not result.ok and "summed to 0" in result.detail


def test_check_is_cached_until_forgotten(monkeypatch, fake_mps):
    calls = []
    broken_mps(fake_mps, "oom")
    monkeypatch.setattr(probe, "_run", lambda d: calls.append(d) or probe.Check(False, "x"))
    probe.check("mps")
    probe.check("mps")
    assert calls == ["mps"]
    probe.forget()
    probe.check("mps")
    assert calls == ["mps", "mps"]


def test_mark_turns_a_broken_accelerator_unavailable(monkeypatch, fake_mps):
    broken_mps(fake_mps, "oom")
    found = devices.discover_devices()
    marked = {d.id: d for d in probe.mark(found, probe.check_all(found))}
    assert marked["cpu"].available
    assert not marked["mps"].available
    assert marked["mps"].reason.startswith("available but not working: ")


def test_working_mps_stays_available(monkeypatch, fake_mps):
    working_mps(fake_mps)
    found = devices.discover_devices()
    checks = probe.check_all(found)
    assert checks["mps"].ok
    assert {d.id: d.available for d in probe.mark(found, checks)}["mps"]


def test_cli_devices_says_available_but_not_working(monkeypatch, capsys, fake_mps):
    broken_mps(fake_mps, "oom")
    code = cli.main(["devices"])
    out = capsys.readouterr().out
    row = next(line for line in out.splitlines() if line.startswith("mps"))
    assert "NO" in row and "available but not working" in row and "MPS backend out of memory" in row
    assert code == cli.EXIT_RUN_FAILED


def test_cli_devices_with_working_mps(capsys, fake_mps):
    working_mps(fake_mps)
    assert cli.main(["devices"]) == cli.EXIT_OK
    row = next(line for line in capsys.readouterr().out.splitlines() if line.startswith("mps"))
    assert " yes " in row and "not working" not in row


def test_doctor_reports_the_failed_check(monkeypatch, fake_mps):
    broken_mps(fake_mps, "wrong")
    rows = dict(environment.doctor())
    assert rows["mps works"].startswith("NO, available but not working: a 32x32 matrix product differed")


def test_a_run_on_broken_mps_fails_with_the_check_not_oom_advice(monkeypatch, fake_mps):
    broken_mps(fake_mps, "oom")
    cfg = RunConfig(device="mps", steps=2, warmup_steps=0)
    [result] = session.run_configs([cfg])
    assert result.status == "failed"
    assert result.error.startswith("mps is available but not working: ")
    assert "batch size" not in result.error  # not the out-of-memory advice


def test_require_raises_one_sentence(monkeypatch, fake_mps):
    broken_mps(fake_mps, "oom")
    with pytest.raises(UserError, match=r"^mps is available but not working: .*use another device\.$"):
        probe.require(devices.resolve_device("mps"))
