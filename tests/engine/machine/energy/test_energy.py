"""Energy and utilisation (engine/machine/energy/) with fake counters: RAPL files written in the kernel's layout (a
wrap-around, root-only files, none at all), a fake NVML module and a fake zeus-apple-silicon module; the run's
figures in its summary; a file cannot claim figures its windows do not have."""

import json
import math
import os
import sys
import types

import pytest

from tests.support.fake_mps import FakeAppleMonitor, fake_mac

from mpsstudio.engine.analysis import energy as figures
from mpsstudio.engine.basics.summary_fields import RunSummary
from mpsstudio.engine.machine.energy import base, ioreport, rapl
from mpsstudio.engine.machine.energy import nvml as nvml_source
from mpsstudio.engine.machine.energy import meter as meters
from mpsstudio.engine.analysis import runcheck
from mpsstudio.engine.run import trainer
from mpsstudio.engine.basics.config import RunConfig
from mpsstudio.engine.basics.errors import UserError
from mpsstudio.engine.basics.results import RunResult, WindowRow
from tests.support.energy import ENV, energy_windows, energy_rows


def write_rapl(root, packages=((1_000_000, 262_143_328_850),), dram=None):
    """A /sys/class/powercap tree: intel-rapl:N packages (energy_uj, max_energy_range_uj), a core subdomain
    (never added: it is inside its package) and optionally a DRAM domain, all at the top level as the kernel
    links them."""
    root.mkdir(exist_ok=True)
    for i, (value, span) in enumerate(packages):
        d = root / f"intel-rapl:{i}"
        d.mkdir()
        (d / "name").write_text(f"package-{i}\n")
        (d / "energy_uj").write_text(f"{value}\n")
        (d / "max_energy_range_uj").write_text(f"{span}\n")
        core = root / f"intel-rapl:{i}:0"
        core.mkdir()
        (core / "name").write_text("core\n")
        (core / "energy_uj").write_text("5\n")
    if dram is not None:
        d = root / "intel-rapl:0:1"
        d.mkdir()
        (d / "name").write_text("dram\n")
        (d / "energy_uj").write_text(f"{dram}\n")
        (d / "max_energy_range_uj").write_text("65712999613\n")
    return root


def set_uj(root, name, value):
    (root / name / "energy_uj").write_text(f"{value}\n")


def test_rapl_counts_packages_and_dram_but_not_their_subdomains(tmp_path):
    root = write_rapl(tmp_path / "powercap", packages=((1_000_000, 10**12), (2_000_000, 10**12)), dram=500_000)
    counter = rapl.RaplCounter(str(root))
    meter = meters.Meter(part="cpu", counters=[counter])
    meter.begin()
    set_uj(root, "intel-rapl:0", 4_000_000)  # +3 J
    set_uj(root, "intel-rapl:1", 3_000_000)  # +1 J
    set_uj(root, "intel-rapl:0:1", 750_000)  # DRAM +0.25 J
    set_uj(root, "intel-rapl:0:0", 999_999_999)  # a core subdomain: inside its package, never added
    w = meter.end(close=True)
    assert w.energy_j == pytest.approx(4.0)
    assert w.parts == {"cpu": pytest.approx(4.0), "dram": pytest.approx(0.25)}


def test_rapl_counter_wrapping_in_a_window_adds_its_range_once(tmp_path):
    span = 262_143_328_850  # µJ, a real package's max_energy_range_uj
    root = write_rapl(tmp_path / "powercap", packages=((span - 2_000_000, span),))
    meter = meters.Meter(part="cpu", counters=[rapl.RaplCounter(str(root))])
    meter.begin()
    set_uj(root, "intel-rapl:0", 3_000_000)  # wrapped: 2 J to the top, then 3 J
    w = meter.end(close=True)
    assert w.energy_j == pytest.approx(5.0)
    meter.begin()
    set_uj(root, "intel-rapl:0", 4_500_000)
    assert meter.end(close=True).energy_j == pytest.approx(1.5)


