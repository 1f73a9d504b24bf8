"""What a user on an Apple Silicon Mac meets, end to end on a faked Mac whose GPU behaves like torch's MPS
(tests/support/fake_mps.py): the fake itself, the parity check, bench, the window's MPS run, sweep, max-batch, inspect,
the setup window, energy and host readers that fail, the minimum macOS, the MPS environment variables, and
torch.compile's label."""

from __future__ import annotations

import json
import math
import os
import platform
import subprocess
import sys

import pytest
import torch

from mpsstudio import cli
from mpsstudio.engine.machine import apple, devices, environment, host
from mpsstudio.engine.models import registry as models
from mpsstudio.engine.tools import opcheck
from mpsstudio.engine.run import session
from mpsstudio.engine.basics.config import RunConfig
from mpsstudio.engine.basics.spec import DataSpec
from mpsstudio.engine.history.store import RunStore
from tests.support.fake_mps import C128_ERROR, F64_ERROR, MIXED_ERROR, NUMPY_ERROR, FakeAppleMonitor, FakeMPSTensor
from tests.support.paths import ROOT



# ---------------------------------------------------------------- the fake refuses what MPS refuses


def test_the_faked_gpu_refuses_what_mps_refuses(fake_mps):
    fake_mps()
    x = torch.ones(4, 3).to("mps")
    assert isinstance(x, FakeMPSTensor) and x.device.type == "mps" and x.is_mps
    for make in (lambda: torch.zeros(2, device="mps", dtype=torch.float64), lambda: x.double(),
                 lambda: x.to(torch.float64), lambda: torch.ones(2, dtype=torch.float64).to("mps")):
        with pytest.raises(TypeError, match="Cannot convert a MPS Tensor to float64 dtype"):
            make()
    with pytest.raises(TypeError, match="does not have support for that dtype"):
        torch.zeros(2, device="mps", dtype=torch.complex128)
    with pytest.raises(RuntimeError, match="Expected all tensors to be on the same device"):
        x + torch.ones(4, 3)
    with pytest.raises(TypeError, match="can't convert mps:0 device type tensor to numpy"):
        x.numpy()
    assert (x * 2 + torch.tensor(1.0)).cpu().tolist() == [[3.0] * 3] * 4  # 0-dim CPU tensors mix, as in torch
    assert x.cpu().double().dtype == torch.float64  # the right way: copy, then convert on the CPU
    assert {F64_ERROR, C128_ERROR, MIXED_ERROR, NUMPY_ERROR}  # the messages copied from torch (see the module)


@pytest.mark.parametrize("version, copies", [((2, 13), "raises"), ((2, 14), "nothing")])
def test_a_device_tensor_copied_to_float64_in_one_op(fake_mps, version, copies):
    """pytorch#197715: torch <= 2.13 raises; 2.14.0-2.14.1 return a float64 tensor into which nothing was copied."""
    fake_mps(torch_version=version)
    x = torch.full((3,), 2.5).to("mps")
    if copies == "raises":
        with pytest.raises(TypeError, match="float64"):
            x.to("cpu", torch.float64)
    else:
        assert x.to("cpu", torch.float64).tolist() == [0.0, 0.0, 0.0]


def test_memory_figures_are_ints_in_bytes_and_the_fraction_is_checked_as_torch_does(fake_mps):
    fake = fake_mps()
    before = torch.mps.current_allocated_memory()
    block = torch.empty(256, 1024, device="mps")  # 1 MiB
    assert type(torch.mps.current_allocated_memory()) is int
    assert torch.mps.current_allocated_memory() - before == 1 << 20
    assert torch.mps.driver_allocated_memory() >= torch.mps.current_allocated_memory()
    with pytest.raises(TypeError, match="must be `float`"):
        torch.mps.set_per_process_memory_fraction(1)
    with pytest.raises(ValueError, match="Allowed range: 0~2"):
        torch.mps.set_per_process_memory_fraction(2.5)
    torch.mps.set_per_process_memory_fraction(0.5)
    assert fake.fraction == 0.5
    del block


# ---------------------------------------------------------------- the parity check


