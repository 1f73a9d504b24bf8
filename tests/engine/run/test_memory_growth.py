"""Memory over time (issue 28, part 2): every window records the tensors, the driver's (MPS) or reserved (CUDA)
memory, the process's and the swap; a run whose driver memory grows while its tensors stay flat, or whose memory
grows steadily per step, is flagged with the growth per 100 steps and its interval; a steady one is not."""

from __future__ import annotations

import json
import random
import sys
from dataclasses import replace

import pytest

from mpsstudio import cli
from mpsstudio.engine.analysis import memory
from mpsstudio.engine.analysis.runcheck import run_from_dict
from mpsstudio.engine.basics.results import WindowRow
from mpsstudio.engine.machine import devices, footprint

MiB = 1 << 20


def windows(n=24, steps=10, tensors=lambda i: 100 * MiB, driver=lambda i: 300 * MiB, process=lambda i: 900 * MiB):
    return [WindowRow(first_step=1 + i * steps, steps=steps, memory=tensors(i), memory_driver=driver(i),
                      memory_process=process(i)) for i in range(n)]


def test_a_driver_that_grows_while_tensors_stay_flat_is_flagged_with_its_rate_and_shapes():
    ws = windows(driver=lambda i: 300 * MiB + i * 20 * MiB + (i % 3) * MiB)  # +2 MiB a step, a little scatter
    lines = memory.growth(ws)
    g = lines["memory_driver"]
    assert g["growing"] and not lines["memory"]["growing"]
    assert g["low"] < 200 * MiB < g["high"] and abs(g["per_100_steps"] - 200 * MiB) < 5 * MiB
    said = memory.flag(lines, "mps", 37)
    assert said.startswith("The Metal driver's memory grew 200")
    assert "per 100 steps" in said and "95 % interval" in said and "37 distinct input shapes" in said
    assert "bucket" in said and "torch.mps.empty_cache()" in said
    # one shape: the cache of freed buffers, not of shapes
    assert "bucket" not in memory.flag(lines, "mps", 1) and "empty_cache" in memory.flag(lines, "mps", 1)
    # on CUDA the reserve, with the allocator's own remedies
    assert "caching allocator's reserve" in memory.flag(lines, "cuda", 5)


def test_steady_memory_and_scatter_without_a_trend_are_not_flagged():
    rng = random.Random(3)
    steady = memory.growth(windows(process=lambda i: 900 * MiB + rng.randint(-30, 30) * MiB))
    assert not any(g["growing"] for g in steady.values())
    assert memory.flag(steady, "mps", 1) is None
    # caches filling in the first quarter, then flat: settling, not a leak
    settling = memory.growth(windows(driver=lambda i: 300 * MiB + min(i, 5) * 50 * MiB))
    assert not settling["memory_driver"]["growing"]
    # a trend too small to matter (1 MiB over the run) is not flagged either
    tiny = memory.growth(windows(tensors=lambda i: 100 * MiB + i * 50_000))
    assert not tiny["memory"]["growing"]


def test_tensors_that_grow_every_step_are_flagged_with_what_keeps_them():
    lines = memory.growth(windows(tensors=lambda i: 100 * MiB + i * 5 * MiB, driver=lambda i: 300 * MiB + i * 5 * MiB))
    said = memory.flag(lines, "cuda", None)
    assert said.startswith("The tensors PyTorch holds grew") and ".detach()" in said and "smaller batch" in said
    assert memory.flag(lines, "cpu", None).startswith("The run process's memory grew")


def test_too_few_windows_say_nothing():
    assert memory.growth(windows(n=5, driver=lambda i: i * 100 * MiB)) == {}
    assert memory.summary_fields([], "mps", None) == {"memory_growth": {}, "memory_flag": None,
                                                      "input_shapes": None}


def test_the_slope_interval_is_students():
    b, low, high = memory.slope([0, 1, 2, 3], [0.0, 1.1, 1.9, 3.0])
    assert abs(b - 0.98) < 1e-9 and low < 0.98 < high and high - low < 0.6
    assert memory.t975(3) == 3.182 and memory.t975(500) == 1.96


