"""The measuring tools in the engine: max-batch, inspect (CPU fallback and parity), sweep analysis, the check of
a tool's answer, and their place in the history. The MPS-only decisions are faked (there is no Mac here)."""

from __future__ import annotations

import json
import math
import os
import sqlite3

import pytest
import torch

from mpsstudio.engine.machine import kernels
from mpsstudio.engine.tools import inspection, maxbatch, memory, opcheck, sweep, registry as tools
from mpsstudio.engine.basics.config import RunConfig
from mpsstudio.engine.basics.errors import UserError
from mpsstudio.engine.history.store import RunStore, ToolRecord
from tests.support.runs import point
from tests.support.paths import ROOT

MLP = RunConfig(model="mlp", dataset="synthetic", seed=1)


# ---------------------------------------------------------------- max-batch

def fake_memory(monkeypatch, fits_up_to: int, per_sample: int = 1024 * 1024):
    """Memory grows `per_sample` bytes per sample; batches above `fits_up_to` raise a CUDA-style OOM. Throughput
    collapse is off (a busy test machine is not memory pressure): it has its own test. The model is a small one of
    the mlp's input (its memory is faked anyway: the search, not the model, is what these tests are about)."""
    from mpsstudio.engine.tools import toolkit

    monkeypatch.setattr(maxbatch, "COLLAPSE", 0.0)
    monkeypatch.setattr(toolkit, "build", lambda setup: torch.nn.Sequential(
        torch.nn.Flatten(), torch.nn.Linear(setup.model_spec.channels * setup.model_spec.height
                                            * setup.model_spec.width, setup.model_spec.num_classes)))
    real_step = maxbatch._Search._step

    def step(self, x, y):
        if x.shape[0] > fits_up_to:
            raise torch.OutOfMemoryError(f"CUDA out of memory. Tried to allocate {x.shape[0]} MiB")
        real_step(self, x, y)
        self.fake_batch = int(x.shape[0])
    monkeypatch.setattr(maxbatch._Search, "_step", step)
    monkeypatch.setattr(maxbatch._Search, "_memory",
                        lambda self, rss: (getattr(self, "fake_batch", 1) * per_sample, "allocator_peak"))


def test_max_batch_finds_a_batch_that_trains_and_a_double_that_does_not(monkeypatch):
    fake_memory(monkeypatch, fits_up_to=100)
    r = maxbatch.search(MLP, memory_limit=10 * 2**30)
    assert r["largest_batch"] == 100  # bisected to the exact boundary below EXACT_UP_TO
    fits = {p["batch_size"]: p["fits"] for p in r["probes"]}
    assert fits[64] and not fits[128] and fits[100] and not fits[101]
    assert [p["batch_size"] for p in r["probes"]][:8] == [1, 2, 4, 8, 16, 32, 64, 128]  # doubling, then bisecting
    assert [p["batch_size"] for p in r["probes"]][8:] == [96, 112, 104, 100, 102, 101]
    failed = [p for p in r["probes"] if not p["fits"]]
    assert all(p["reason"].startswith("out of memory (CUDA out of memory") for p in failed)
    assert r["smallest_failed"] == {"batch_size": 101, "why": "out of memory", "reason": failed[-1]["reason"]}
    assert r["fastest_batch"] in fits and fits[r["fastest_batch"]]
    assert r["sweep_sizes"] == [16, 32, 64, 100] and r["limit_enforced"] == ""  # the CPU has no allocator cap
    assert ("Largest batch that trains on cpu: 100 (100 MiB peak allocated by PyTorch); 101 did not: out of memory "
            "(CUDA out of memory" in r["sentence"])
    assert "3 training steps each, too few to rank batch sizes: sweep 16, 32, 64, 100" in r["sentence"]
    assert tools.checked("max-batch", json.loads(json.dumps(r)))["largest_batch"] == r["largest_batch"]


def test_max_batch_skips_a_batch_predicted_above_the_limit(monkeypatch):
    fake_memory(monkeypatch, fits_up_to=10**6, per_sample=2**20)
    r = maxbatch.search(MLP, memory_limit=40 * 2**20)
    predicted = [p for p in r["probes"] if p["memory_measure"] == "predicted"]
    assert predicted and all(p["reason"].startswith("not run: it would need about") for p in predicted)
    assert all(p["memory"] <= 40 * 2**20 for p in r["probes"] if p["fits"])
    assert r["largest_batch"] == 40  # predicted 64 MiB at 64: skipped; 48 (under 1.25x the limit): measured
    assert [p["batch_size"] for p in predicted] == [64]
    assert r["smallest_failed"]["batch_size"] == 41 and r["smallest_failed"]["why"] == "over the limit"
    assert "; 41 did not: used 41.0 MiB, above the limit of 40.0 MiB" in r["sentence"]