def _parity(noise: float, noise_in: str = "all") -> dict:
    torch.manual_seed(0)
    base = models.build_model("mlp", DataSpec(kind="image", num_classes=10, channels=1, height=28, width=28))
    x, y = torch.rand(8, 1, 28, 28), torch.randint(0, 10, (8,))
    return opcheck.parity_of(base, x, y, torch.device("mps"), "fp32", False, torch.mps.synchronize, "mps")


@pytest.mark.parametrize("version", [(2, 13), (2, 14)])
def test_parity_reports_the_real_error_of_a_gpu_that_adds_noise(fake_mps, version):
    """The device adds a relative 1e-3 to every matrix product of the forward pass: the check reports that error in
    the logits (on main it reported ~100 % in 2.14 and raised in 2.13: it copied to float64 in one op)."""
    fake = fake_mps(noise=1e-3, noise_in="forward", torch_version=version)
    result = _parity(1e-3)
    assert 3e-4 < result["logits_max_rel_err"] < 3e-3  # the noise, measured
    assert result["loss_ok"] and result["loss_rel_err"] < 1e-3
    assert all(math.isfinite(g["max_rel_err"]) and g["max_rel_err"] < 1.0 for g in result["grads"])
    assert fake.syncs >= 1


@pytest.mark.parametrize("version", [(2, 13), (2, 14)])
def test_parity_passes_on_a_gpu_whose_arithmetic_differs_slightly(fake_mps, version):
    """A GPU whose every product differs from the CPU's by a relative 1e-5 (another summation order) passes, and
    the error it reports is that difference, not zero."""
    fake_mps(noise=1e-5, torch_version=version)
    result = _parity(1e-5)
    assert result["ok"], result
    assert 1e-6 < result["logits_max_rel_err"] < 3e-5
    assert 1e-6 < result["worst_rel_err"] < opcheck.TOLERANCES["fp32"]


# ---------------------------------------------------------------- every MPS path on the faked Mac


def test_bench_on_a_mac_compares_cpu_and_mps_and_inspects_the_mps_run(fake_mps, capsys, tmp_path):
    fake_mps(noise=1e-3)
    out = tmp_path / "runs.json"
    code = cli.main(["bench", "--model", "mlp", "--dataset", "synthetic", "--devices", "cpu,mps", "--batch-size",
                     "16", "--steps", "24", "--warmup", "2", "--json", str(out)])
    stdout, stderr = capsys.readouterr()
    assert code == cli.EXIT_OK, stderr
    doc = json.loads(out.read_text())
    cpu, mps = doc["runs"]
    assert (cpu["config"]["device"], mps["config"]["device"]) == ("cpu", "mps")
    assert cpu["status"] == mps["status"] == "finished"
    assert mps["summary"]["memory_measure"] == "peak_allocated" and type(mps["summary"]["peak_memory"]) is int
    # PyTorch's peak (torch.accelerator over the allocator's stats) holds a step's activations, freed by a window's end
    assert mps["summary"]["peak_memory"] > max(w["memory"] for w in mps["windows"])
    assert mps["env"]["machine_label"].startswith("Apple M1 Pro") and "macOS 14.5" in mps["env"]["machine_label"]
    assert mps["summary"]["energy_measure"] == "estimated" and mps["summary"]["j_per_sample"] > 0
    [inspection] = [t for t in RunStore().tools() if t.kind == "inspect"]
    assert inspection.result["parity"]["ok"] and inspection.result["parity"]["worst_rel_err"] < 1e-2
    assert "beyond tolerance" not in stdout and "Apple GPU (mps)" in stdout