def test_the_summary_s_flag_is_re_derived_from_the_windows_on_read_back(tmp_path):
    """A file cannot hide a growth its windows show, nor claim one they do not."""
    from mpsstudio.engine.analysis.summary import RunFacts, summarise
    from mpsstudio.engine.basics.config import RunConfig
    from mpsstudio.engine.basics.results import RunResult

    r = RunResult(config=RunConfig(device="mps", steps=240), status="finished")
    r.windows = [replace(w, seconds=0.1, samples=640, samples_per_s=6400.0, data_wait_s=0.0)
                 for w in windows(driver=lambda i: 300 * MiB + i * 20 * MiB)]
    r.losses = [1.0] * 240
    summarise(r, RunFacts(batch_size=64, input_shapes=3))
    assert r.summary.memory_flag and r.summary.input_shapes == 3
    doc = json.loads(json.dumps(r.to_dict()))
    doc["summary"]["memory_flag"] = None  # hidden by hand
    assert run_from_dict(doc, "x.json").summary.memory_flag == r.summary.memory_flag
    for bad in (0, -1, 1.5, "3", True):
        doc["summary"]["input_shapes"] = bad
        with pytest.raises(Exception, match="input_shapes"):
            run_from_dict(doc, "x.json")
    doc["summary"]["input_shapes"] = 3
    doc["windows"][4]["memory_driver"] = -5
    with pytest.raises(Exception, match=r"windows\[4\].memory_driver"):
        run_from_dict(doc, "x.json")


# ---------------------------------------------------------------- the readings


def test_every_device_reads_the_process_and_the_swap():
    cpu = devices.cpu_device()
    reading = cpu.memory()
    assert reading["rss"] == reading["process"] > 0 and all(type(v) is int for v in reading.values())
    assert isinstance(reading.get("swap_used", 0), int)
    lines = cpu.memory_lines(reading)
    assert lines["memory_driver"] is None and lines["memory_process"] == reading["process"]


def test_on_macos_the_process_memory_is_its_physical_footprint(monkeypatch):
    """proc_pid_rusage(pid, RUSAGE_INFO_V0, buffer) fills struct rusage_info_v0; ri_phys_footprint is at byte 72."""
    import ctypes

    seen = []

    def proc_pid_rusage(pid, flavor, buffer):
        seen.append((pid, flavor))
        raw = bytearray(96)
        raw[64:72] = (111 * MiB).to_bytes(8, sys.byteorder)  # ri_resident_size
        raw[72:80] = (777 * MiB).to_bytes(8, sys.byteorder)  # ri_phys_footprint
        ctypes.memmove(buffer, bytes(raw), 96)
        return 0
    monkeypatch.setattr(footprint, "_libproc", proc_pid_rusage)
    monkeypatch.setattr(sys, "platform", "darwin")
    assert footprint.process_memory() == (777 * MiB, "footprint")
    assert seen[-1][1] == footprint.RUSAGE_INFO_V0
    monkeypatch.setattr(footprint, "_libproc", lambda pid, flavor, buffer: -1)  # the call failed: RSS, said so
    value, measure = footprint.process_memory()
    assert measure == "rss" and value > 0


def test_a_faked_mps_run_whose_driver_grows_is_flagged_and_drawn(fake_mps, tmp_path, capsys):
    """The faked Metal driver grows 1 MiB a step while the tensors stay flat (a cache per shape, PyTorch #181485)."""
    fake = fake_mps()
    model = tmp_path / "leaky.py"
    model.write_text(
        "import math\nfrom torch import nn\nimport tests.support.fake_mps as fm\n\n"
        "class Leaky(nn.Module):\n"
        "    def __init__(self, num_classes, input_shape):\n"
        "        super().__init__()\n"
        "        self.body = nn.Linear(math.prod(input_shape), num_classes)\n"
        "    def forward(self, x):\n"
        "        fm._active.driver_overhead += 1 << 20\n"
        "        return self.body(x.flatten(1))\n\n"
        "def build_model(num_classes, input_shape):\n"
        "    return Leaky(num_classes, input_shape)\n")
    out = tmp_path / "runs.json"
    code = cli.main(["bench", "--model", str(model), "--dataset", "synthetic", "--devices", "mps", "--batch-size",
                     "8", "--steps", "120", "--warmup", "2", "--json", str(out), "--no-inspect"])
    stdout, stderr = capsys.readouterr()
    assert code == cli.EXIT_OK, stderr
    [run] = json.loads(out.read_text())["runs"]
    ws = run["windows"]
    assert all(isinstance(w["memory_driver"], int) and isinstance(w["memory_process"], int) for w in ws)
    s = run["summary"]
    assert s["memory_growth"]["memory_driver"]["growing"] and not s["memory_growth"]["memory"]["growing"]
    assert 90 * MiB < s["memory_growth"]["memory_driver"]["per_100_steps"] < 110 * MiB
    assert s["memory_flag"].startswith("The Metal driver's memory grew") and s["input_shapes"] == 1
    assert "The Metal driver's memory grew" in stdout
    assert fake.driver_overhead > 100 * MiB