def test_a_prediction_is_never_above_a_larger_batch_s_measured_memory():
    """Memory is not monotonic in the batch (cuDNN picks other algorithms and workspaces at other sizes): the
    extrapolation from 64 and 80 says 88 needs 8.4 GiB, but 96 measured 8.0 GiB, so 88 needs at most that."""
    GiB = 2**30
    probes = [{"batch_size": 64, "fits": True, "memory": 6 * GiB, "memory_measure": "allocator_peak"},
              {"batch_size": 80, "fits": True, "memory": int(7.6 * GiB), "memory_measure": "allocator_peak"},
              {"batch_size": 96, "fits": False, "memory": 8 * GiB, "memory_measure": "allocator_peak"},
              {"batch_size": 128, "fits": False, "memory": 99 * GiB, "memory_measure": "predicted"}]
    search = type("S", (), {"probes": probes})()
    assert maxbatch._Search.predicted(search, 88) == 8 * GiB
    assert abs(maxbatch._Search.predicted(search, 112) - (7.6 + 0.1 * 32) * GiB) < 2  # nothing measured above


def test_a_batch_is_never_ruled_out_by_prediction_below_one_that_trained(monkeypatch):
    from mpsstudio.engine.tools import toolkit

    fake_memory(monkeypatch, fits_up_to=10**6, per_sample=2**20)
    monkeypatch.setattr(maxbatch._Search, "predicted", lambda self, batch: 10**15)  # wildly pessimistic
    search = maxbatch._Search(toolkit.prepare(MLP), 100 * 2**20, 256, lambda *a: None, lambda: False)
    search.probes.append({"batch_size": 64, "fits": True, "memory": 64 * 2**20, "memory_measure": "allocator_peak",
                          "samples_per_s": 1.0})
    assert search.probe(48)["fits"]  # measured, although predicted far past the limit: 64 trained
    assert search.probe(128)["memory_measure"] == "predicted"  # above every batch that trained: skipped


def test_max_batch_caps_the_cuda_allocator_at_the_limit_and_lifts_the_cap(monkeypatch):
    """On CUDA the limit is enforced by PyTorch's own allocator (torch.cuda.set_per_process_memory_fraction, the
    real function, over a faked binding: its checks run as they do on a GPU)."""
    from types import SimpleNamespace

    import torch.cuda.memory

    from mpsstudio.engine.machine.devices import Device

    calls = []
    monkeypatch.setattr(torch.cuda.memory, "_lazy_init", lambda: None)
    monkeypatch.setattr(torch._C, "_cuda_setMemoryFraction", lambda fraction, device: calls.append((fraction, device)),
                        raising=False)
    monkeypatch.setattr(torch.cuda, "get_device_properties", lambda index: SimpleNamespace(total_memory=80 * 2**30))
    gpu = Device(id="cuda:1", kind="cuda", available=True)
    words, lift = maxbatch.enforce_limit(gpu, 8 * 2**30)
    assert calls == [(0.1, 1)] and words == ("PyTorch's CUDA allocator capped at 8.0 GiB "
                                             "(torch.cuda.set_per_process_memory_fraction(0.1000))")
    lift()
    assert calls[-1] == (1.0, 1)
    assert maxbatch.enforce_limit(gpu, 81 * 2**30)[0] == ""  # above the card: the card's own out-of-memory error
    assert maxbatch.enforce_limit(gpu, None)[0] == "" and len(calls) == 2


def test_max_batch_measured_above_the_limit_does_not_fit(monkeypatch):
    fake_memory(monkeypatch, fits_up_to=10**6, per_sample=2**20)
    monkeypatch.setattr(maxbatch._Search, "predicted", lambda self, batch: None)  # no extrapolation: measure
    r = maxbatch.search(MLP, memory_limit=40 * 2**20, cap=64)
    over = [p for p in r["probes"] if p["batch_size"] == 64][0]
    assert not over["fits"] and over["reason"].startswith("used 64.0 MiB, above the limit of 40.0 MiB")


def test_max_batch_swap_growth_does_not_fit(monkeypatch):
    fake_memory(monkeypatch, fits_up_to=10**6, per_sample=1)
    counter = iter(range(0, 10**12, 2**30))  # every reading 1 GiB more swapped out
    monkeypatch.setattr(maxbatch, "swapped_out", lambda: next(counter))
    r = maxbatch.search(MLP, memory_limit=2**30, cap=4)
    assert r["largest_batch"] is None
    assert r["probes"][0]["reason"].startswith("the system swapped out 1.0 GiB")
    assert r["sentence"].startswith("No batch trained on cpu: batch 1 the system swapped out")


class _SlowClock:
    """max-batch's clock, running `extra` seconds ahead of the real one: a step that "takes" longer adds to it
    instead of sleeping (the search reads time.perf_counter only)."""

    def __init__(self):
        self.extra = 0.0

    def wait(self, seconds: float) -> None:
        self.extra += seconds

    def perf_counter(self) -> float:
        import time

        return time.perf_counter() + self.extra


def slow_clock(monkeypatch) -> _SlowClock:
    clock = _SlowClock()
    monkeypatch.setattr(maxbatch, "time", clock)
    return clock


