"""Right on a real Mac, round 2 (issue 34): what torch 2.14.1's macOS wheel really does, copied by tests/support/fake_mps.py,
and the app's answers to it: MPS timing events that can wait forever or raise, the boxed fallback that is always
there, swap that psutil reports as page-outs, an allocator whose cap counts its cache, a probe that aborts its
process, Core ML's convert that would load the model, and the MPS variables torch reads."""

from __future__ import annotations

import json

import pytest
import torch

from mpsstudio import cli
from mpsstudio.engine.basics.config import RunConfig
from mpsstudio.engine.machine import environment, kernels
from mpsstudio.engine.process import run_tool
from mpsstudio.engine.tools import registry
from mpsstudio.engine.tools.diagnose import anatomy
from tests.support.fake_mps import FakeEvents, WouldHang

MIB = 1 << 20


def _fast(monkeypatch):
    monkeypatch.setattr(anatomy, "MAX_PASS_S", 0.2)
    monkeypatch.setattr(anatomy, "GROUP_S", 0.01)


def _diagnose_mps(**payload) -> dict:
    cfg = RunConfig(model="mlp", dataset="synthetic", image_size=8, batch_size=8, warmup_steps=2)
    return run_tool("diagnose", {"config": cfg.to_dict(), "devices": ["mps"], **payload})


# ---------------------------------------------------------------- MPS timing events (MPSEvent.mm, pytorch#162872)


def test_the_faked_events_wait_forever_where_torch_2_14_1_s_do(fake_mps):
    """The pattern the diagnosis used: synchronize() of the end event consumes the one-shot CPU-sync flag that
    elapsed_time then waits for (MPSEvent::synchronize / MPSEventPool::elapsedTime both call waitForCpuSync)."""
    fake = fake_mps(event_reorder_s=0.0)
    start, end = torch.mps.event.Event(enable_timing=True), torch.mps.event.Event(enable_timing=True)
    torch.mps.synchronize()
    start.record()
    torch.ones(4, device="mps").add_(1)
    end.record()
    end.synchronize()
    with pytest.raises(WouldHang, match="pytorch#162872") as hung:
        start.elapsed_time(end)
    assert fake.events.hangs == 1
    del hung
    start.record()
    torch.ones(4, device="mps").add_(1)
    end.record()
    assert start.elapsed_time(end) >= 0  # elapsed_time alone waits for the end event itself
    del start, end  # released while the faked bindings are in place


def test_two_events_closer_than_the_callbacks_race_raise_torch_s_own_errors(fake_mps):
    fake_mps(event_reorder_s=10.0)  # every interval short enough for the callbacks to arrive out of order
    errors = set()
    for _ in range(4):
        start, end = torch.mps.event.Event(enable_timing=True), torch.mps.event.Event(enable_timing=True)
        start.record()
        end.record()
        with pytest.raises(RuntimeError) as err:
            start.elapsed_time(end)
        errors.add(str(err.value).split(" ")[0])
        del start, end, err  # released while the faked bindings are in place (the traceback holds them)
    assert errors <= {"Events", "End"}


def test_diagnose_on_a_mac_completes_with_each_operation_timed_by_mps_events(fake_mps, monkeypatch):
    """Done when: `diagnose --devices mps` on the faked Mac with torch 2.14.1's event semantics completes, with
    per-operation times from events. (On the commit before this one the same test raised WouldHang: the clock
    synchronized the end event before elapsed_time.)"""
    _fast(monkeypatch)
    fake = fake_mps(event_reorder_s=0.0)
    result = _diagnose_mps()
    [d] = result["devices"]
    assert "error" not in d and fake.events.hangs == 0
    assert d["op_clock"].startswith("MPS timing events (the host's clock in Metal's completion callbacks, not GPU "
                                    "timestamps; a ")
    assert d["ops"] > 10 and d["device_ms"] >= 0 and d["empty_op_us"] > 0
    assert "Its operations were timed by MPS timing events (the host's clock" in result["sentence"]