def test_a_counter_that_goes_backwards_with_no_range_gives_an_unknown_window_never_a_negative_one(tmp_path):
    root = write_rapl(tmp_path / "powercap")
    (root / "intel-rapl:0" / "max_energy_range_uj").unlink()
    meter = meters.Meter(part="cpu", counters=[rapl.RaplCounter(str(root))])
    meter.begin()
    set_uj(root, "intel-rapl:0", 10)
    w = meter.end(close=True)
    assert w.energy_j is None and meter.failures == 1


@pytest.mark.skipif(hasattr(os, "geteuid") and os.geteuid() == 0, reason="root reads any file")
def test_root_only_rapl_files_say_so(tmp_path):
    root = write_rapl(tmp_path / "powercap")
    (root / "intel-rapl:0" / "energy_uj").chmod(0o000)
    with pytest.raises(base.Unreadable, match="readable by root only"):
        rapl.RaplCounter(str(root))


def test_root_only_rapl_files_say_so_also_as_root(tmp_path, monkeypatch):
    root = write_rapl(tmp_path / "powercap")
    real_open = open

    def deny(path, *args, **kwargs):
        if str(path).endswith("energy_uj"):
            raise PermissionError(13, "Permission denied", str(path))
        return real_open(path, *args, **kwargs)

    monkeypatch.setattr("builtins.open", deny)
    with pytest.raises(base.Unreadable, match="readable by root only"):
        rapl.RaplCounter(str(root))


def test_a_counter_unreadable_mid_run_loses_that_window_only(tmp_path):
    root = write_rapl(tmp_path / "powercap")
    meter = meters.Meter(part="cpu", counters=[rapl.RaplCounter(str(root))])
    meter.begin()
    (root / "intel-rapl:0" / "energy_uj").write_text("garbage\n")
    assert meter.end(close=True).energy_j is None
    set_uj(root, "intel-rapl:0", 2_000_000)
    meter.begin()
    set_uj(root, "intel-rapl:0", 2_500_000)
    assert meter.end(close=True).energy_j == pytest.approx(0.5)


def test_no_powercap_folder_gives_the_vm_phrase(tmp_path, monkeypatch):
    monkeypatch.setattr(rapl, "POWERCAP", str(tmp_path / "missing"))
    monkeypatch.setattr(rapl, "_is_virtual_machine", lambda: True)
    monkeypatch.setattr(sys, "platform", "linux")
    meter = meters.meter_for("cpu")
    assert meter.reason.startswith("no energy counter readable on this Linux VM")
    assert meter.describe()["source"] is None and meter.part is None
    assert meter.busy is not None  # CPU utilisation still measured


def test_an_amd_cpu_without_the_driver_is_named(tmp_path, monkeypatch):
    (tmp_path / "powercap").mkdir()
    monkeypatch.setattr(rapl, "POWERCAP", str(tmp_path / "powercap"))
    monkeypatch.setattr(rapl, "_cpu_vendor", lambda: "AuthenticAMD")
    monkeypatch.setattr(sys, "platform", "linux")
    assert "AMD" in meters.meter_for("cpu").reason


# ---------------------------------------------------------------- NVML, faked