def test_max_batch_throughput_collapse_does_not_fit(monkeypatch):
    fake_memory(monkeypatch, fits_up_to=10**6, per_sample=2**20)
    monkeypatch.setattr(maxbatch, "COLLAPSE", 0.5)
    real = maxbatch._Search._step
    clock = slow_clock(monkeypatch)

    def slow_from_16(self, x, y):
        real(self, x, y)
        if x.shape[0] >= 16:
            clock.wait(0.05 * x.shape[0])  # a batch of 16 takes ~0.8 s a step: far under half the throughput
    monkeypatch.setattr(maxbatch._Search, "_step", slow_from_16)
    monkeypatch.setattr(maxbatch._Search, "predicted", lambda self, batch: None)
    r = maxbatch.search(MLP, memory_limit=20 * 2**20, cap=16)  # 16 MiB of a 20 MiB limit: memory pressure
    last = [p for p in r["probes"] if p["batch_size"] == 16][0]
    assert not last["fits"] and "throughput fell to" in last["reason"]
    assert r["largest_batch"] < 16


def test_max_batch_slow_far_below_the_limit_is_not_memory_pressure(monkeypatch):
    """A busy machine slows a probe that uses a sliver of the limit: that is load, not "does not fit"."""
    fake_memory(monkeypatch, fits_up_to=10**6, per_sample=1)
    monkeypatch.setattr(maxbatch, "COLLAPSE", 0.5)
    real = maxbatch._Search._step
    clock = slow_clock(monkeypatch)

    def slow_from_8(self, x, y):
        real(self, x, y)
        if x.shape[0] >= 8:
            clock.wait(0.05 * x.shape[0])
    monkeypatch.setattr(maxbatch._Search, "_step", slow_from_8)
    r = maxbatch.search(MLP, memory_limit=2**30, cap=8)
    assert r["largest_batch"] == 8 and all(p["fits"] for p in r["probes"])


def test_max_batch_a_machine_that_became_busy_is_not_memory_pressure(monkeypatch):
    """Another program starts while the search runs: from batch 16 on, every step is slow, the smaller batches'
    too. The batch that looked collapsed trains; the smaller batch measured again just after was just as slow."""
    fake_memory(monkeypatch, fits_up_to=10**6, per_sample=2**20)
    monkeypatch.setattr(maxbatch, "COLLAPSE", 0.5)
    monkeypatch.setattr(maxbatch._Search, "predicted", lambda self, batch: None)
    real = maxbatch._Search._step
    clock = slow_clock(monkeypatch)
    busy = []

    def busy_from_16(self, x, y):
        real(self, x, y)
        if x.shape[0] >= 16:
            busy.append(True)
        if busy:
            clock.wait(1.0)  # every step, whatever its batch, takes a second more
    monkeypatch.setattr(maxbatch._Search, "_step", busy_from_16)
    r = maxbatch.search(MLP, memory_limit=20 * 2**20, cap=16)
    assert r["largest_batch"] == 16 and all(p["fits"] for p in r["probes"])


def test_max_batch_cap_is_said(monkeypatch):
    fake_memory(monkeypatch, fits_up_to=10**6, per_sample=1)
    r = maxbatch.search(MLP, memory_limit=2**30, cap=8)
    assert r["largest_batch"] == 8 and r["capped"]
    assert "the search stopped at the cap of 8, not at a memory limit" in r["sentence"]


def test_max_batch_stop_keeps_what_was_found(monkeypatch):
    fake_memory(monkeypatch, fits_up_to=10**6, per_sample=1)
    asked = iter([False] * 6 + [True] * 1000)
    r = maxbatch.search(MLP, memory_limit=2**30, should_stop=lambda: next(asked))
    assert r["stopped"] and r["largest_batch"] and r["sentence"].endswith("Stopped before the search ended.")


def test_max_batch_model_error_is_one_sentence(tmp_path):
    path = tmp_path / "breaks.py"
    path.write_text("import torch\nclass M(torch.nn.Module):\n    def __init__(self, n):\n        super().__init__()\n"
                    "        self.l = torch.nn.Linear(4, n)\n    def forward(self, x):\n"
                    "        if x.shape[0] > 2:\n            raise ValueError('no batches above 2')\n"
                    "        return self.l(x.flatten(1)[:, :4])\n"
                    "def build_model(num_classes, input_shape):\n    return M(num_classes)\n")
    with pytest.raises(UserError, match=r"failed a training step at batch 4 for another reason than memory "
                                        r"\(ValueError: no batches above 2\)"):
        maxbatch.search(RunConfig(model=str(path), dataset="synthetic"), memory_limit=2**30)


@pytest.mark.parametrize("kwargs, words", [({"cap": 0}, "largest batch to try"), ({"cap": True}, "largest batch"),
                                           ({"memory_limit": 10}, "at least 1 MiB")])
def test_max_batch_bad_arguments(kwargs, words):
    with pytest.raises(UserError, match=words):
        maxbatch.search(MLP, **kwargs)


# ---------------------------------------------------------------- inspect

def fake_decide(fallback: set[str]):
    return lambda op, device_type: "cpu_fallback" if op in fallback else "native"


def test_fallback_ops_found_with_a_faked_decision():
    r = inspection.inspect(MLP, decide=fake_decide({"aten::addmm", "aten::relu"}))
    ops = {o["op"]: o for o in r["fallback_ops"]}
    assert set(ops) == {"aten::addmm", "aten::relu"}
    assert ops["aten::addmm"]["count"] >= 3 and ops["aten::relu"]["count"] >= 2  # the mlp's layers
    assert all(0 < o["share"] < 1 for o in ops.values()) and 0 < r["fallback_share"] < 1
    assert r["op_count"] > sum(o["count"] for o in ops.values())  # backward and optimizer ops were seen too
    assert r["sentence"].count("2 operations ran on the CPU") == 1 and "aten::addmm" in r["sentence"]
    assert tools.checked("inspect", json.loads(json.dumps(r)))["fallback_ops"]