def test_events_that_raise_switch_the_device_to_the_wall_clock_and_say_so(fake_mps, monkeypatch):
    _fast(monkeypatch)
    fake_mps(event_reorder_s=10.0)  # torch 2.14.1 raises for short intervals (pytorch#196395)
    [d] = _diagnose_mps()["devices"]
    assert "error" not in d and d["ops"] > 10
    assert d["op_clock"].startswith("the wall clock, the device synchronized around each, after the timing events "
                                    "failed (")
    assert "was not recorded after start event" in d["op_clock"] or "enable_timing=True" in d["op_clock"]


def test_a_timing_that_never_ends_is_ended_and_the_diagnosis_keeps_the_rest(fake_mps, monkeypatch):
    """An MPS event that waits forever cannot be caught: the rounds' anatomy goes to the parent first, which ends the
    process after the deadline and finishes the diagnosis from it, saying why."""
    _fast(monkeypatch)
    monkeypatch.setattr(anatomy, "OP_DEADLINE_S", 0.5)
    monkeypatch.setattr(anatomy, "OP_DEADLINE_STEPS", 0)
    monkeypatch.setattr(FakeEvents, "HANG_S", 2.0)  # the thread stands in for a process: it must end at last
    fake_mps(events_hang=True)
    cfg = RunConfig(model="mlp", dataset="synthetic", image_size=8, batch_size=8, warmup_steps=2)
    result = run_tool("diagnose", {"config": cfg.to_dict(), "devices": ["mps", "cpu"]})
    mps, cpu = result["devices"]
    assert mps["step_ms"] > 0 and mps["ops"] is None and mps["device_ms"] is None and mps["bound"]
    why = mps["op_timing_error"]
    assert why.startswith("the timing of each operation on mps did not finish: the process running the diagnose "
                          "tool did not end a step within ") and "pytorch#162872" in why
    assert cpu == {"device": "cpu", "error": "not diagnosed: " + why}
    assert "{how}" not in json.dumps(result) and why[0].upper() + why[1:] + "." in result["notes"]
    from mpsstudio.engine.tools.diagnose.view import anatomy_table, read

    t = anatomy_table(read(result))  # what the CLI and the window draw
    headers, rows = t.headers, t.rows
    assert rows[0][headers.index("ops / step")] == "—"


# ---------------------------------------------------------------- the boxed fallback is always registered


def test_with_the_fallback_off_an_operation_mps_lacks_is_missing_not_on_the_cpu(fake_mps, capsys):
    """MPSFallback.mm registers mps_error_fallback when PYTORCH_ENABLE_MPS_FALLBACK is 0: the operation raises."""
    fake_mps(fallback_enabled=False, missing_ops=("aten::relu",))
    assert torch._C._dispatch_has_backend_fallback(torch._C.DispatchKey.MPS)  # as on every Mac
    assert kernels.kernel_kind("aten::relu", "mps") == "missing"
    bench = ["bench", "--model", "mlp", "--dataset", "synthetic", "--devices", "mps", "--steps", "4", "--warmup",
             "1", "--no-inspect", "--batch-size", "4", "--no-mps-fallback"]
    assert cli.main(bench) == cli.EXIT_RUN_FAILED
    err = capsys.readouterr().err
    assert "1 operation of this model has no MPS kernel (aten::relu)" in err and "will fail" in err, err
    assert "aten::relu is not supported on MPS by this PyTorch; turn on 'Run operations MPS lacks" in err


def test_with_the_fallback_on_the_same_operation_runs_on_the_cpu(fake_mps):
    fake_mps(fallback_enabled=True, missing_ops=("aten::relu",))
    assert kernels.kernel_kind("aten::relu", "mps") == "cpu_fallback"


# ---------------------------------------------------------------- max-batch on a Mac


def test_page_outs_are_not_swap_to_max_batch(fake_mps):
    """psutil's swap_memory().sout on macOS is vmstat.pageouts x the page size (psutil/arch/osx/mem.c): a faked Mac
    writes 512 MiB of file pages out between readings while its swap stays put, and no batch is refused for swap
    (the throughput-collapse rule is off on a faked Mac: conftest.fake_mps)."""
    from mpsstudio.engine.tools import maxbatch

    fake_mps(recommended_max=64 << 20, pageouts_per_read=512 * MIB)
    r = maxbatch.search(RunConfig(model="mlp", dataset="synthetic", device="mps", seed=1), memory_limit=24 << 20,
                        cap=64)
    assert r["largest_batch"] == 64 and not any(p.get("why") == "swap" for p in r["probes"]), r["probes"]