def test_sweep_max_batch_and_inspect_on_mps(fake_mps, capsys, tmp_path):
    fake_mps()
    assert cli.main(["sweep", "--model", "mlp", "--dataset", "synthetic", "--devices", "mps", "--batch-sizes",
                     "4,8", "--steps", "8", "--warmup", "1", "--no-save"]) == cli.EXIT_OK
    out = capsys.readouterr().out
    assert "Best throughput: mps at batch" in out or "Best throughput: mps: no clear best between batch" in out
    mb = tmp_path / "mb.json"
    assert cli.main(["max-batch", "--model", "mlp", "--dataset", "synthetic", "--device", "mps", "--max-batch",
                     "16", "--no-save", "--json", str(mb)]) == cli.EXIT_OK
    doc = json.loads(mb.read_text())
    assert doc["largest_batch"] >= 1 and all(type(p["memory"]) is int for p in doc["probes"] if p["fits"])
    found = tmp_path / "in.json"
    assert cli.main(["inspect", "--model", "mlp", "--dataset", "synthetic", "--device", "mps", "--no-save",
                     "--json", str(found)]) == cli.EXIT_OK
    doc = json.loads(found.read_text())
    assert doc["probe"]["ok"] and doc["parity"]["ok"] and doc["fallback_applies"] is True
    assert doc["fallback_ops"] == [] and doc["missing_ops"] == []
    assert {o["kind"] for o in doc["ops"]} <= {"native", "composite"}


def test_max_batch_on_mps_finds_the_allocator_s_own_boundary(fake_mps, monkeypatch):
    """The search caps the MPS allocator at the limit (set_per_process_memory_fraction of the recommended maximum),
    so the largest batch is the last before a real "MPS backend out of memory", found exactly."""
    from mpsstudio.engine.tools import maxbatch

    fake = fake_mps(recommended_max=64 << 20)
    fractions = []
    real_set = fake._set_fraction
    monkeypatch.setattr(torch._C, "_mps_setMemoryFraction", lambda f: (fractions.append(f), real_set(f)))
    r = maxbatch.search(RunConfig(model="mlp", dataset="synthetic", device="mps", seed=1), memory_limit=24 << 20)
    assert fractions == [0.375, 1.7]  # capped at 24 MiB of the 64 MiB recommended, then lifted to torch's default
    assert "the MPS allocator capped at 24.0 MiB (torch.mps.set_per_process_memory_fraction(0.3750))" == \
        r["limit_enforced"]
    failed = r["smallest_failed"]
    assert r["largest_batch"] > 8 and failed["batch_size"] == r["largest_batch"] + 1
    assert failed["why"] == "out of memory" and failed["reason"].startswith("out of memory (under the 24.0 MiB cap, ")
    assert "MPS backend out of memory (MPS allocated:" in failed["reason"]
    assert all(p["memory_measure"] != "predicted" for p in r["probes"])  # the allocator decides: nothing predicted


def test_max_batch_on_mps_never_asks_more_than_the_allocator_can_allow(fake_mps):
    from mpsstudio.engine.tools import maxbatch, toolkit

    fake_mps(recommended_max=64 << 20)
    setup = toolkit.prepare(RunConfig(model="mlp", dataset="synthetic", device="mps"))
    assert maxbatch.limit_for(setup, None) == (64 << 20, "torch.mps.recommended_max_memory()")
    limit, source = maxbatch.limit_for(setup, 1 << 30)
    assert limit == 128 << 20 and "lowered to 2x torch.mps.recommended_max_memory()" in source
    with pytest.raises(ValueError, match="Allowed range: 0~2"):  # what torch says past its ceiling
        torch.mps.set_per_process_memory_fraction(2.5)


def test_inspect_names_the_operations_that_fall_back_to_the_cpu(fake_mps, capsys, tmp_path):
    fake_mps(fallback_ops=("aten::addmm",))
    found = tmp_path / "in.json"
    assert cli.main(["inspect", "--model", "mlp", "--dataset", "synthetic", "--device", "mps", "--no-save",
                     "--json", str(found)]) == cli.EXIT_OK
    doc = json.loads(found.read_text())
    assert [o["op"] for o in doc["fallback_ops"]] == ["aten::addmm"]
    assert "ran on the CPU" in capsys.readouterr().out or doc["fallback_share"] is not None


def test_a_virtual_mac_s_gpu_fails_its_check_before_any_model_code(fake_mps, capsys):
    fake_mps(broken="oom")
    code = cli.main(["bench", "--model", "mlp", "--dataset", "synthetic", "--devices", "mps", "--steps", "4",
                     "--no-save", "--no-inspect"])
    out, err = capsys.readouterr()
    assert code == cli.EXIT_RUN_FAILED
    assert "mps is available but not working" in err and "MPS backend out of memory" in err
    assert "smaller batch" not in err