class FakeNvml(types.SimpleNamespace):
    """pynvml's calls the meter makes, over a counter the test moves (mJ)."""

    NVML_GPU_UTILIZATION_SAMPLES = 1

    def __init__(self, energy_mj=1_000_000, supported=True, util=87, samples=(), start_error=None):
        super().__init__(energy_mj=energy_mj, supported=supported, util=util, samples=list(samples),
                         start_error=start_error, handles=[])

    def nvmlInit(self):
        if self.start_error:
            raise RuntimeError(self.start_error)

    def nvmlDeviceGetHandleByUUID(self, uuid):
        if uuid not in ("GPU-abc", b"GPU-abc"):
            raise RuntimeError("Not Found")
        self.handles.append(uuid)
        return "h-uuid"

    def nvmlDeviceGetHandleByIndex(self, index):
        self.handles.append(index)
        return f"h{index}"

    def nvmlDeviceGetTotalEnergyConsumption(self, handle):
        if not self.supported:
            raise RuntimeError("Not Supported")
        return self.energy_mj

    def nvmlDeviceGetUtilizationRates(self, handle):
        return types.SimpleNamespace(gpu=self.util, memory=10)

    def nvmlDeviceGetSamples(self, handle, kind, since):
        if not self.samples:
            raise RuntimeError("Not Found")
        return 0, [types.SimpleNamespace(timeStamp=since + i + 1, sampleValue=types.SimpleNamespace(uiVal=v))
                   for i, v in enumerate(self.samples)]


@pytest.fixture
def fake_nvml(monkeypatch, tmp_path):
    nvml = FakeNvml(samples=(40, 60))
    monkeypatch.setattr(nvml_source, "load_nvml", lambda: nvml)
    monkeypatch.setattr(rapl, "POWERCAP", str(tmp_path / "no-powercap"))
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    return nvml


def test_nvml_energy_and_busy_share_of_a_window(fake_nvml):
    meter = meters.meter_for("cuda", 0, None)
    assert meter.reason is None and meter.part == "gpu"
    assert meter.describe()["source"] == "NVML total-energy counter (GPU 0)"
    assert meter.describe()["measure"] == "measured"
    meter.begin()
    fake_nvml.energy_mj += 55_900  # 55.9 J
    w = meter.end(close=True)
    assert w.energy_j == pytest.approx(55.9) and w.parts == {"gpu": pytest.approx(55.9)}
    assert w.utilization == pytest.approx(50.0)  # the mean of the samples inside the window
    fake_nvml.samples = []
    meter.begin()
    assert meter.end(close=True).utilization == 87  # shorter than a sampling period: NVML's latest reading


def test_nvml_finds_the_gpu_by_uuid_when_cuda_renumbers_them(fake_nvml, monkeypatch):
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "3")
    assert meters.meter_for("cuda", 0, "abc").reason is None
    assert fake_nvml.handles[-1] in ("GPU-abc", b"GPU-abc")
    meter = meters.meter_for("cuda", 0, None)
    assert "CUDA_VISIBLE_DEVICES" in meter.reason and meter.part is None


@pytest.mark.parametrize("nvml, phrase", [
    (FakeNvml(supported=False), "has no NVML total-energy counter"),
    (FakeNvml(start_error="Driver Not Loaded"), "NVML could not start (Driver Not Loaded)"),
])
def test_nvml_that_cannot_measure_says_why(monkeypatch, nvml, phrase):
    monkeypatch.setattr(nvml_source, "load_nvml", lambda: nvml)
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    meter = meters.meter_for("cuda", 0, None)
    assert phrase in meter.reason and meter.counters == []
    meter.begin()
    assert meter.end(close=True).energy_j is None


def test_nvml_not_installed(monkeypatch):
    def missing():
        raise ImportError("No module named 'pynvml'")

    monkeypatch.setattr(nvml_source, "load_nvml", missing)
    assert meters.meter_for("cuda", 0, None).reason == "nvidia-ml-py is not installed (pip install nvidia-ml-py)"


def test_cuda_keeps_the_host_cpu_package_as_a_part_when_rapl_is_readable(fake_nvml, monkeypatch, tmp_path):
    root = write_rapl(tmp_path / "powercap")
    monkeypatch.setattr(rapl, "POWERCAP", str(root))
    monkeypatch.setattr(sys, "platform", "linux")
    meter = meters.meter_for("cuda", 0, None)
    meter.begin()
    fake_nvml.energy_mj += 10_000
    set_uj(root, "intel-rapl:0", 3_000_000)
    w = meter.end(close=True)
    assert w.energy_j == pytest.approx(10.0) and w.parts == {"gpu": pytest.approx(10.0), "cpu": pytest.approx(2.0)}