def test_swap_that_grows_during_a_probe_still_refuses_it_on_a_mac(fake_mps, monkeypatch):
    from mpsstudio.engine.tools import maxbatch, memory

    fake = fake_mps(recommended_max=64 << 20)
    real = fake.swap_memory

    def growing():  # VM_SWAPUSAGE's used grows 300 MiB a reading: the compressor swaps
        fake.swap_used += 300 * MIB
        return real()
    monkeypatch.setattr(memory.psutil, "swap_memory", growing)
    r = maxbatch.search(RunConfig(model="mlp", dataset="synthetic", device="mps", seed=1), memory_limit=24 << 20,
                        cap=8)
    assert r["probes"][0]["why"] == "swap" and r["probes"][0]["reason"] == "the system swapped out 300 MiB while it ran"


TINY = """import math, torch
def build_model(num_classes, input_shape):
    return torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(math.prod(input_shape), num_classes))
"""


def test_a_probe_that_aborts_its_process_fails_and_the_search_goes_on_in_a_fresh_one(fake_mps, tmp_path):
    """MPS asserts on one array over 4 GiB instead of raising (pytorch#143859): the process dies. The search counts
    that batch as failed, with why, and goes on from its probes in a fresh process."""
    model = tmp_path / "tiny.py"
    model.write_text(TINY)
    fake_mps(recommended_max=1 << 30, abort_above=24 * MIB)  # the input (12 KiB a sample) past batch 2,048 "aborts"
    cfg = RunConfig(model=str(model), dataset="synthetic", device="mps", seed=1)
    r = run_tool("max-batch", {"config": cfg.to_dict(), "memory_limit": 512 << 20, "cap": 8192})
    died = [p for p in r["probes"] if p.get("why") == "process died"]
    assert len(died) >= 2 and r["smallest_failed"]["why"] == "process died"  # one fresh process after each
    assert r["smallest_failed"]["reason"].startswith("its process died (the process running the max-batch tool "
                                                     "exited with code 1")
    assert r["largest_batch"] == 2048 and r["smallest_failed"]["batch_size"] <= 2048 + 2048 // 128
    assert len({p["batch_size"] for p in r["probes"]}) == len(r["probes"])  # no probe run twice