# ---------------------------------------------------------------- meters that fail never fail a run


@pytest.mark.parametrize("fail_on, error", [({1}, RuntimeError), ({3}, ValueError), ({"all"}, RuntimeError)])
def test_an_energy_monitor_that_raises_leaves_the_run_measuring(fake_mps, fail_on, error, monkeypatch):
    from mpsstudio.engine.machine.energy import meter

    fake = fake_mps(monitor=FakeAppleMonitor(fail_on=fail_on, error=error))
    monkeypatch.setattr(meter.Meter, "idle", lambda self, seconds=None: (None, 0.0, "not read in this test"))
    cfg = RunConfig(model="mlp", dataset="synthetic", device="mps", batch_size=16, steps=24, epochs=None,
                    warmup_steps=2)
    [result] = session.run_configs([cfg])
    assert result.status == "finished", result.error
    assert result.summary.samples_per_s > 0
    s = result.summary
    if fail_on & {1, "all"}:  # at set-up: no energy source, and why
        assert s.j_per_sample is None and "macOS's energy counters could not be read" in s.energy_reason
        assert "IOReport" in s.energy_reason
    else:  # mid-run: the run's energy is all of its spans or nothing, and says why
        assert s.j_per_sample is None and "could not be read in" in s.energy_reason
    assert fake.monitor.readings >= 1


def test_an_idle_reading_that_fails_leaves_the_energy_measured(fake_mps, monkeypatch):
    from mpsstudio.engine.machine.energy import meter

    monkeypatch.setattr(meter, "IDLE_S", 0.05)
    fake = fake_mps()
    real_idle = meter.Meter.idle

    def failing_idle(self, seconds=None):  # macOS refuses every reading of the idle window, then recovers
        fake.monitor.fail_on = {"all"}
        try:
            return real_idle(self, seconds)
        finally:
            fake.monitor.fail_on = set()
    monkeypatch.setattr(meter.Meter, "idle", failing_idle)
    cfg = RunConfig(model="mlp", dataset="synthetic", device="mps", batch_size=16, steps=24, epochs=None,
                    warmup_steps=2)
    [result] = session.run_configs([cfg])
    s = result.summary
    assert result.status == "finished" and s.j_per_sample > 0 and fake.monitor.readings > 2
    assert s.idle_w is None and s.j_per_sample_above_idle is None
    assert s.idle_reason == "the energy counter could not be read"


def test_utilisation_and_host_readers_that_raise_leave_the_run_measuring(fake_mps, monkeypatch):
    from mpsstudio.engine.machine.energy import ioreport

    fake_mps()
    calls = []

    def ioreg():
        calls.append(1)
        if len(calls) > 1:
            raise UnicodeDecodeError("utf-8", b"\xff", 0, 1, "invalid start byte")
        return '"Device Utilization %"=40'
    monkeypatch.setattr(ioreport, "_ioreg", ioreg)
    monkeypatch.setattr(host, "_pmset", lambda *a: (_ for _ in ()).throw(ValueError("bad pmset")))
    monkeypatch.setattr(host, "process_thermal_state", lambda: (_ for _ in ()).throw(OSError("no Foundation")))
    monkeypatch.setattr(host.psutil, "sensors_battery", lambda: (_ for _ in ()).throw(SystemError("no battery")))
    monkeypatch.setattr(host.psutil, "cpu_times", lambda *a, **k: (_ for _ in ()).throw(PermissionError("no")))
    cfg = RunConfig(model="mlp", dataset="synthetic", device="mps", batch_size=16, steps=24, epochs=None,
                    warmup_steps=2)
    [result] = session.run_configs([cfg])
    assert result.status == "finished", result.error
    hostinfo = result.env["host"]
    assert hostinfo["thermal"] is None and hostinfo["on_battery"] is None
    assert "NSProcessInfo.thermalState (OSError)" in hostinfo["unreadable"]
    assert "pmset -g (ValueError)" in hostinfo["unreadable"] and "the battery state" in hostinfo["unreadable"]
    assert result.env.get("host_load") is None  # other programs' CPU use: unknown, not zero