def test_fallback_records_backward_and_optimizer_ops():
    seen = set()

    def decide(op, device_type):
        seen.add(op)
        return "native"
    r = inspection.inspect(MLP, decide=decide)
    assert r["fallback_ops"] == []
    assert {"aten::addmm", "aten::mm", "aten::threshold_backward"} <= seen  # forward and backward
    assert any(op.startswith("aten::add_") or op.startswith("aten::_foreach") for op in seen)  # the SGD step


def test_kernel_kind_reads_the_dispatcher():
    assert kernels.kernel_kind("aten::addmm", "cpu") == "native"
    assert kernels.kernel_kind("aten::zeros_like", "cpu") == "composite"
    assert kernels.kernel_kind("aten::no_such_op", "cpu") == "unknown"
    assert kernels.kernel_kind("aten::addmm", "tpu") == "unknown"


def test_kernel_kind_mps_per_op_fallback_registration(monkeypatch):
    """MPSFallback.mm registers the boxed CPU fallback per operation too: the table names that file."""
    C = torch._C
    monkeypatch.setattr(C, "_dispatch_has_kernel_for_dispatch_key", lambda op, key: key == "MPS")
    monkeypatch.setattr(C, "_dispatch_dump_table", lambda op: (
        "CPU: registered at RegisterCPU.cpp:1 [kernel]\n"
        f"MPS: registered at /src/aten/src/ATen/mps/{'MPSFallback.mm:80' if op == 'aten::linalg_svd' else 'RegisterMPS.cpp:9'} [kernel]"))
    assert kernels.kernel_kind("aten::linalg_svd", "mps") == "cpu_fallback"
    assert kernels.kernel_kind("aten::addmm", "mps") == "native"


@pytest.mark.parametrize("value, kind", [("1", "cpu_fallback"), ("0", "missing"), (None, "missing"),
                                         (" 2", "cpu_fallback"), ("-1", "cpu_fallback"), ("00", "cpu_fallback"),
                                         ("", "cpu_fallback"), ("false", "cpu_fallback")])
def test_kernel_kind_mps_backend_fallback_follows_the_variable_torch_loaded_with(monkeypatch, value, kind):
    """MPSFallback.mm registers a boxed MPS fallback whatever PYTORCH_ENABLE_MPS_FALLBACK says: the CPU fallback when
    it is set and not exactly "0" (torch 2.8+, as here), else one that raises "not currently implemented". So the dispatcher always has one on a
    Mac, and only the variable says whether an operation MPS lacks runs on the CPU or fails."""
    C = torch._C
    monkeypatch.setattr(C, "_dispatch_has_kernel_for_dispatch_key", lambda op, key: False)
    monkeypatch.setattr(C, "_dispatch_has_backend_fallback", lambda key: True)
    if value is None:
        monkeypatch.delenv("PYTORCH_ENABLE_MPS_FALLBACK", raising=False)
    else:
        monkeypatch.setenv("PYTORCH_ENABLE_MPS_FALLBACK", value)
    assert kernels.kernel_kind("aten::_fft_r2c", "mps") == kind


def test_parity_on_this_cpu_is_within_fp32_tolerance():
    r = inspection.inspect(RunConfig(model="mnist_cnn", dataset="shapes"))
    par = r["parity"]
    assert par["ok"] and par["tolerance"] == opcheck.TOLERANCES["fp32"] and par["precision"] == "fp32"
    assert 0 <= par["worst_rel_err"] < 1e-4
    assert par["loss_cpu_rel_err"] is None  # on the CPU there is no second CPU to compare with
    names = [g["name"] for g in par["grads"]]
    assert len(names) == len(set(names)) == 8  # every parameter tensor, worst first
    errs = [g["max_rel_err"] for g in par["grads"]]
    assert errs == sorted(errs, reverse=True)
    assert r["sentence"].startswith("cpu matches the float64 CPU reference (fp32, tolerance 1e-02, or 4x the CPU's "
                                    "own error in fp32): largest relative error")


def test_parity_flags_a_model_that_computes_differently_in_fp32(tmp_path):
    """A stand-in for a device with wrong results: the float32 path adds 0.1 to the logits."""
    path = tmp_path / "drifts.py"
    path.write_text("import torch\nclass M(torch.nn.Module):\n    def __init__(self, n, size):\n        super().__init__()\n"
                    "        self.l = torch.nn.Linear(size, n)\n    def forward(self, x):\n"
                    "        out = self.l(x.flatten(1))\n"
                    "        return out + 0.1 if out.dtype == torch.float32 else out\n"
                    "def build_model(num_classes, input_shape):\n"
                    "    import math\n    return M(num_classes, math.prod(input_shape))\n")
    r = inspection.inspect(RunConfig(model=str(path), dataset="synthetic"))
    assert not r["parity"]["ok"]
    assert "differs from the float64 CPU reference beyond tolerance" in r["sentence"]
    assert "the logits" in r["sentence"] or "the loss" in r["sentence"]


