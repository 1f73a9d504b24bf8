"""Comparisons that can be trusted: intervals, "no clear difference", each machine's own CPU, repeats, verdicts,
and the stability verdict of one run."""

from __future__ import annotations


import pytest

from mpsstudio.engine.machine import host
from mpsstudio.engine.analysis import stability
from mpsstudio.engine.analysis.compare import bootstrap_ratio, compare
from mpsstudio.engine.basics.config import RunConfig
from mpsstudio.engine.analysis.verdict import comparison_record, verdicts
from tests.support.runs import noisy_rates, run_with
from tests.support.paths import ROOT



def test_stable_run_and_its_spread():
    r = run_with("cpu", noisy_rates(1000, 0.02))
    assert r.summary.stability == "stable" and r.summary.stability_reason is None
    assert r.summary.spread_percent < 10


def test_spread_above_ten_percent_is_noisy_and_says_so():
    r = run_with("cpu", noisy_rates(1000, 0.6))
    assert r.summary.stability == "noisy"
    assert "spread ±" in r.summary.stability_reason and "quiet machine" in r.summary.stability_reason


def test_too_few_windows_is_noisy():
    r = run_with("cpu", [1000.0, 1001.0])
    assert r.summary.stability == "noisy" and "only 2 measurement windows" in r.summary.stability_reason


@pytest.mark.parametrize("env, phrase", [
    ({"host_load": {"other_cpu_percent": 48.0}}, "other programs used 48 % of the CPU"),
    ({"host": {"thermal": "throttled (CPU speed limit 70 %)"}}, "throttled (CPU speed limit 70 %)"),
    ({"host": {"low_power_mode": True}}, "Low Power Mode was on"),
])
def test_host_conditions_make_a_run_noisy_whatever_its_spread(env, phrase):
    r = run_with("cpu", noisy_rates(1000, 0.01), env=env)
    assert r.summary.stability == "noisy" and phrase in r.summary.stability_reason


def test_battery_is_named_only_as_a_possible_cause():
    quiet = run_with("cpu", noisy_rates(1000, 0.01), env={"host": {"on_battery": True}})
    assert quiet.summary.stability == "stable"
    loud = run_with("cpu", noisy_rates(1000, 0.6), env={"host": {"on_battery": True}})
    assert "battery" in loud.summary.stability_reason


def test_pmset_outputs_are_read():
    assert host.thermal_state("Note: No thermal warning level has been recorded\n") == "nominal"
    assert host.thermal_state("CPU_Scheduler_Limit = 100\nCPU_Available_CPUs = 8\nCPU_Speed_Limit = 62\n") \
        == "throttled (CPU speed limit 62 %)"
    assert host.thermal_state("") is None
    assert host.low_power_mode(" sleep 1\n lowpowermode         1\n") is True
    assert host.low_power_mode(" powermode 0\n") is False
    assert host.low_power_mode("garbage") is None


def test_conditions_off_a_mac_record_no_mac_facts(monkeypatch):
    monkeypatch.setattr(host.sys, "platform", "linux")
    out = host.conditions()
    assert out["thermal"] is None and out["low_power_mode"] is None


def test_a_file_cannot_call_a_noisy_run_stable():
    from mpsstudio.engine.analysis.runcheck import run_from_dict

    r = run_with("cpu", noisy_rates(1000, 0.6))
    data = r.to_dict()
    data["summary"]["stability"], data["summary"]["stability_reason"] = "stable", None
    assert run_from_dict(data, "the file").summary.stability == "noisy"


def test_bootstrap_interval_brackets_the_ratio_and_is_deterministic():
    a, b = noisy_rates(3000, 0.05, seed=2), noisy_rates(1000, 0.05, seed=3)
    low, high = bootstrap_ratio(a, b, seed=7)
    assert low < 3.0 < high and high - low < 0.3
    assert bootstrap_ratio(a, b, seed=7) == (low, high)
    assert bootstrap_ratio([1.0], b) is None