def test_a_meter_that_raises_while_it_is_set_up_is_a_reason_not_a_failure(monkeypatch):
    from mpsstudio.engine.machine.energy import meter

    def explode(*a, **k):
        raise OSError("dlopen failed")
    monkeypatch.setattr(meter, "_meter_for", explode)
    found = meter.meter_for("cuda", 0, None)
    assert found.counters == [] and found.reason == "the energy meter could not be set up (dlopen failed)"


def test_apple_silicon_s_thermal_state_is_nsprocessinfo_s_never_pmset_s_silence(fake_mps, monkeypatch):
    """pmset's CPU_Speed_Limit is an Intel Mac's: on Apple silicon `pmset -g therm` says only that nothing was
    recorded, which once read "nominal". There the state is NSProcessInfo's, and a Mac at "serious" is a noisy run."""
    fake_mps(thermal="thermal state serious")
    monkeypatch.setattr(host, "_pmset", lambda *a: "Note: No thermal warning level has been recorded\n")
    out = host.conditions()
    assert out["thermal"] == "thermal state serious" and "unreadable" not in out
    from mpsstudio.engine.analysis import stability

    assert stability.host_causes({"host": out}) == ["the Mac reported its thermal state as serious"]
    assert stability.host_causes({"host": {"thermal": "thermal state fair"}}) == []  # "slightly elevated"
    monkeypatch.setattr(host, "process_thermal_state", lambda: (_ for _ in ()).throw(OSError("no Foundation")))
    assert host.conditions()["thermal"] is None  # unknown, not the "nominal" pmset's silence would say
    monkeypatch.setattr(platform, "machine", lambda: "x86_64")  # an Intel Mac: pmset, as before
    assert host.conditions()["thermal"] == "nominal"


def test_the_setup_window_names_a_reader_that_failed(fake_mps, monkeypatch):
    fake_mps()
    monkeypatch.setattr(host, "_pmset", lambda *a: (_ for _ in ()).throw(ValueError("bad")))
    monkeypatch.setattr(host, "process_thermal_state", lambda: (_ for _ in ()).throw(OSError("no Foundation")))
    rows = {r.name: r for r in environment.setup_rows({})}
    assert rows["Thermal state"].value == "unknown (NSProcessInfo.thermalState could not be read)"
    assert rows["Low Power Mode"].value == "unknown (pmset -g could not be read)"
    assert rows["Apple GPU (MPS)"].ok is True and rows["Chip"].value == "Apple M1 Pro · 16-core GPU"


# ---------------------------------------------------------------- the minimum macOS, in one place


def test_no_place_names_12_3_as_the_minimum_and_readme_names_each_torch_s():
    pinned = apple.pinned_torch((ROOT / "constraints.txt").read_text())
    assert apple.mps_min_macos(pinned) == (14, 0)  # the app's bundle
    readme = (ROOT / "README.md").read_text()
    assert "(Apple Silicon, macOS 14.0 or later" in readme
    for release, macos, _ in apple.MPS_MACOS_BY_TORCH:  # the pip user's table
        assert f"| {release[0]}.{release[1]}" in readme and f"| macOS {apple.macos_text(macos)} |" in readme
    for path in [*ROOT.joinpath("mpsstudio").rglob("*.py"), *ROOT.joinpath("packaging").glob("*"), ROOT / "README.md",
                 *ROOT.joinpath("docs", "guide").glob("*.md")]:
        if path.is_file():
            text = path.read_text(errors="replace")
            assert "macOS 12.3 or" not in text and "12.3+" not in text, path
            assert not ("LSMinimumSystemVersion" in text and '"12.3"' in text), path


def test_on_macos_13_6_the_window_says_macos_14_and_how_to_update(fake_mps):
    fake_mps(macos="13.6", available=False)
    found = devices.discover_devices()
    banner = devices.mps_banner(found)
    assert banner.startswith("The Apple GPU (MPS) cannot be used: macOS 14.0 or newer is needed")
    assert "this Mac runs macOS 13.6" in banner and "Update to macOS 14 Sonoma or later" in banner
    rows = {r.name: r for r in environment.setup_rows({})}
    assert rows["Apple GPU (MPS)"].ok is False and "macOS 14.0" in rows["Apple GPU (MPS)"].value
    assert "Software Update" in rows["Apple GPU (MPS)"].fix