DRIFT = ("import torch\nclass M(torch.nn.Module):\n    def __init__(self, n, size):\n        super().__init__()\n"
         "        self.l = torch.nn.Linear(size, n)\n    def forward(self, x):\n"
         "        out = self.l(x.flatten(1))\n"
         "        return out + 0.1 if out.dtype == torch.float32 else out\n"
         "def build_model(num_classes, input_shape):\n    import math\n    return M(num_classes, math.prod(input_shape))\n")


@pytest.mark.parametrize("cpu_drifts, ok", [(True, True), (False, False)])
def test_parity_judges_against_the_cpu_in_the_same_precision(tmp_path, monkeypatch, cpu_drifts, ok):
    """An error the CPU makes too in that precision is the arithmetic's, not the device's; one it does not is."""
    from mpsstudio.engine.models import registry as models
    from mpsstudio.engine.tools import opcheck
    from mpsstudio.engine.basics.spec import DataSpec

    path = tmp_path / "drifts.py"
    path.write_text(DRIFT)
    spec = DataSpec(kind="image", num_classes=4, channels=1, height=4, width=4)
    base = models.build_model(str(path), spec)
    x, y = torch.randn(8, 1, 4, 4), torch.randint(0, 4, (8,))
    if not cpu_drifts:  # the CPU in the same precision is exact: only the "device" drifts
        def exact(b, xx, yy, dtype):
            return opcheck._run_copy(b.double(), xx.double(), yy, torch.device("cpu"), None)
        monkeypatch.setattr(opcheck, "_cpu_same_precision", exact)
    r = opcheck.parity_of(base, x, y, torch.device("cpu"), "fp32", False, lambda: None, "mps", compare_cpu=True)
    assert r["logits_cpu_rel_err"] is not None
    assert r["ok"] is ok and r["logits_ok"] is ok


def test_parity_turns_dropout_off():
    r = inspection.inspect(RunConfig(model="transformer", dataset="synthetic", batch_size=4))  # its dropout
    assert r["parity"]["ok"], r["parity"]["worst_rel_err"]


def test_relative_error_edges():
    assert opcheck.relative_error(torch.zeros(3), torch.zeros(3)) == 0.0
    assert opcheck.relative_error(torch.ones(3), torch.zeros(3)) == math.inf
    assert opcheck.relative_error(torch.tensor([float("nan")]), torch.ones(1)) == math.inf
    assert opcheck.relative_error(torch.tensor([1.0, 2.0]), torch.tensor([1.0, 4.0])) == 0.5


# ---------------------------------------------------------------- sweep


def test_a_sweep_on_cuda_in_full_fp32_says_why_tf32_was_off():
    from mpsstudio.engine.basics.config import TF32_NOTE

    results = [point(d, b, 100.0 * b) for d in ("cpu", "cuda:0") for b in (1, 2, 4)]
    r = sweep.analyse(results, RunConfig())
    assert r["notes"] == [TF32_NOTE] and r["sentence"].endswith(TF32_NOTE)
    assert tools.checked("sweep", json.loads(json.dumps(r)))["notes"] == [TF32_NOTE]
    assert sweep.analyse([point("cpu", 1, 10.0)], RunConfig())["notes"] == []


def test_sweep_crossover_and_best():
    results = [point("cpu", b, 100.0 * b ** 0.5) for b in (1, 2, 4, 8, 16, 32)]
    results += [point("mps", b, 30.0 * b) for b in (1, 2, 4, 8, 16, 32)]  # slower until 16 (120 vs 30*4)
    r = sweep.analyse(results, RunConfig())
    c = r["crossover"]
    assert c["device"] == "mps" and c["baseline"] == "cpu"
    assert c["batch_size"] == 16 and c["largest_batch"] == 32
    assert c["speedup_at_largest"] == pytest.approx(30 * 32 / (100 * 32 ** 0.5))
    assert r["best"] == {"cpu": 32, "mps": 32}
    assert "mps is faster than the cpu from batch 16 on; at batch 32 it is 1.70x" in r["sentence"]
    assert [p["batch_size"] for p in r["points"] if p["device"] == "mps"] == [1, 2, 4, 8, 16, 32]
    assert set(r["points"][0]) >= {"device", "batch_size", "samples_per_s", "samples_per_s_iqr", "step_ms"}
    assert tools.checked("sweep", json.loads(json.dumps(r)))["crossover"]["batch_size"] == 16


def test_sweep_noise_is_not_a_win():
    """A 3 % lead with 30 % window noise is no crossover."""
    results = [point("cpu", 8, 100.0, spread=0.3), point("mps", 8, 103.0, spread=0.3)]
    r = sweep.analyse(results)
    assert r["crossover"]["never_faster"] and r["crossover"]["batch_size"] is None
    assert "is not clearly faster" in r["sentence"]


def test_sweep_without_cpu_has_no_crossover():
    r = sweep.analyse([point("mps", 8, 100.0)])
    assert r["crossover"] is None and r["best"] == {"mps": 8}