def test_the_allocator_s_cap_counts_its_cached_buffers_until_empty_cache(fake_mps):
    """MPSAllocator caps `[MTLDevice currentAllocatedSize]`, cached buffers included, and releases them before it
    gives up (release_cached_buffers); empty_cache hands them back; driver memory counts them until then."""
    fake = fake_mps(recommended_max=64 << 20, driver_overhead=0)
    t = torch.ones(4 * MIB // 4, device="mps")
    del t
    assert torch.mps.current_allocated_memory() == 0 and fake.cached() == 4 * MIB
    assert torch.mps.driver_allocated_memory() == 4 * MIB
    u = torch.ones(4 * MIB // 4, device="mps")  # the cached buffer is reused, nothing new
    assert fake.cached() == 0 and torch.mps.driver_allocated_memory() == 4 * MIB
    del u
    torch.mps.set_per_process_memory_fraction(6 / 64)  # a 6 MiB cap: 4 MiB cached + 5 MiB new is over it
    v = torch.ones(5 * MIB // 4, device="mps")  # so the cache goes first, then it fits
    assert fake.cached() == 0 and torch.mps.current_allocated_memory() == 5 * MIB
    with pytest.raises(RuntimeError, match="MPS backend out of memory"):
        torch.ones(2 * MIB // 4, device="mps")
    del v
    torch.mps.empty_cache()
    assert fake.cached() == 0 and torch.mps.driver_allocated_memory() == 0


# ---------------------------------------------------------------- Core ML, the MPS variables


def test_core_ml_convert_is_told_not_to_compile_and_load_the_package(monkeypatch, tmp_path):
    """coremltools.convert compiles and loads the model on macOS unless skip_model_load (compute_units=ALL): time
    that export and deploy-bench would spend, and count in convert_s, on a Mac only."""
    ct = pytest.importorskip("coremltools")
    from mpsstudio.engine.tools.deploy import export

    seen = []
    real = ct.convert
    monkeypatch.setattr(ct, "convert", lambda *a, **k: (seen.append(k), real(*a, **k))[1])
    export.export(RunConfig(model="mlp", dataset="synthetic"), "coreml", str(tmp_path / "m.mlpackage"))
    assert seen and all(k.get("skip_model_load") is True for k in seen)


def test_every_mps_variable_of_the_pinned_torch_is_recorded_with_a_run(monkeypatch):
    for name in environment.MPS_ENV_VARS:
        monkeypatch.setenv(name, "1")
    recorded = environment.environment()["env"]
    for name in ("PYTORCH_MPS_DISABLE_PREFILL_ATTENTION", "PYTORCH_MPS_LOG_PROFILE_INFO",
                 "PYTORCH_MPS_TRACE_SIGNPOSTS", "PYTORCH_DEBUG_MPS_ALLOCATOR"):
        assert recorded[name] == "1"


def test_a_checkpoint_of_a_tool_that_sends_none_is_not_an_answer():
    with pytest.raises(Exception, match="did not end"):
        registry.ended("inspect", {"x": 1}, "The process did not end a step within 1 s, so it was ended.")


def test_a_models_reads_from_the_device_are_timed_away_and_named_by_their_line(fake_mps, monkeypatch, tmp_path):
    """Diagnose measures what the host's waits cost by answering them from a record (diagnose/syncs.py), and names
    where the model asks for them. (The faked Mac computes on the CPU: its waits cost ~nothing; the figures and the
    line are what this checks. The lent GPU's numbers are in docs/benchmarks.md.)"""
    _fast(monkeypatch)
    fake_mps(event_reorder_s=0.0)
    model = tmp_path / "checked.py"
    model.write_text("import torch\nfrom torch import nn\n\nclass Checked(nn.Module):\n"
                     "    def __init__(self, n, size):\n        super().__init__()\n        self.a, self.b = nn.Linear(size, 32), nn.Linear(32, n)\n"
                     "    def forward(self, x):\n        h = self.a(x.flatten(1))\n"
                     "        if not torch.isfinite(h).all().item():\n            raise FloatingPointError('not finite')\n"
                     "        return self.b(h)\n\n"
                     "def build_model(num_classes, input_shape):\n    import math\n    return Checked(num_classes, math.prod(input_shape))\n")
    cfg = RunConfig(model=str(model), dataset="synthetic", image_size=8, batch_size=8, warmup_steps=2)
    [d] = run_tool("diagnose", {"config": cfg.to_dict(), "devices": ["mps"]})["devices"]
    assert "error" not in d, d.get("error")
    assert d["sync_calls"] == [{"call": ".item() at checked.py:10", "count": 1}]
    assert d["nosync_step_ms"] > 0 and d["sync_cost_ms"] >= 0 and "alternated pairs" in d["sync_method"]


def test_the_replay_answers_a_steps_reads_from_the_record_without_asking_the_device():
    from mpsstudio.engine.tools.diagnose.syncs import Replay

    real = []
    original = torch.Tensor.item

    def counted(self):
        real.append(1)
        return original(self)
    x = torch.tensor([1.0, -2.0, 3.0])

    def step():
        total = 0.0
        for v in x:
            total += v.item() if bool(v > 0) else 0.0
        return total
    replay = Replay("cpu")
    torch.Tensor.item = counted
    try:
        with replay.recording():
            assert step() == 4.0
        recorded = len(real)
        with replay.replaying():
            for _ in range(3):
                replay.next_step()
                assert step() == 4.0
    finally:
        torch.Tensor.item = original
    assert recorded == 2 and len(real) == 2 and replay.extra == 0  # replayed: the real item() never called again
    assert {c["call"].split(" at ")[0]: c["count"] for c in replay.where()} == {".bool()": 3, ".item()": 2}
    assert all(c["call"].endswith(f"test_mac_truth.py:{_line_of('bool(v > 0)')}") for c in replay.where())


def _line_of(text: str) -> int:
    import inspect

    lines = inspect.getsource(inspect.getmodule(_line_of)).splitlines()
    return next(i for i, line in enumerate(lines, 1) if text in line and "_line_of" not in line)