# ---------------------------------------------------------------- Apple silicon, faked


def test_apple_silicon_energy_is_estimated_and_keeps_its_parts(monkeypatch):
    monitor = FakeAppleMonitor(mj={"cpu_total_mj": 1000, "gpu_mj": 2000, "gpu_sram_mj": 100, "dram_mj": 300,
                                   "ane_mj": 0})
    fake_mac(monkeypatch, available=True, monitor=monitor)
    outputs = iter(['| |   "PerformanceStatistics" = {"Device Utilization %"=30,"Renderer Utilization %"=2}'] * 1000)
    monkeypatch.setattr(ioreport, "_ioreg", lambda: next(outputs))
    meter = meters.meter_for("mps")
    try:
        info = meter.describe()
        assert info["part"] == "gpu" and info["measure"] == "estimated" and "zeus-apple-silicon" in info["source"]
        meter.begin()
        for key, add in (("gpu_mj", 15_000), ("gpu_sram_mj", 500), ("cpu_total_mj", 4000), ("dram_mj", 800)):
            monitor.mj[key] += add
        w = meter.end(close=True)
        assert w.energy_j == pytest.approx(15.5)  # GPU and its SRAM
        assert w.parts == {"gpu": pytest.approx(15.5), "cpu": pytest.approx(4.0), "dram": pytest.approx(0.8),
                           "ane": 0.0}
        assert w.utilization == 30.0
    finally:
        meter.close()
    cpu = meters.meter_for("cpu")
    assert cpu.part == "cpu" and cpu.busy.measure == "cpu_busy"


def test_apple_silicon_parts_macos_does_not_report_are_left_out(monkeypatch):
    """zeus-apple-silicon's fields may each be None (a chip without that counter): the part is then missing."""
    monitor = FakeAppleMonitor(mj={"cpu_total_mj": 10, "gpu_mj": 20, "gpu_sram_mj": None, "dram_mj": None,
                                   "ane_mj": None})
    fake_mac(monkeypatch, available=True, monitor=monitor)
    meter = meters.meter_for("mps")
    meter.begin()
    monitor.mj.update(gpu_mj=2020, cpu_total_mj=1010)
    w = meter.end(close=True)
    meter.close()
    assert w.energy_j == pytest.approx(2.0) and w.parts == {"gpu": pytest.approx(2.0), "cpu": pytest.approx(1.0)}


def test_apple_silicon_without_zeus_says_how_to_install_it(monkeypatch):
    def missing():
        raise ImportError("no zeus_apple_silicon")

    fake_mac(monkeypatch, available=True)
    monkeypatch.setattr(ioreport, "_apple", missing)
    monkeypatch.setattr(ioreport, "_ioreg", lambda: "")
    meter = meters.meter_for("mps")
    assert meter.reason == "zeus-apple-silicon is not installed (pip install zeus-apple-silicon)"
    assert "Device Utilization" in meter.busy_reason


def test_ioreg_utilization_parses_activity_monitors_figure():
    assert ioreport.ioreg_utilization('"Device Utilization %"=73,"Tiler Utilization %"=5') == 73.0
    assert ioreport.ioreg_utilization("nothing here") is None


# ---------------------------------------------------------------- the run's figures


def test_summary_sums_theenergy_windows():
    s = RunSummary.made(figures.summary_fields(energy_rows(100.0, 120.0), ENV))
    assert s.energy_j == pytest.approx(220.0)
    assert s.avg_power_w == pytest.approx(220.0)  # over 1 s of windows
    assert s.j_per_sample == pytest.approx(220.0 / 128)
    assert s.energy_parts == {"gpu": pytest.approx(220.0), "cpu": pytest.approx(2.0)}
    assert s.utilization == pytest.approx(50.0) and s.utilization_measure == "gpu_busy"
    assert s.energy_reason is None