def test_equal_devices_say_no_clear_difference():
    cpu = run_with("cpu", noisy_rates(1000, 0.3, seed=4))
    mps = run_with("mps", noisy_rates(1000, 0.3, seed=5))
    [c] = compare([cpu, mps])
    entry = c.entry_of(mps)
    assert entry.low <= 1.0 <= entry.high and entry.unclear()
    [sentence] = verdicts(c)
    assert sentence.startswith("No clear difference between Apple GPU (mps) and the CPU")
    d = comparison_record(c)["devices"][1]
    assert d["no_clear_difference"] is True and d["speedup_low"] <= 1 <= d["speedup_high"]
    assert d["baseline_run"] == cpu.id and d["verdict"] == sentence


def test_faster_device_verdict_names_interval_and_measured_epochs():
    cpu = run_with("cpu", noisy_rates(1000, 0.02, seed=6), epoch_times=(45.0, 39.4, 39.4))
    mps = run_with("mps", noisy_rates(3200, 0.02, seed=7), epoch_times=(14.0, 12.3, 12.3))
    [c] = compare([cpu, mps])
    [sentence] = verdicts(c)
    assert sentence.startswith("Apple GPU (mps) is 3.2")
    assert "faster than the CPU (3." in sentence and "12.3 s vs 39.4 s per epoch (measured)" in sentence


def test_slower_device_names_the_measured_reason():
    cpu = run_with("cpu", noisy_rates(64_000, 0.02, seed=8))  # 1 ms per step
    mps = run_with("mps", noisy_rates(40_000, 0.02, seed=9))  # 1.6 ms per step
    [c] = compare([cpu, mps])
    [sentence] = verdicts(c)
    assert "slower than the CPU" in sentence and "under 2 ms" in sentence and "1.60 ms" in sentence
    assert "estimated from throughput" in sentence


def test_h200_import_is_divided_by_its_own_cpu():
    from mpsstudio.engine.history.runfiles import import_json

    imported = import_json(ROOT / "docs" / "runs" / "h200-default-comparison.json")
    cpu_here = run_with("cpu", noisy_rates(10.0, 0.01), **{k: getattr(imported[0].config, k) for k in (
        "model", "dataset", "batch_size", "precision", "mode", "steps", "epochs", "warmup_steps", "seed")})
    [c] = compare([*imported, cpu_here])
    server_cpu = next(r for r in imported if r.config.device == "cpu")
    assert c.speedups[server_cpu.id] == pytest.approx(1.0)
    assert c.speedups[cpu_here.id] == pytest.approx(1.0)
    server_cuda = next(r for r in imported if r.config.device.startswith("cuda"))
    expected = server_cuda.summary.samples_per_s / server_cpu.summary.samples_per_s
    assert c.speedups[server_cuda.id] == pytest.approx(expected)
    assert any(s.startswith("On H200 on vm, CUDA GPU") and "its CPU" in s for s in verdicts(c))


def test_repeat_rounds_pair_with_their_own_round():
    runs = []
    for k, (cpu_rate, mps_rate) in enumerate([(1000, 3000), (500, 1600), (1000, 3300)], start=1):
        rep = {"repeat": {"set": "abc", "round": k, "rounds": 3}}
        runs += [run_with("cpu", noisy_rates(cpu_rate, 0.01, seed=k), env=rep),
                 run_with("mps", noisy_rates(mps_rate, 0.01, seed=10 + k), env=rep)]
    lone = run_with("mps", noisy_rates(5000, 0.01))  # not in the set: not in its comparison
    comparisons = compare([*runs, lone])
    [c] = [c for c in comparisons if c.repeat]
    entry = [e for e in c.entries if e.device == "mps"][0]
    assert entry.method == "paired" and len(entry.runs) == 3
    assert entry.speedup == pytest.approx(3.2, rel=0.02)  # median of ~3.0, ~3.2, ~3.3
    assert entry.low == pytest.approx(3.0, rel=0.03) and entry.high == pytest.approx(3.3, rel=0.03)
    assert "median of 3 paired rounds" in verdicts(c)[0]
    assert lone.id not in c.speedups