def test_sweep_run_stops_a_device_after_its_failure():
    ran = []

    def run_point(cfg):
        ran.append((cfg.device, cfg.batch_size))
        failed = cfg.device == "mps" and cfg.batch_size >= 4
        r = point(cfg.device, cfg.batch_size, 10.0, status="failed" if failed else "finished")
        r.config = cfg
        return r
    results = sweep.run(RunConfig(), ["cpu", "mps"], [1, 2, 4, 8], run_point=run_point, steps=5, warmup=1)
    assert ran == [("cpu", 1), ("mps", 1), ("cpu", 2), ("mps", 2), ("cpu", 4), ("mps", 4), ("cpu", 8)]
    assert all(r.config.steps == 5 and r.config.warmup_steps == 1 and r.config.epochs is None for r in results)


def test_sweep_stop_ends_it():
    calls = []
    results = sweep.run(RunConfig(), ["cpu"], [1, 2, 4], run_point=lambda c: calls.append(c) or point("cpu", 1, 1.0),
                        should_stop=lambda: len(calls) >= 2)
    assert len(results) == 2


@pytest.mark.parametrize("text, words", [("1,x", "'x' is not one"), ("0", "'0' is not one"), ("", "'' is not one"),
                                         ("1,,2", "'' is not one"), (",".join(str(i) for i in range(1, 70)),
                                                                     "at most 64")])
def test_sweep_bad_batch_sizes(text, words):
    with pytest.raises(UserError, match=words):
        sweep.parse_batch_sizes(text)


def test_sweep_batch_sizes_sorted_unique():
    assert sweep.parse_batch_sizes(" 8, 2,2,1 ") == [1, 2, 8]
    assert sweep.default_batch_sizes()[-1] == 512


# ---------------------------------------------------------------- a tool's answer is checked

@pytest.mark.parametrize("answer", [
    None, [], "text", {"largest_batch": 1},  # no sentence, no probes
    {"sentence": "x", "largest_batch": "1", "fastest_batch": 1, "probes": []},
    {"sentence": "x", "largest_batch": True, "fastest_batch": 1, "probes": []},
    {"sentence": "x", "largest_batch": 1, "fastest_batch": 1, "probes": [{"batch_size": 1, "fits": "yes"}]},
    {"sentence": "x", "largest_batch": 1, "fastest_batch": 1,
     "probes": [{"batch_size": 1, "fits": True, "samples_per_s": float("nan"), "memory": 1, "reason": ""}]},
    {"sentence": "x" * (20_000 + 1), "largest_batch": 1, "fastest_batch": 1, "probes": []},
    {"sentence": "x", "largest_batch": 1, "fastest_batch": 1, "probes": [], "deep": [[[[[[[[[[1]]]]]]]]]]},
    {"sentence": "x", "largest_batch": 1, "fastest_batch": 1, "probes": [], "obj": object()},
    {"sentence": "x", "largest_batch": 1, "fastest_batch": 1, "probes": [], 3: "non-text key"},
])
def test_a_forged_max_batch_answer_is_refused(answer):
    with pytest.raises(UserError, match=r"^The max-batch tool's process sent a max-batch result whose .+, so it was "
                                        r"not kept\.$"):
        tools.checked("max-batch", answer)


@pytest.mark.parametrize("change", [
    lambda r: r.update(probe={"ok": "yes", "detail": ""}),
    lambda r: r.update(fallback_ops=[{"op": 1, "count": 1, "share": 0.1}]),
    lambda r: r["parity"].update(ok=1),
    lambda r: r["parity"]["grads"].append({"name": "w", "max_rel_err": "big"}),
    lambda r: r["parity"].pop("precision"),
])
def test_a_forged_inspect_answer_is_refused(change):
    good = {"sentence": "s", "device": "mps", "probe": {"ok": True, "detail": ""}, "fallback_ops": [],
            "parity": {"ok": True, "tolerance": 1e-3, "loss_rel_err": 0.0, "logits_max_rel_err": 0.0,
                       "worst_rel_err": 0.0, "grads": [], "precision": "fp32"}}
    tools.checked("inspect", json.loads(json.dumps(good)))
    change(good)
    with pytest.raises(UserError, match="sent an? inspect result whose (probe|fallback_ops|parity)"):
        tools.checked("inspect", good)


def test_unknown_tool_is_one_sentence():
    with pytest.raises(UserError, match=r"Unknown tool 'nope'"):
        tools.run("nope", {"config": {}})
    with pytest.raises(UserError, match="needs a run configuration"):
        tools.run("inspect", {"config": "x"})


# ---------------------------------------------------------------- history

def test_tool_results_are_kept_and_read_back(tmp_path):
    store = RunStore(tmp_path / "h.sqlite")
    r = sweep.analyse([point("cpu", 1, 10.0), point("cpu", 2, 15.0)], RunConfig())
    store.save_tool(ToolRecord(kind="sweep", result=r))
    store.close()
    again = RunStore(tmp_path / "h.sqlite")
    [record] = again.tools()
    assert record.kind == "sweep" and record.result["best"] == {"cpu": 2} and not again.tool_notices