def test_one_missing_window_makes_the_run_energy_null_with_a_reason_never_zero():
    s = RunSummary.made(figures.summary_fields(energy_rows(100.0, None, 90.0), ENV))
    assert s.energy_j is None and s.j_per_sample is None and s.avg_power_w is None
    assert s.energy_reason == "the energy counter could not be read in 1 of 3 energy spans"


def test_no_source_gives_null_fields_and_the_sources_reason():
    env = {"energy": {"source": None, "part": None, "measure": None, "reason": "no energy counter readable on "
                      "this Linux VM (/sys/class/powercap is missing)", "utilization": "cpu_busy"}}
    s = RunSummary.made(figures.summary_fields(energy_rows(None, None), env))
    assert all(getattr(s, k) is None for k in ("energy_j", "avg_power_w", "j_per_sample", "energy_parts"))
    assert s.energy_reason.startswith("no energy counter readable on this Linux VM")
    assert s.utilization == pytest.approx(50.0)


def test_runs_recorded_before_energy_say_so():
    s = RunSummary.made(figures.summary_fields(energy_rows(5.0), {"machine_label": "an older record"}))
    assert s.energy_j is None and s.energy_reason == figures.BEFORE
    s = RunSummary.made(figures.summary_fields([], {}))  # a run that failed in its setup: never started, nothing to measure
    assert s.energy_reason == "not measured (the run ended before its first step)"
    from mpsstudio.engine.basics.results import RunResult

    failed = RunResult(config=RunConfig(device="cpu"), status="failed", summary=s)
    assert figures.notes([failed]) == ["Energy of cpu: not measured (the run ended before its first step)."]


def _file_run(windows, env=ENV, summary=None):
    return {"id": "r1", "created_at": "2026-11-22T10:00:00+00:00", "status": "finished",
            "config": RunConfig(model="mlp", dataset="synthetic", device="cuda:0", batch_size=64, steps=4).to_dict(),
            "env": env, "summary": summary or {}, "windows": windows}


def test_a_file_cannot_claim_energy_its_windows_do_not_have():
    lying = {"energy_j": 1.0, "j_per_sample": 0.0001, "avg_power_w": 1.0}
    run = runcheck.run_from_dict(_file_run(energy_windows(100.0, 120.0), summary=lying), "x.json")
    assert run.summary.energy_j == pytest.approx(220.0)
    run = runcheck.run_from_dict(_file_run(energy_windows(None, None), summary=lying), "x.json")
    assert run.summary.energy_j is None and run.summary.j_per_sample is None


@pytest.mark.parametrize("field, value", [
    ("energy_j", -1.0), ("energy_j", "lots"), ("utilization", 140.0), ("utilization", -3),
    ("energy_parts", {"gpu": -1.0}), ("energy_parts", {"fan": 1.0}), ("energy_parts", [1, 2]),
    ("energy_parts", {"gpu": True}),
])
def test_bad_window_energy_in_a_file_is_one_sentence(field, value):
    windows = energy_windows(1.0, 2.0)
    windows[1][field] = value
    with pytest.raises(UserError, match=r"x\.json has an invalid 'windows\[1\]\.(energy_j|utilization|energy_parts)"):
        runcheck.run_from_dict(_file_run(windows), "x.json")


def test_a_hostile_energy_description_is_shown_bounded():
    env = {"energy": {**ENV["energy"], "source": "A\x00B " * 500, "measure": "guessed"}}
    s = runcheck.run_from_dict(_file_run(energy_windows(1.0), env=env), "x.json").summary
    assert s.energy_j is None  # an unknown measure is not trusted
    env = {"energy": {**ENV["energy"], "source": "A\x00B " * 500}}
    s = runcheck.run_from_dict(_file_run(energy_windows(1.0), env=env), "x.json").summary
    assert len(s.energy_source) <= figures.MAX_TEXT and "\x00" not in s.energy_source