# ---------------------------------------------------------------- environment variables torch reads


@pytest.mark.parametrize("value, reads", [("1", True), ("0", True), (" 1", True), ("-3", True), ("1abc", True),
                                          ("true", False), ("", False), ("yes", False), ("  ", False),
                                          ("99999999999", False), ("+", False), ("0x1", True)])
def test_stoi_reads_what_std_stoi_reads(value, reads):
    assert apple.stoi_reads(value) is reads


@pytest.mark.parametrize("value, becomes, said", [("1", "1", False), ("0", "0", False), ("true", "1", True),
                                                  ("", "0", True), ("off", "0", True), ("maybe", "1", True)])
def test_a_fallback_value_torch_2_7_would_abort_on_is_corrected(value, becomes, said):
    env = {apple.FALLBACK_VAR: value}
    sentence = apple.correct_fallback_env(env, torch_version="2.7.1")
    assert env[apple.FALLBACK_VAR] == becomes
    assert bool(sentence) is said
    if said:
        assert sentence.startswith(f"PYTORCH_ENABLE_MPS_FALLBACK was {value!r}") and sentence.endswith("to choose.")


@pytest.mark.parametrize("value, on", [(None, False), ("0", False), ("", True), ("00", True), (" 0", True),
                                       ("false", True), ("1", True), ("true", True)])
def test_from_torch_2_8_only_unset_or_0_is_off_and_nothing_is_corrected(value, on):
    """torch 2.8+ compares the value with "0" (the ledger's fallback-variable row checks the init's code): nothing
    aborts, so nothing is changed, and what is on is said as torch will do it."""
    env = {} if value is None else {apple.FALLBACK_VAR: value}
    assert apple.correct_fallback_env(env, torch_version="2.14.1") is None and env.get(apple.FALLBACK_VAR) == value
    assert apple.fallback_enabled(env, torch_version="2.14.1") is on
    # before 2.8 std::stoi reads it: only a number other than 0 is on ("true" and "" are no number at all)
    assert apple.fallback_enabled(env, torch_version="2.7.1") is (value == "1")


def test_the_command_corrects_it_before_torch_is_imported_only_for_a_torch_that_would_abort(tmp_path):
    code = ("import sys; from mpsstudio import launcher; launcher.prepare_environment(); "
            "import os; print(os.environ['PYTORCH_ENABLE_MPS_FALLBACK'], 'torch' in sys.modules)")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60,
                          env={**os.environ, "PYTORCH_ENABLE_MPS_FALLBACK": "true"})
    assert done.stdout.split() == ["true", "False"] and done.stderr == ""  # torch 2.14 here: it reads "true" as on


def test_every_mps_variable_torch_reads_is_recorded_with_a_run(monkeypatch):
    for name, value in (("PYTORCH_MPS_FAST_MATH", "1"), ("PYTORCH_MPS_PREFER_METAL", "1"),
                        ("PYTORCH_MPS_LOW_WATERMARK_RATIO", "1.2"), ("PYTORCH_MPS_HIGH_WATERMARK_RATIO", "1.7")):
        monkeypatch.setenv(name, value)
    recorded = environment.environment()["env"]
    assert {k: recorded[k] for k in recorded if k.startswith("PYTORCH_MPS")} == {
        "PYTORCH_MPS_FAST_MATH": "1", "PYTORCH_MPS_PREFER_METAL": "1", "PYTORCH_MPS_LOW_WATERMARK_RATIO": "1.2",
        "PYTORCH_MPS_HIGH_WATERMARK_RATIO": "1.7"}


# ---------------------------------------------------------------- torch.compile on MPS is labelled