def test_stability_thresholds_are_the_documented_ones():
    doc = (ROOT / "docs" / "architecture.md").read_text()
    assert f"{stability.SPREAD_LIMIT:.0%}".replace("%", " %") in doc
    assert f"{stability.HOST_BUSY_PERCENT:.0f} %" in doc and f"{stability.MIN_WINDOWS} " in doc


# ---- hostile files: what a comparison shows must rest on the numbers themselves ---------------------------

def _import(tmp_path, runs):
    import json

    from mpsstudio.engine.history.runfiles import JSON_FORMAT, JSON_VERSION, import_json

    path = tmp_path / "runs.json"
    path.write_text(json.dumps({"format": JSON_FORMAT, "version": JSON_VERSION,
                                "runs": [r if isinstance(r, dict) else r.to_dict() for r in runs]}))
    return import_json(path)


def test_a_summary_cannot_hide_what_its_windows_measured(tmp_path):
    data = run_with("cpu", [10.0, 5000.0, 20.0, 9000.0, 5000.0, 30.0]).to_dict()
    data["summary"].update(samples_per_s=1920.0, samples_per_s_iqr=0.0, spread_percent=0.0, stability="stable")
    [back] = _import(tmp_path, [data])
    assert back.summary.stability == "noisy" and back.summary.samples_per_s == pytest.approx(2515.0)
    assert back.summary.spread_percent > 100


def test_a_window_of_zero_throughput_is_refused(tmp_path):
    from mpsstudio.engine.basics.errors import UserError

    data = run_with("cpu", noisy_rates(100, 0.01)).to_dict()
    data["windows"][2]["samples_per_s"] = 0
    with pytest.raises(UserError, match=r"windows\[2\].samples_per_s"):
        _import(tmp_path, [data])


def test_two_computers_with_one_label_are_told_apart_by_host_name():
    mac = {"machine_label": "Apple M2 Pro, macOS 14.5", "chip": "Apple M2 Pro"}
    bob_cpu = run_with("cpu", noisy_rates(100, 0.01), env={**mac, "hostname": "bob-mbp"}, origin="imported")
    alice_mps = run_with("mps", noisy_rates(800, 0.01, seed=2), env={**mac, "hostname": "alice-mbp"})
    [c] = compare([bob_cpu, alice_mps])
    assert c.speedups[alice_mps.id] is None  # never divided by Bob's CPU
    assert {e.machine for e in c.entries} == {"Apple M2 Pro, macOS 14.5 (bob-mbp)",
                                               "Apple M2 Pro, macOS 14.5 (alice-mbp)"}


def test_a_repeat_pairs_one_run_per_round_and_ignores_unsound_tags():
    def tagged(device, rate, k, rounds=2, seed=0):
        return run_with(device, noisy_rates(rate, 0.01, seed=seed), env={"repeat": {"set": "S", "round": k,
                                                                                    "rounds": rounds}})
    runs = [tagged("cpu", 100, 1), tagged("cpu", 100, 2, seed=1)]
    runs += [tagged("cuda:0", 500 + 100 * i, 1, seed=10 + i) for i in range(10)]  # ten runs claiming round 1
    [c] = compare(runs)
    cuda = [e for e in c.entries if e.device == "cuda:0"][0]
    assert len(cuda.runs) == 1 and cuda.method == "bootstrap"  # one round paired: a single pair
    assert "rounds" not in c.title()
    for bad in ({"set": "S", "round": -4, "rounds": 2}, {"set": "S", "round": True, "rounds": 2},
                {"set": "S", "round": 1, "rounds": 10**17}, {"set": "", "round": 1, "rounds": 2}):
        r = run_with("mps", noisy_rates(300, 0.01), env={"repeat": bad})
        assert all(not c.repeat for c in compare([runs[0], r]))