def test_a_run_with_fake_rapl_reports_energy_in_its_summary_and_json(tmp_path, monkeypatch):
    """The whole path through the run loop: counters read at window boundaries, summed in the summary."""
    root = write_rapl(tmp_path / "powercap")
    monkeypatch.setattr(rapl, "POWERCAP", str(root))
    monkeypatch.setattr(sys, "platform", "linux")
    reads = {"n": 0}
    real_read = rapl.RaplCounter.read

    def moving(self):
        reads["n"] += 1
        set_uj(root, "intel-rapl:0", 1_000_000 + reads["n"] * 250_000)  # +0.25 J per read
        return real_read(self)

    monkeypatch.setattr(rapl.RaplCounter, "read", moving)
    monkeypatch.setattr(meters, "SPAN_S", 0.0)  # every window closes its own span
    result = trainer.run(RunConfig(model="mlp", dataset="synthetic", device="cpu", batch_size=16, steps=12,
                                   warmup_steps=2))
    assert result.status == "finished"
    s = result.summary
    assert s.energy_source == "RAPL energy counters" and s.energy_part == "cpu"
    assert all(w.energy_j == pytest.approx(0.25) for w in result.windows)
    assert s.energy_j == pytest.approx(0.25 * len(result.windows))
    assert s.j_per_sample == pytest.approx(s.energy_j / (12 * 16))
    assert s.avg_power_w == pytest.approx(s.energy_j / sum(w.energy_s for w in result.windows))
    assert 0 <= s.utilization <= 100 and s.utilization_measure == "cpu_busy"
    data = json.loads(json.dumps(result.to_dict()))
    assert runcheck.run_from_dict(data, "again").summary.energy_j == pytest.approx(s.energy_j)


def test_a_run_without_a_counter_has_null_energy_and_a_reason(tmp_path, monkeypatch):
    monkeypatch.setattr(rapl, "POWERCAP", str(tmp_path / "missing"))
    monkeypatch.setattr(sys, "platform", "linux")
    result = trainer.run(RunConfig(model="mlp", dataset="synthetic", device="cpu", batch_size=16, steps=6))
    s = result.summary
    assert s.energy_j is None and s.avg_power_w is None and s.j_per_sample is None
    assert s.energy_reason.startswith("no energy counter readable on this Linux")
    assert s.utilization is not None and not math.isnan(s.utilization)


def test_fmt_joules():
    assert figures.fmt_joules(0.13) == "130 mJ"
    assert figures.fmt_joules(1234.5) == "1.23 kJ"
    assert figures.fmt_joules(12.4) == "12.4 J"
    assert figures.fmt_joules(None) == "\u2014"


# ---------------------------------------------------------------- comparisons and the verdict


def _measured_run(device, sps, jps=None, measure="measured", busy=None, reason=None):
    from mpsstudio.engine.analysis import compare  # noqa: F401  (the comparison below)

    windows = [WindowRow(first_step=i, steps=4, seconds=0.5, samples=int(sps / 2), samples_per_s=sps * f,
                data_wait_s=0.0, memory=0) for i, f in enumerate((0.99, 1.0, 1.01, 1.0, 0.995, 1.005))]
    summary = {"samples_per_s": sps, "step_ms": 1000 * 64 / sps, "stability": "stable",
               "j_per_sample": jps, "energy_measure": measure if jps else None, "energy_part":
               ("cpu" if device == "cpu" else "gpu") if jps else None, "energy_reason": reason,
               "avg_power_w": jps * sps if jps else None, "utilization": busy,
               "utilization_measure": "gpu_busy" if busy is not None else None}
    return RunResult(config=RunConfig(model="resnet18", dataset="cifar10", device=device, batch_size=64, steps=24),
                     status="finished", env={"machine_label": "Apple M2 Pro, macOS 15.1", "hostname": "mac"},
                     summary=summary, windows=windows)