def test_a_damaged_tool_row_is_listed_as_one_that_cannot_be_shown(tmp_path):
    path = tmp_path / "h.sqlite"
    store = RunStore(path)
    store.save_tool(ToolRecord(kind="sweep", result=sweep.analyse([point("cpu", 1, 10.0)])))
    store.close()
    with sqlite3.connect(path) as db:
        db.execute("INSERT INTO tools VALUES ('bad1', '2026-01-01T00:00:00+00:00', 'sweep', '{not json')")
        db.execute("INSERT INTO tools VALUES ('bad2', '2026-01-01T00:00:00+00:00', 'inspect', '{\"sentence\": 3}')")
        db.execute("INSERT INTO tools VALUES ('bad3', '2026-01-01T00:00:00+00:00', 'rm -rf', '{}')")
    again = RunStore(path)
    found = {t.id: t for t in again.tools()}
    assert [t.kind for t in found.values() if not t.problem] == ["sweep"]
    assert found["bad1"].problem == "This sweep result cannot be shown: its stored JSON cannot be read."
    assert found["bad2"].problem == ("This inspect result cannot be shown: its sentence is 3, not a text.")
    assert found["bad3"].problem.startswith("This rm -rf result cannot be shown: its content is of a kind no tool")
    assert again.tool_notices and again.tool_notices[0].startswith("3 stored tool results cannot be shown")
    assert again.delete_any(["bad1", "bad2", "bad3"]) == (0, 3) and all(not t.problem for t in again.tools())
    assert again.all() == [] and again.notices == []  # the runs' notices are their own


def test_an_older_history_gains_the_tools_table(tmp_path):
    path = tmp_path / "old.sqlite"
    with sqlite3.connect(path) as db:
        from mpsstudio.engine.history.schema import _SCHEMA

        db.executescript(_SCHEMA.split("CREATE TABLE IF NOT EXISTS tools")[0])
        db.execute("PRAGMA user_version=1")
    store = RunStore(path)
    assert store.tools() == []
    store.save_tool(ToolRecord(kind="sweep", result=sweep.analyse([point("cpu", 1, 10.0)])))
    assert len(store.tools()) == 1


def test_a_read_only_older_history_shows_no_tools(tmp_path, monkeypatch):
    """An older history opened read-only has no tools table and cannot get one: no tools, nothing written.
    (Root ignores file modes, so the decision itself is faked, as in test_history_survives.)"""
    path = tmp_path / "old.sqlite"
    with sqlite3.connect(path) as db:
        from mpsstudio.engine.history.schema import _SCHEMA

        db.executescript(_SCHEMA.split("CREATE TABLE IF NOT EXISTS tools")[0])
        db.execute("PRAGMA user_version=1")
    before = path.read_bytes()
    monkeypatch.setattr(os, "access", lambda p, mode: mode != os.W_OK)
    store = RunStore(path)
    assert store.read_only and store.tools() == []
    with pytest.raises(UserError, match="read-only, so this result is not kept"):
        store.save_tool(ToolRecord(kind="sweep", result={}))
    store.close()
    assert path.read_bytes() == before


# ---------------------------------------------------------------- the verdict names what an inspection found

def mac_pair(mps_rate=300.0):
    from tests.support.runs import noisy_rates, run_with

    env = {"hostname": "m2.local"}
    cpu = run_with("cpu", noisy_rates(1000, 0.02, seed=1), machine="Apple M2 Pro, macOS 14.5", env=env)
    mps = run_with("mps", noisy_rates(mps_rate, 0.02, seed=2), machine="Apple M2 Pro, macOS 14.5", env=env)
    return cpu, mps


def an_inspection(run, ok=True, ops=(("aten::nonzero", 12, 0.4), ("aten::_unique2", 2, 0.1))):
    return {"device": run.config.device, "config": run.config.to_dict(), "env": dict(run.env),
            "parity": {"ok": ok, "worst_rel_err": 0.3 if not ok else 1e-6, "precision": "fp32", "tolerance": 1e-2,
                       "loss_rel_err": 1e-7, "logits_max_rel_err": 1e-7, "grads": []},
            "fallback_ops": [{"op": o, "count": n, "share": f} for o, n, f in ops], "fallback_share": 0.5}


def test_the_verdict_names_fallbacks_and_a_parity_failure():
    from mpsstudio.engine.analysis.compare import compare
    from mpsstudio.engine.analysis.verdict import comparison_record, verdicts

    cpu, mps = mac_pair()
    [c] = compare([cpu, mps])
    plain = verdicts(c)[0]
    assert "ran on the CPU" not in plain
    found = verdicts(c, [an_inspection(mps, ok=False)])[0]
    assert found.startswith(plain[:-1])
    assert ("An inspection found its results differ from the float64 CPU reference beyond tolerance (relative "
            "error 3.0e-01, fp32)") in found
    assert "2 operations ran on the CPU (aten::nonzero, aten::_unique2, 50 % of the time spent in operations)" in found
    assert comparison_record(c, [an_inspection(mps)])["devices"][1]["verdict"].count("ran on the CPU") == 1