def test_host_facts_that_are_not_measurements_are_ignored(tmp_path):
    for env in ({"host_load": {"other_cpu_percent": 1e18}}, {"host_load": {"other_cpu_percent": -50}},
                {"host": {"thermal": "hot"}}, {"host": {"thermal": ""}}, {"host": {"low_power_mode": "yes"}}):
        r = run_with("cpu", noisy_rates(1000, 0.01), env=env)
        assert r.summary.stability == "stable", env
    data = run_with("cpu", noisy_rates(1000, 0.01), env={"host": {"thermal": "z" * 9999}}).to_dict()
    [back] = _import(tmp_path, [data])  # kept readable: its reason is not built from the file's text
    assert back.summary.stability == "stable"


def test_a_verdict_from_another_machine_reads_as_one_sentence():
    env = {"machine_label": "Apple M3, macOS 15"}
    cpu = run_with("cpu", noisy_rates(100, 0.3, seed=1), env=env, origin="imported")
    mps = run_with("mps", noisy_rates(100, 0.3, seed=2), env=env, origin="imported")
    [c] = compare([cpu, mps])
    assert verdicts(c)[0].startswith("On Apple M3, no clear difference between")


# ---- CUDA in full fp32: explained wherever the run is shown (one wording: config.TF32_NOTE) ------------------

def test_only_a_cuda_run_in_full_fp32_carries_the_tf32_note():
    from mpsstudio.engine.basics.config import TF32_NOTE, precision_note

    assert precision_note(RunConfig(device="cuda:0")) == TF32_NOTE
    assert "PyTorch's default lets cuDNN run convolutions in TF32" in TF32_NOTE and "--tf32" in TF32_NOTE
    for cfg in (RunConfig(device="cuda:0", tf32=True), RunConfig(device="cuda:1", precision="bf16"),
                RunConfig(device="cpu"), RunConfig(device="mps")):
        assert precision_note(cfg) == ""
    assert run_with("cuda:0", [100.0] * 8).summary.precision_note == TF32_NOTE
    assert run_with("cpu", [100.0] * 8).summary.precision_note == ""


def test_a_cuda_comparison_s_verdict_and_an_import_say_why_tf32_was_off(tmp_path):
    from mpsstudio.engine.basics.config import TF32_NOTE

    cpu, gpu = run_with("cpu", [100.0] * 10, machine="H100 box"), run_with("cuda:0", [900.0] * 10, machine="H100 box")
    [c] = compare([cpu, gpu])
    lines = verdicts(c)
    assert lines[-1] == TF32_NOTE and sum(line == TF32_NOTE for line in lines) == 1
    data = gpu.to_dict()
    data["summary"]["precision_note"] = "TF32 was on."  # a file cannot say otherwise than its config
    [back] = _import(tmp_path, [data])
    assert back.summary.precision_note == TF32_NOTE
    [c] = compare([run_with("cpu", [100.0] * 10), run_with("mps", [300.0] * 10)])
    assert TF32_NOTE not in verdicts(c)


def test_a_repeat_whose_rounds_fell_in_two_modes_says_so_beside_its_verdict():
    """pytorch#182815's shape in a repeat: 2 of 6 processes on mps ran at ~0.6x; the verdict says the two modes and
    that the interval spans both; six steady rounds say nothing of modes."""
    def tagged(device, rate, k):
        return run_with(device, noisy_rates(rate, 0.005, seed=k), env={"repeat": {"set": "S", "round": k,
                                                                                   "rounds": 6}})
    rates = [2000, 1230, 2010, 1990, 1250, 2005]
    runs = [tagged("cpu", 500, k) for k in range(1, 7)] + [tagged("mps", r, k) for k, r in enumerate(rates, 1)]
    [c] = compare(runs)
    said = " ".join(verdicts(c))
    assert "The 6 rounds on mps fell in two modes: 2 of 6 at 0.62x the others' samples/s (" in said, said
    assert "; the interval spans both." in said and "rounds on cpu fell" not in said
    steady = [tagged("cpu", 500, k) for k in range(1, 7)] + [tagged("mps", 2000 + k, k) for k in range(1, 7)]
    assert "two modes" not in " ".join(verdicts(compare(steady)[0]))