def _entry(cpu, other):
    from mpsstudio.engine.analysis import compare

    [c] = compare.compare([cpu, other])
    return c, next(e for e in c.entries if e.device == other.config.device)


def test_the_verdict_states_the_energy_ratio_when_both_runs_have_it():
    from mpsstudio.engine.analysis import verdict

    c, e = _entry(_measured_run("cpu", 300.0, jps=0.127, measure="estimated"),
                  _measured_run("mps", 1200.0, jps=0.031, measure="estimated"))
    assert e.energy_ratio == pytest.approx(0.127 / 0.031)
    text = verdict.sentence(e)
    assert "It used 4.1x less energy per sample than the CPU (31.0 mJ vs 127 mJ per sample; GPU vs CPU, estimated)" in text
    record = verdict.comparison_record(c)
    mps = next(d for d in record["devices"] if d["device"] == "mps")
    assert mps["energy_ratio_vs_cpu"] == pytest.approx(4.0968, rel=1e-3) and mps["energy_measure"] == "estimated"
    assert "less energy per sample" in record["verdict"]


def test_more_energy_and_a_missing_side_are_said_too():
    from mpsstudio.engine.analysis import verdict

    _, e = _entry(_measured_run("cpu", 300.0, jps=0.05), _measured_run("cuda:0", 600.0, jps=0.2))
    assert "It used 4.0x more energy per sample than the CPU" in verdict.sentence(e)
    _, e = _entry(_measured_run("cpu", 300.0, reason="no energy counter readable on this Linux VM"),
                  _measured_run("cuda:0", 600.0, jps=0.2))
    assert ("No energy comparison: the CPU run has no energy figure (no energy counter readable on this Linux VM)"
            in verdict.sentence(e))
    _, e = _entry(_measured_run("cpu", 300.0), _measured_run("cuda:0", 600.0))
    assert "energy" not in verdict.sentence(e)  # neither measured: nothing to say


def test_a_gpu_that_was_rarely_busy_gets_the_hint():
    from mpsstudio.engine.analysis import verdict

    _, e = _entry(_measured_run("cpu", 300.0), _measured_run("cuda:0", 600.0, busy=30.0))
    assert "The GPU was busy only 30 % of the measured time" in verdict.sentence(e)
    _, e = _entry(_measured_run("cpu", 300.0), _measured_run("cuda:0", 600.0, busy=95.0))
    assert "busy only" not in verdict.sentence(e)


def test_energy_columns_say_estimated_and_read_in_units():
    from mpsstudio.engine.history import columns

    run = _measured_run("mps", 1200.0, jps=0.031, measure="estimated", busy=64.0)
    assert columns.cell_text("j_per_sample", run, {}) == "\u224831.0 mJ"
    assert columns.cell_text("avg_power_w", run, {}) == "\u224837.2 W"
    assert columns.cell_text("utilization_percent", run, {}) == "64.0 %"
    cpu = _measured_run("cpu", 300.0, reason="no energy counter readable on this Linux VM")
    assert columns.cell_text("j_per_sample", cpu, {}) == "\u2014"
    assert columns.BY_KEY["energy_reason"].value(cpu, {}) == "no energy counter readable on this Linux VM"


