"""Contrasts: runs compared by what differs between them (settings, device, environment), with intervals."""

from __future__ import annotations

import re

from mpsstudio.engine.analysis import contrast, differences
from tests.support.runs import noisy_rates, run_with

MAC = {"machine_label": "Apple M3 Max, macOS 14.5", "chip": "Apple M3 Max", "os": "macOS 14.5",
       "macos_build": "23F79", "hostname": "studio", "python": "3.11.7", "torch": "2.14.1", "torch_git": "aaa",
       "host": {"on_battery": False}}


def mac(**changes):
    return {**MAC, **changes}


def at(minute: int) -> str:
    return f"2026-11-27T10:{minute:02d}:00+00:00"


def test_torch_versions_compared_and_named():
    old = run_with("mps", noisy_rates(1000, 0.02, seed=1), env=mac(), created=at(1), model="resnet18",
                   precision="bf16")
    new = run_with("mps", noisy_rates(880, 0.02, seed=2), env=mac(torch="2.15.0", torch_git="bbb"), created=at(2),
                   model="resnet18", precision="bf16")
    [c] = contrast.by_environment([new, old])
    assert c.kind == "environment" and c.baseline is old
    [v] = c.rows
    assert [(d.key, d.base, d.other) for d in v.diffs] == [("torch", "2.14.1", "2.15.0")]  # the build is the version's
    assert 0.85 < v.ratio < 0.91 and v.high < 1.0 and not v.unclear()
    sentence = c.sentences()[0]
    assert re.match(r"torch 2.15.0 is 1[123] % slower \[", sentence) and "than 2.14.1" in sentence
    assert "resnet18 on shapes, batch 64, bf16" in sentence and "nothing else differs" in sentence
    assert "Apple M3 Max" in sentence


def test_two_differences_cannot_be_told_apart():
    old = run_with("mps", noisy_rates(1000, 0.02), env=mac(), created=at(1))
    new = run_with("mps", noisy_rates(800, 0.02, seed=3), env=mac(torch="2.15.0", os="macOS 15.1",
                                                                  macos_build="24B83"), created=at(2))
    [c] = contrast.by_environment([old, new])
    sentence = c.sentences()[0]
    assert "differ in torch, OS and macOS build: the cause cannot be told apart" in sentence
    assert re.search(r"(19|20|21) % slower", sentence)


def test_within_the_noise_is_no_clear_difference():
    old = run_with("cpu", noisy_rates(1000, 0.10, seed=4), env=mac(), created=at(1))
    new = run_with("cpu", noisy_rates(1000, 0.10, seed=5), env=mac(torch="2.15.0"), created=at(2))
    [c] = contrast.by_environment([old, new])
    assert c.rows[0].unclear()
    assert "no clear difference (" in c.sentences()[0] and "slower" not in c.sentences()[0]


def test_one_setting_apart_batch_and_precision():
    runs = [run_with("cpu", noisy_rates(1000, 0.02), env=mac(), created=at(1)),
            run_with("cpu", noisy_rates(1500, 0.02, seed=6), env=mac(), created=at(2), batch_size=128),
            run_with("cpu", noisy_rates(700, 0.02, seed=7), env=mac(), created=at(3), precision="bf16")]
    found = {c.axis: c for c in contrast.by_setting(runs)}
    assert set(found) == {"batch_size", "precision"}
    batch = found["batch_size"]
    assert batch.rows[0].diffs[0].key == "batch_size"
    assert re.match(r"batch 128 is (49|50|51) % faster \[", batch.sentences()[0]) and "than batch 64" in batch.sentences()[0]
    assert re.match(r"bf16 is (29|30|31) % slower \[", found["precision"].sentences()[0])
    assert "than fp32" in found["precision"].sentences()[0]
    # nothing groups runs of another machine or environment by a setting
    other = run_with("cpu", noisy_rates(1500, 0.02), env=mac(torch="2.15.0"), created=at(4), batch_size=256)
    assert {c.axis for c in contrast.by_setting([*runs, other])} == {"batch_size", "precision"}