def test_compile_on_mps_is_labelled_as_pytorch_s_prototype(fake_mps, capsys):
    fake_mps()
    cfg = RunConfig(model="mlp", dataset="synthetic", compile=True)
    assert session.plan(cfg, ["cpu", "mps"]).notes == [apple.MPS_COMPILE_NOTE]
    assert session.plan(cfg, ["cpu"]).notes == []
    assert session.plan(RunConfig(model="mlp", dataset="synthetic"), ["mps"]).notes == []
    assert "early prototype" in apple.MPS_COMPILE_NOTE


def test_the_install_guide_says_what_compile_needs_in_the_app():
    readme = (ROOT / "docs" / "guide" / "install.md").read_text()
    assert "the app carries no compiler" not in readme
    assert "torch/include/c10/metal" in readme and "early prototype" in readme
    assert math.isfinite(1.0)


# ---------------------------------------------------------------- the window on a faked Mac


def test_the_window_compares_cpu_and_mps_and_inspects_the_mps_run(qtbot, fake_mps):
    pytest.importorskip("PySide6")
    from tests.support.gui import SHORT, open_window

    fake_mps(noise=1e-5)
    w = open_window(qtbot, keep_spare=False)
    found = {d.id: d for d in w.state.catalog["devices"]}
    assert found["mps"].available and w.state.catalog["checks"]["mps"].ok and not w.state.catalog["mps_banner"]
    w.setup.apply_config(SHORT, devices=["cpu", "mps"])
    assert w.setup.checked_devices() == ["cpu", "mps"]
    w.start_run()
    qtbot.waitUntil(lambda: w.state.run_job is None, timeout=120_000)
    cpu, mps = w.state.run_ended
    assert (cpu.config.device, mps.config.device) == ("cpu", "mps")
    assert cpu.status == mps.status == "finished", (cpu.error, mps.error)
    assert mps.summary.memory_measure == "peak_allocated" and mps.summary.energy_measure == "estimated"
    said = w.statusBar().currentMessage()  # the comparison's answer
    qtbot.waitUntil(lambda: any(t.kind == "inspect" for t in w.store.tools()) and w.state.tool_job is None,
                    timeout=60_000)
    [inspection] = [t for t in w.store.tools() if t.kind == "inspect"]
    assert inspection.result["parity"]["ok"] and inspection.result["device"] == "mps"
    # the automatic inspection never takes the user away from the comparison: a badge, the same status line
    assert w.tabs.currentWidget() is w.results and w.statusBar().currentMessage() == said
    assert w.tabs.tabText(w.tabs.indexOf(w.tools)) == "Tools \u2022"
    w.tabs.setCurrentWidget(w.tools)
    assert w.tabs.tabText(w.tabs.indexOf(w.tools)) == "Tools"
    w.close()


def test_the_setup_window_on_macos_13_6_says_which_update_to_make(qtbot, fake_mps):
    pytest.importorskip("PySide6")
    from tests.support.gui import open_window

    fake_mps(macos="13.6", available=False)
    w = open_window(qtbot, keep_spare=False)
    assert "macOS 14.0 or newer is needed" in w.state.catalog["mps_banner"]
    w.show_doctor()
    table = w.dialogs.setup_window.table
    row = next(i for i in range(table.rowCount()) if table.item(i, 1).text() == "Apple GPU (MPS)")
    assert table.item(row, 0).text() == "\u2715" and "this Mac runs macOS 13.6" in table.item(row, 2).text()
    assert table.item(row, 3).text().startswith("Update to macOS 14 Sonoma or later")
    w.dialogs.setup_window.close()
    w.close()


def test_the_window_s_spare_is_made_for_the_first_checked_device(qtbot, fake_mps):
    pytest.importorskip("PySide6")
    from tests.support.gui import SHORT, open_window

    fake_mps()
    w = open_window(qtbot)
    try:
        w.setup.apply_config(SHORT, devices=["cpu"])
        qtbot.waitUntil(lambda: w.spare.device == "cpu", timeout=10_000)
        w.setup.apply_config(SHORT.with_device("mps"), devices=["mps"])
        qtbot.waitUntil(lambda: w.spare.device == "mps", timeout=10_000)  # replaced: a spare for mps now
        assert w.spare.wait_ready(30)
        proc = w.spare.take(True, "mps")
        assert proc is not None and proc.device == "mps"
        proc.end()
    finally:
        w.close()