def test_spans_cover_every_measured_window_and_close_at_breaks(tmp_path, monkeypatch):
    """Default spans: about a second each, the last one closed by the run's end; every window covered once,
    warm-up and validation never inside."""
    root = write_rapl(tmp_path / "powercap")
    monkeypatch.setattr(rapl, "POWERCAP", str(root))
    monkeypatch.setattr(sys, "platform", "linux")
    monkeypatch.setattr(meters, "SPAN_S", 0.3)
    result = trainer.run(RunConfig(model="mlp", dataset="synthetic", device="cpu", batch_size=32, epochs=2,
                                   window_s=0.05))
    assert result.status == "finished"
    spans = [w for w in result.windows if w.energy_windows]
    assert sum(w.energy_windows for w in spans) == len(result.windows)
    assert len(spans) >= 2  # closed at the first epoch's end (validation follows) and at the run's end
    assert len(spans) < len(result.windows)  # a span groups the windows of about SPAN_S
    assert result.summary.energy_j == pytest.approx(0.0)  # the fake counter did not move
    assert result.summary.j_per_sample == pytest.approx(0.0) and result.summary.energy_reason is None


def test_a_span_count_that_does_not_fit_the_windows_is_not_trusted():
    windows = energy_windows(1.0, 2.0)
    windows[1]["energy_windows"] = 5
    s = runcheck.run_from_dict(_file_run(windows), "x.json").summary
    assert s.energy_j is None and "do not match" in s.energy_reason
    windows[1]["energy_windows"] = 0
    with pytest.raises(UserError, match="energy_windows"):
        runcheck.run_from_dict(_file_run(windows), "x.json")


def test_the_cli_table_says_what_measured_energy_or_why_not():
    from mpsstudio.cli import format_table

    runs = [_measured_run("cpu", 300.0, reason="no energy counter readable on this Linux VM"),
            _measured_run("cuda:0", 600.0, jps=0.2, busy=90.0)]
    runs[1].summary = runs[1].summary.replaced(energy_source="NVML total-energy counter (GPU 0)",
                           energy_scope="the whole GPU board, idle power included")
    text = format_table(runs)
    assert "J/sample" in text.splitlines()[0] and "200 mJ" in text and "90.0 %" in text
    assert "Energy of cpu: not measured: no energy counter readable on this Linux VM." in text
    assert ("Energy of cuda:0: measured with the NVML total-energy counter (GPU 0): the whole GPU board, idle power "
            "included.") in text


def test_a_stopped_run_keeps_the_energy_of_the_windows_it_ran(tmp_path, monkeypatch):
    root = write_rapl(tmp_path / "powercap")
    monkeypatch.setattr(rapl, "POWERCAP", str(root))
    monkeypatch.setattr(sys, "platform", "linux")
    seen = []
    result = trainer.run(RunConfig(model="mlp", dataset="synthetic", device="cpu", batch_size=16, steps=5000,
                                   warmup_steps=2), on_event=seen.append,
                         should_stop=lambda: sum(type(e).__name__ == "Window" for e in seen) >= 3)
    assert result.status == "cancelled" and len(result.windows) == 3
    assert result.windows[-1].energy_windows == 3  # the open span closed with the last window
    assert result.summary.energy_j == pytest.approx(0.0) and result.summary.energy_reason is None


def test_a_span_that_follows_starts_at_the_last_ones_end_without_reading_again():
    """Tracked GPU windows read the counter once per span (NVML costs ~4 ms a read): a span opened with
    begin(follow=True) starts at the last span's end reading, so spans add up to the counter's whole change."""
    reads = []

    class Counter:
        name, measure, scope = "fake", "counter", "board"
        joules = 100.0

        def read(self):
            reads.append(self.joules)
            return {"gpu": self.joules}

    counter = Counter()
    meter = meters.Meter(part="gpu", counters=[counter], span_s=0.0)
    meter.begin()
    counter.joules = 130.0
    first = meter.end()
    meter.begin(follow=True)
    counter.joules = 175.0
    second = meter.end()
    meter.begin()  # not following (a gap: the CPU's books, a validation): read afresh
    counter.joules = 180.0
    third = meter.end(close=True)
    assert (first.energy_j, second.energy_j, third.energy_j) == (30.0, 45.0, 5.0)
    assert reads == [100.0, 130.0, 175.0, 175.0, 180.0]  # the followed span read only at its end