def test_threads_setting_is_named_once():
    a = run_with("cpu", noisy_rates(1000, 0.02), env=mac(threads=8), created=at(1))
    b = run_with("cpu", noisy_rates(600, 0.02, seed=9), env=mac(threads=4), created=at(2), threads=4)
    [c] = [c for c in contrast.by_setting([a, b]) if c.axis == "threads"]
    assert [d.key for d in c.rows[0].diffs] == ["threads"]


def test_chosen_baseline_and_any_runs():
    a = run_with("cpu", noisy_rates(1000, 0.02), env=mac(), created=at(1))
    b = run_with("mps", noisy_rates(3000, 0.02, seed=2), env=mac(), created=at(2), batch_size=128)
    c = contrast.of_runs([a, b], baseline=b)
    assert c.baseline is b and c.kind == "selected"
    [v] = c.rows
    assert {d.key for d in v.diffs} == {"batch_size", "device"}
    assert v.ratio < 0.4 and "differ in batch and device" in c.sentences()[0]
    [env] = contrast.by_environment([a, run_with("cpu", noisy_rates(900, 0.02), env=mac(torch="2.15.0"),
                                                 created=at(3))], baseline_id=None)
    assert env.baseline is a  # the oldest, unless one is chosen


def test_repeat_of_the_same_setup_says_so():
    a = run_with("cpu", noisy_rates(1000, 0.02), env=mac(), created=at(1))
    b = run_with("cpu", noisy_rates(1000, 0.02, seed=8), env=mac(), created=at(2))
    c = contrast.of_runs([a, b])
    assert c.rows[0].diffs == [] and "nothing MPS Studio records differs" in c.sentences()[0]


def test_a_run_without_throughput_or_an_older_record():
    a = run_with("cpu", noisy_rates(1000, 0.02), env={"machine_label": "box"}, created=at(1))  # no torch recorded
    b = run_with("cpu", noisy_rates(1100, 0.02), env=mac(), created=at(2))
    b.status = "failed"
    assert contrast.by_environment([a, b]) == []  # a failed run is not compared
    c = contrast.of_runs([a, b])
    assert all(d.key != "torch" for d in c.rows[0].diffs)  # not recorded on one side: not named
    b.summary = b.summary.replaced(samples_per_s=None)
    assert contrast.versus(a, b).ratio is None and "not measured" in contrast.ratio_words(contrast.versus(a, b))


def test_environment_items_name_no_host_or_path():
    items = dict(differences.environment_items(mac(python_executable="/Users/jane/venv/bin/python",
                                                python_env="venv", env={"PYTORCH_MPS_FAST_MATH": "1"})))
    assert items["torch"] == "2.14.1" and items["macOS build"] == "23F79" and items["power source"] == "power adapter"
    assert items["MPS variables"] == "PYTORCH_MPS_FAST_MATH=1"
    assert "studio" not in items.values() and not any("/Users" in v for v in items.values())


def test_the_phase_that_moved_where_both_runs_have_a_diagnosis():
    old = run_with("mps", noisy_rates(1000, 0.02), env=mac(), created=at(1))
    new = run_with("mps", noisy_rates(800, 0.02, seed=2), env=mac(torch="2.15.0"), created=at(2))

    def diagnosis(torch, backward):
        return {"config": old.config.to_dict(), "env": {"torch": torch, "hostname": "studio"},
                "devices": [{"device": "mps", "kind": "mps", "data_ms": 0.1, "copy_ms": 0.2, "forward_ms": 3.0,
                             "backward_ms": backward, "optimizer_ms": 1.0}]}
    [c] = contrast.by_environment([old, new])
    assert len(c.sentences()) == 1
    said = c.sentences([diagnosis("2.14.1", 5.0), diagnosis("2.15.0", 6.5)])
    assert said[1] == ("Of the step's phases, the backward pass moved most: 5.00 \u2192 6.50 ms per step (the two "
                       "runs' diagnoses, measured).")
    assert len(c.sentences([diagnosis("2.14.1", 5.0)])) == 1  # one side only: nothing to say
    other_batch = {**diagnosis("2.15.0", 9.0), "config": {**old.config.to_dict(), "batch_size": 999}}
    assert len(c.sentences([diagnosis("2.14.1", 5.0), other_batch])) == 1  # another setup's diagnosis is not its