@pytest.mark.parametrize("change", [
    lambda r: r["config"].update(model="resnet18"), lambda r: r["config"].update(precision="bf16"),
    lambda r: r["env"].update(hostname="other.local"), lambda r: r.update(device="cuda:0"),
])
def test_an_inspection_of_another_setup_or_machine_is_not_used(change):
    from mpsstudio.engine.analysis.compare import compare
    from mpsstudio.engine.analysis.verdict import verdicts

    cpu, mps = mac_pair()
    other = an_inspection(mps)
    change(other)
    [c] = compare([cpu, mps])
    assert verdicts(c, [other]) == verdicts(c)


def test_the_latest_matching_inspection_is_used():
    from mpsstudio.engine.analysis.compare import compare
    from mpsstudio.engine.analysis.verdict import verdicts

    cpu, mps = mac_pair()
    [c] = compare([cpu, mps])
    text = verdicts(c, [an_inspection(mps, ok=False), an_inspection(mps, ops=())])[0]
    assert "beyond tolerance" not in text and "ran on the CPU" not in text


def test_bench_inspects_after_an_mps_run(monkeypatch, capsys):
    from mpsstudio.cli import tools as cli_tools
    from mpsstudio.engine import process

    cpu, mps = mac_pair()
    asked = []
    monkeypatch.setattr(process, "run_tool", lambda name, payload, **k: asked.append(payload) or {
        **an_inspection(mps), "sentence": "s", "probe": {"ok": True, "detail": ""}})
    found = cli_tools.inspect_after([cpu, mps, mps], save=True)
    assert len(asked) == 1 and asked[0]["config"]["device"] == "mps" and len(found) == 1
    assert [t.kind for t in RunStore().tools()] == ["inspect"]
    assert "--no-inspect skips it" in capsys.readouterr().err


def test_bench_inspection_failure_is_one_line(monkeypatch, capsys):
    from mpsstudio.cli import tools as cli_tools
    from mpsstudio.engine import process

    cpu, mps = mac_pair()

    def fails(*a, **k):
        raise UserError("The process running the inspect tool was killed by signal 6 (abort).")
    monkeypatch.setattr(process, "run_tool", fails)
    assert cli_tools.inspect_after([cpu, mps], save=True) == []
    err = capsys.readouterr().err
    assert "the inspection after the mps run did not finish: The process running the inspect tool was killed" in err
    assert RunStore().tools() == []


def test_no_inspection_without_an_mps_run(monkeypatch):
    from mpsstudio.cli import tools as cli_tools
    from mpsstudio.engine import process

    monkeypatch.setattr(process, "run_tool", lambda *a, **k: pytest.fail("inspected a CPU-only comparison"))
    cpu, _ = mac_pair()
    assert cli_tools.inspect_after([cpu], save=True) == []


def test_the_documented_rules_are_the_code_s():
    """docs/architecture.md states the tolerances and limits the code uses."""

    doc = (ROOT / "docs" / "architecture.md").read_text()
    t = opcheck.TOLERANCES
    assert (f"fp32 {t['fp32']:.0e}, TF32 {t['tf32']:.0e}, fp16 {t['fp16']:.0e}, bf16\n  {t['bf16']:.0e}"
            .replace("e-0", "e-") in doc)
    assert f"at most {opcheck.CPU_FACTOR:.0f}x the CPU's own error" in doc
    assert f"within 1/{maxbatch.RESOLUTION}" in doc and f"{maxbatch.PROBE_STEPS} timed full\n  training steps" in doc
    assert f"up to a\n  batch of {maxbatch.EXACT_UP_TO:,}" in doc and f"exceed {maxbatch.PREDICT_MARGIN:g}x the limit" in doc
    assert f"more than {maxbatch.SWAP_LIMIT >> 20} MiB" in doc and "below half the best" in doc
    assert maxbatch.COLLAPSE == 0.5 and memory.CPU_SHARE == 0.5 and maxbatch.PRESSURE_SHARE == 0.5
    assert memory.MPS_FRACTION_MAX == 2.0 and "at most\n  twice that" in doc
    assert "while it used at least half the\n  limit" in doc
    assert f"(default {sweep.DEFAULT_STEPS}:" in doc and f"... {sweep.DEFAULT_MAX}." in doc


@pytest.mark.parametrize("change", [
    lambda r: r.update(crossover={"device": "mps", "batch_size": "16"}),
    lambda r: r.update(crossover={"device": "mps", "batch_size": 0}),
    lambda r: r.update(crossover=[1]),
    lambda r: r["points"][0].update(batch_size=0),
    lambda r: r["points"][0].update(samples_per_s=-5.0),
    lambda r: r.update(crossovers="x"),
])
def test_a_forged_sweep_is_refused(change):
    good = json.loads(json.dumps(sweep.analyse([point("cpu", 1, 10.0), point("mps", 1, 20.0)])))
    tools.checked("sweep", json.loads(json.dumps(good)))
    change(good)
    with pytest.raises(UserError, match=r"^The sweep tool's process sent a sweep result whose (crossovers?|points)"):
        tools.checked("sweep", good)


def test_an_inspection_s_words_follow_its_numbers_on_every_read():
    from tests.support.results import inspect_result

    forged = inspect_result(ok=False)
    forged["sentence"] = "mps matches the float64 CPU reference: all is well."
    read = tools.checked("inspect", forged)
    assert "differs from the float64 CPU reference beyond tolerance" in read["sentence"]
    assert "all is well" not in read["sentence"]
