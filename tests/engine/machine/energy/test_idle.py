"""Energy above idle: the device's idle power read before the measured phase (from one counter update to another),
the run's energy above it, how it reads back from a file, and energy compared across machines; the CPU busy share
counts the run's data-loader workers."""

from __future__ import annotations

import json
import subprocess
import sys
import time

import psutil
import pytest

from mpsstudio.engine.analysis import compare, energy as figures, runcheck, verdict
from mpsstudio.engine.basics.summary_fields import RunSummary
from mpsstudio.engine.basics.config import RunConfig
from mpsstudio.engine.basics.results import RunResult, WindowRow
from mpsstudio.engine.machine.energy import base, cpu, meter as meters
from tests.support.energy import ENV, energy_rows


class SteppingCounter(base.Counter):
    """A counter like NVML's: the board's energy at `watts`, but moving only every `step_s` (its update period)."""

    name, scope = "stepping counter", "the whole board"

    def __init__(self, watts: float, step_s: float = 0.1, backwards: bool = False):
        self.watts, self.step_s, self.backwards, self.t0 = watts, step_s, backwards, time.perf_counter()

    def read(self) -> dict[str, float]:
        elapsed = time.perf_counter() - self.t0
        joules = self.watts * (elapsed // self.step_s) * self.step_s
        return {"gpu": -joules if self.backwards else joules}


def _meter(counter) -> meters.Meter:
    return meters.Meter(part="gpu", counters=[counter])


def test_the_idle_reading_runs_from_one_counter_update_to_another():
    """A counter that moves every 0.1 s would be off by up to a step over a plain 0.5 s reading (+-20 %); read
    from update to update it is within a few percent."""
    watts, seconds, why = _meter(SteppingCounter(90.0)).idle(0.5)
    assert why is None and watts == pytest.approx(90.0, rel=0.03)
    assert 0.5 <= seconds <= 0.5 + 2 * base.EDGE_WAIT_S


def test_an_idle_reading_that_cannot_be_made_says_why():
    assert _meter(SteppingCounter(90.0, backwards=True)).idle(0.05)[2] == "the energy counter went backwards"
    assert meters.Meter(reason="no energy counter readable on this Linux VM").idle() == (
        None, 0.0, "no energy counter readable on this Linux VM")


def _env(idle_w=None, idle_s=1.0, idle_reason=None):
    return {"energy": {**ENV["energy"], "idle_w": idle_w, "idle_s": idle_s, "idle_reason": idle_reason}}


def test_energy_above_idle_is_the_spans_energy_less_idle_power_over_their_time():
    s = RunSummary.made(figures.summary_fields(energy_rows(100.0, 120.0), _env(idle_w=60.0)))  # 220 J over 1 s, 128 samples
    assert s.idle_w == 60.0 and s.idle_s == 1.0 and s.idle_reason is None
    assert s.energy_above_idle_j == pytest.approx(160.0) and s.power_above_idle_w == pytest.approx(160.0)
    assert s.j_per_sample_above_idle == pytest.approx(160.0 / 128)
    assert "Idle: 60.0 W (read for 1.0 s before the measured phase); above idle 1.25 J per sample at 160.0 W." \
        in figures.describe(s)


@pytest.mark.parametrize("env, reason", [
    (ENV, figures.IDLE_BEFORE),  # a run recorded before idle power was read
    (_env(idle_reason="the energy counter could not be read"), "the energy counter could not be read"),
    (_env(idle_w=-5.0), "the idle power could not be read"),  # a file's nonsense is not a figure
    (_env(idle_w="lots"), "the idle power could not be read"),
    (_env(idle_w=1e9), "the idle power could not be read"),
    (_env(idle_w=500.0), "the run drew less than the idle reading before it (220.0 W vs 500.0 W idle), so there is "
                         "no figure above idle"),
])
def test_no_figure_above_idle_says_why(env, reason):
    s = RunSummary.made(figures.summary_fields(energy_rows(100.0, 120.0), env))
    assert s.j_per_sample_above_idle is None and s.idle_reason == reason
    assert s.j_per_sample == pytest.approx(220.0 / 128)  # the whole-device figure stands


def test_a_file_cannot_claim_an_energy_above_idle_its_windows_and_idle_reading_do_not_give():
    r = RunResult(config=RunConfig(device="cuda:0", steps=2, epochs=None), status="finished", env=_env(idle_w=60.0),
                  windows=energy_rows(100.0, 120.0), summary={"samples_per_s": 128.0})
    data = json.loads(json.dumps(r.to_dict()))
    data["summary"].update(j_per_sample_above_idle=0.0001, idle_w=1.0)
    back = runcheck.run_from_dict(data, "a file")
    assert back.summary.idle_w == 60.0 and back.summary.j_per_sample_above_idle == pytest.approx(160.0 / 128)


def _run(device, machine, sps, jps, above, watts, measure):
    windows = [WindowRow(first_step=i, steps=4, seconds=0.5, samples=int(sps / 2), samples_per_s=sps * f,
                data_wait_s=0.0, memory=0) for i, f in enumerate((0.99, 1.0, 1.01, 1.0, 0.995, 1.005))]
    summary = {"samples_per_s": sps, "stability": "stable", "j_per_sample": jps, "avg_power_w": watts,
               "energy_measure": measure, "energy_part": "gpu" if device != "cpu" else "cpu",
               "j_per_sample_above_idle": above}
    return RunResult(config=RunConfig(model="resnet18", dataset="cifar10", device=device, batch_size=64, steps=24),
                     status="finished", env={"machine_label": machine, "hostname": machine}, summary=summary,
                     windows=windows)


def test_a_mac_beside_an_imported_cuda_server_shows_the_energy_ratio_of_the_two():
    mac_cpu, mac = (_run("cpu", "Apple M2 Pro", 300.0, 0.05, 0.04, 15.0, "estimated"),
                    _run("mps", "Apple M2 Pro", 1200.0, 0.0125, 0.01, 15.0, "estimated"))
    server = _run("cuda:0", "NVIDIA H100 server", 8000.0, 0.025, 0.0125, 200.0, "measured")
    server.origin = "imported"
    [c] = compare.compare([mac_cpu, mac, server])
    [x] = c.cross
    text = verdict.cross_energy_sentence(x)
    assert text.startswith("Energy per sample across machines: ")
    assert "12.5 mJ at 15.0 W (GPU, whole device, idle included; estimated by macOS)" in text
    assert "25.0 mJ at 200.0 W (GPU, whole device, idle included; measured)" in text
    assert ("Apple GPU (mps) used 2.0x less" if x.a.device == "mps" else "CUDA GPU (cuda:0) used 2.0x more") in text
    assert "; above idle: " in text and text.endswith("(different machines).")
    assert text in verdict.verdicts(c)
    record = verdict.comparison_record(c)
    assert record["cross_machine"][0]["energy"] == text
    assert {d["device"]: d["j_per_sample_above_idle"] for d in record["devices"]}["cuda:0"] == 0.0125


def test_no_cross_machine_energy_sentence_when_a_side_has_no_energy():
    mac = _run("mps", "Apple M2 Pro", 1200.0, None, None, None, None)
    server = _run("cuda:0", "NVIDIA H100 server", 8000.0, 0.025, 0.0125, 200.0, "measured")
    [c] = compare.compare([_run("cpu", "Apple M2 Pro", 300.0, None, None, None, None), mac, server])
    assert c.cross and verdict.cross_energy_sentence(c.cross[0]) == ""


def test_the_cpu_busy_share_counts_the_runs_worker_processes():
    """A data-loader worker is a child of the run's process: its CPU time is the run's too, while it runs and after
    it was reaped. Checked as CPU seconds (the share times the span), so a busy machine that slows the worker does
    not matter."""
    spin = "import time\nt = time.process_time()\nwhile time.process_time() - t < 0.4: pass\n"
    busy = cpu.CpuBusy()

    def counted(t0: float, share: float | None) -> float:  # the CPU seconds a share over the span stands for
        assert share is not None
        return share / 100.0 * busy.cores * (time.perf_counter() - t0)

    busy.begin()
    t0 = time.perf_counter()
    worker = subprocess.Popen([sys.executable, "-c", spin])
    try:
        seen = psutil.Process(worker.pid)
        deadline = time.monotonic() + 30
        while sum(seen.cpu_times()[:2]) < 0.15 and time.monotonic() < deadline:  # measured while it runs ...
            time.sleep(0.01)
        used = sum(seen.cpu_times()[:2])
        mid = counted(t0, busy.end())
        busy.begin()
        t1 = time.perf_counter()
        worker.wait(30)  # ... and after it ended and was reaped
        after = counted(t1, busy.end())
    finally:
        worker.kill()
        worker.wait()
    assert used >= 0.15 and mid >= 0.8 * used  # this process sleeps: only the worker's time can make it busy
    assert after >= 0.8 * (0.4 - used)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the kernel's children lists are Linux's")
def test_the_run_s_descendants_come_from_the_kernel_s_lists_as_psutil_finds_them(monkeypatch):
    """Grandchildren too (a worker's own helper); where the kernel keeps no such lists, psutil's scan is used."""
    shell = subprocess.Popen(["sh", "-c", "sh -c 'sleep 30; true' & sleep 30 & wait"])  # a child, 2 grandchildren
    top = psutil.Process(shell.pid)
    try:
        deadline = time.monotonic() + 10
        while len(top.children(recursive=True)) < 3 and time.monotonic() < deadline:
            time.sleep(0.02)
        expected = sorted(p.pid for p in top.children(recursive=True))
        assert len(expected) == 3 and sorted(cpu.descendants(shell.pid)) == expected
        busy = cpu.CpuBusy()
        busy.process = top  # the busy share of that shell's "run"
        assert sorted(busy._children()) == expected
        monkeypatch.setattr(cpu.os.path, "exists", lambda path: False)  # a kernel without the lists
        assert cpu.descendants(shell.pid) is None and sorted(busy._children()) == expected
    finally:
        for child in top.children(recursive=True):
            child.kill()
        shell.kill()
        shell.wait(10)


def test_a_comparison_with_the_cpu_also_compares_the_energy_above_idle():
    cpu_run = _run("cpu", "Apple M2 Pro", 300.0, 0.05, 0.04, 15.0, "estimated")
    gpu = _run("mps", "Apple M2 Pro", 1200.0, 0.0125, 0.01, 15.0, "estimated")
    [c] = compare.compare([cpu_run, gpu])
    e = next(e for e in c.entries if e.device == "mps")
    assert "(12.5 mJ vs 50.0 mJ per sample; GPU vs CPU, estimated; above idle: 10.0 mJ vs 40.0 mJ (4.0x less))" \
        in verdict.energy_sentence(e)
