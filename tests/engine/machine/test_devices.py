"""Device discovery, reasons, sync/memory readings, precision support and the environment record.

There is no MPS or CUDA here: those paths are faked with monkeypatch.
"""

from __future__ import annotations

import json
import sys
from types import SimpleNamespace

import pytest
import torch

from mpsstudio.engine.machine import devices, environment, precision
from mpsstudio.engine.machine.devices import Device
from mpsstudio.engine.basics.errors import UserError
from tests.support.fake_mps import fake_mac

ON_LINUX = sys.platform.startswith("linux")


def fake_cuda(monkeypatch, names=("NVIDIA H100 80GB HBM3",)):
    monkeypatch.setattr(torch.version, "cuda", "12.4")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: len(names))
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda i=0: names[i])
    monkeypatch.setattr(torch.cuda, "get_device_properties", lambda i=0: SimpleNamespace(total_memory=80 * 2**30))


def no_cuda_gpu(monkeypatch):
    monkeypatch.setattr(torch.version, "cuda", "12.4")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)


# ---------------------------------------------------------------- this machine


@pytest.mark.skipif(not ON_LINUX, reason="checks this Linux build box")
def test_real_discovery_on_this_linux_box():
    found = {d.id: d for d in devices.discover_devices()}
    assert list(found)[:2] == ["cpu", "mps"]

    cpu = found["cpu"]
    assert cpu.available and cpu.reason == ""
    assert cpu.name and cpu.name != "unknown CPU"
    assert cpu.threads == torch.get_num_threads() >= 1
    assert cpu.memory_total > 2**28
    assert cpu.torch_device == "cpu"

    # The CUDA wheel reports is_built() False on Linux; the platform is the reason a user can act on.
    assert torch.backends.mps.is_built() is False
    assert found["mps"].available is False
    assert found["mps"].reason == "not an Apple Silicon Mac"

    if not torch.cuda.is_available():
        assert found["cuda"].available is False
        expected = "this PyTorch was built without CUDA" if torch.version.cuda is None else "no NVIDIA GPU"
        assert found["cuda"].reason.startswith(expected)


def test_cpu_memory_reading_is_rss():
    cpu = devices.resolve_device("cpu")
    reading = cpu.memory()
    assert set(reading) <= {"rss", "process", "swap_used"} and reading["process"] == reading["rss"]
    assert reading["rss"] > 10 * 2**20
    assert cpu.in_use(reading) == reading["rss"]
    cpu.synchronize()
    cpu.reset_peak()


def test_to_dict_is_plain():
    d = Device(id="cuda:1", kind="cuda", available=True, name="GPU", memory_total=5)
    assert d.to_dict() == {
        "id": "cuda:1", "kind": "cuda", "available": True, "reason": "", "name": "GPU",
        "memory_total": 5, "threads": None, "torch_device": "cuda:1",
    }
    assert d.index == 1


# ---------------------------------------------------------------- MPS reasons


def test_mps_reason_linux(monkeypatch):
    monkeypatch.setattr(sys, "platform", "linux")
    monkeypatch.setattr(torch.backends.mps, "is_available", lambda: False)
    assert devices.mps_unavailable_reason() == "not an Apple Silicon Mac"


def test_mps_reason_built_without(monkeypatch):
    fake_mac(monkeypatch, built=False)
    assert devices.mps_unavailable_reason() == "this PyTorch was built without MPS"


def test_mps_reason_intel_mac(monkeypatch):
    fake_mac(monkeypatch, machine="x86_64", sysctls={"machdep.cpu.brand_string": "Intel(R) Core(TM) i9"})
    assert devices.mps_unavailable_reason() == "not an Apple Silicon Mac"
    assert devices.apple_chip_name() == ""


def test_mps_reason_rosetta(monkeypatch):
    fake_mac(monkeypatch, machine="x86_64", sysctls={"sysctl.proc_translated": "1"})
    assert "Rosetta" in devices.mps_unavailable_reason()
    assert devices.apple_chip_name() == "Apple M1 Pro"


TORCH = torch.__version__.split("+")[0]


def test_mps_reason_old_macos(monkeypatch):
    """torch 2.11-2.14 run MPS on macOS 14.0 and later (engine/machine/apple.py): macOS 13.6 is told so, with the update
    and, outside the app, the PyTorch that still runs the Apple GPU there."""
    monkeypatch.setattr(torch, "__version__", "2.14.1")
    fake_mac(monkeypatch, version="13.6")
    reason = devices.mps_unavailable_reason()
    assert reason == "macOS 14.0 or newer is needed for the Apple GPU with PyTorch 2.14.1 (this Mac runs macOS 13.6)"
    assert devices.mps_fix(reason) == ("Update to macOS 14 Sonoma or later in System Settings \u2192 General \u2192 "
                                       "Software Update, then press Check Again; or keep this macOS with a PyTorch "
                                       "that runs the Apple GPU there: `python3 -m pip install 'torch<2.9' "
                                       "torchvision`.")
    monkeypatch.setattr(devices.sys, "frozen", True, raising=False)  # the app carries its own PyTorch
    assert devices.mps_fix(reason).endswith("then press Check Again.")
    fake_mac(monkeypatch, version="14.0")
    assert devices.mps_unavailable_reason().startswith("PyTorch reports MPS unavailable")


def test_the_minimum_macos_follows_the_loaded_torch(monkeypatch):
    """torch 2.15 needs macOS 15 for MPS ("The MPS backend is supported on macOS 15.0+" in its dylib), though its wheel
    installs on macOS 14: a pip user there is told that, not "a virtual machine or a broken install"."""
    monkeypatch.setattr(torch, "__version__", "2.15.0")
    fake_mac(monkeypatch, version="14.6")
    reason = devices.mps_unavailable_reason()
    assert reason == "macOS 15.0 or newer is needed for the Apple GPU with PyTorch 2.15.0 (this Mac runs macOS 14.6)"
    assert "macOS 15 Sequoia" in devices.mps_fix(reason) and "'torch<2.15'" in devices.mps_fix(reason)
    monkeypatch.setattr(torch, "__version__", "2.8.0")
    fake_mac(monkeypatch, version="13.2")
    assert devices.mps_unavailable_reason().startswith("PyTorch reports MPS unavailable")  # 2.8 runs MPS on 13


def test_mps_reason_unexplained(monkeypatch):
    fake_mac(monkeypatch, version="14.5")
    reason = devices.mps_unavailable_reason()
    assert reason.startswith("PyTorch reports MPS unavailable even though")
    assert "14.5" in reason


def test_mps_available_on_faked_mac(monkeypatch):
    fake_mac(monkeypatch, version="14.5", available=True)
    mps = devices.resolve_device("mps")
    assert (mps.id, mps.available, mps.reason) == ("mps", True, "")
    assert mps.name == "Apple M1 Pro"
    assert mps.memory_total == 32 * 2**30


# ---------------------------------------------------------------- MPS sync and memory


def test_mps_synchronize_and_memory(monkeypatch):
    fake = fake_mac(monkeypatch, available=True)
    mps = devices.resolve_device("mps")
    assert mps.torch_device == "mps"
    with fake.activate():
        mps.synchronize()
        mps.synchronize()
        assert fake.syncs == 2
        before = mps.memory()
        block = torch.zeros(1 << 18, device=mps.torch_device)  # 1 MiB on the faked GPU
        reading = mps.memory()
        assert set(reading) - {"process", "swap_used"} == {"current_allocated", "driver_allocated", "recommended_max",
                                                           "peak"}
        assert all(type(v) is int for v in reading.values())  # torch returns ints in bytes
        assert reading["current_allocated"] - before["current_allocated"] == 1 << 20
        assert reading["driver_allocated"] >= reading["current_allocated"]
        assert reading["recommended_max"] == fake.recommended_max
        assert mps.in_use(reading) == reading["current_allocated"]
        assert fake.syncs == 2  # a memory reading never syncs
        assert block.device.type == "mps" and block.sum().item() == 0


def test_the_mps_peak_is_pytorch_s_through_torch_accelerator_and_reset_per_run(monkeypatch):
    """torch.accelerator's own Python over the faked MPSHeapAllocatorImpl::getDeviceStats: the peak counts a step's
    freed activations, which the in-use figure at a window's end no longer holds; reset_peak starts it again."""
    fake = fake_mac(monkeypatch, available=True)
    mps = devices.resolve_device("mps")
    assert mps.memory_measure() == "peak_allocated"
    with fake.activate():
        kept = torch.zeros(1 << 18, device="mps")  # 1 MiB that stays
        mps.reset_peak()
        activations = torch.zeros(1 << 20, device="mps")  # 4 MiB freed before the reading
        del activations
        reading = mps.memory()
        assert reading["current_allocated"] == 1 << 20
        assert reading["peak"] == 5 << 20 == torch.accelerator.max_memory_allocated(0)
        mps.reset_peak()
        assert mps.memory()["peak"] == 1 << 20
        assert kept.sum().item() == 0


def test_an_mps_without_the_accelerator_stats_says_its_figure_is_not_a_peak(monkeypatch):
    fake = fake_mac(monkeypatch, available=True, device_stats=False)
    mps = devices.resolve_device("mps")
    with fake.activate():
        assert "peak" not in mps.memory()
        mps.reset_peak()  # nothing to reset: no error
    assert mps.memory_measure() == "in_use_at_window_ends"


def test_the_peak_column_says_which_figure_it_is():
    from mpsstudio.engine.basics.config import RunConfig
    from mpsstudio.engine.basics.results import RunResult
    from mpsstudio.engine.history.columns import cell_text

    def run(device, measure):
        r = RunResult(config=RunConfig(model="mlp", dataset="synthetic", device=device))
        r.summary = r.summary.replaced(peak_memory=5 << 20, memory_measure=measure)
        return r

    assert cell_text("peak_memory_bytes", run("mps", "in_use_at_window_ends"), {}).endswith(" in use")
    assert cell_text("peak_memory_bytes", run("cpu", "rss_growth"), {}).startswith("+")
    assert cell_text("memory_measure", run("mps", "peak_allocated"), {}) == "peak allocated by PyTorch"
    assert cell_text("memory_measure", run("mps", "mlx_peak"), {}) == "peak by MLX"
    assert cell_text("memory_measure", run("cuda", "allocator"), {}) == "peak allocated by PyTorch"  # older CUDA runs
    assert cell_text("memory_measure", run("mps", "in_use_at_window_ends"), {}).startswith("in use at window ends")


# ---------------------------------------------------------------- CUDA


def test_cuda_reasons(monkeypatch):
    monkeypatch.setattr(torch.version, "cuda", None)
    monkeypatch.setattr(torch.version, "hip", None, raising=False)
    assert devices.cuda_unavailable_reason() == "this PyTorch was built without CUDA"
    no_cuda_gpu(monkeypatch)
    assert devices.cuda_unavailable_reason() == "no NVIDIA GPU or driver found"
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    assert devices.cuda_unavailable_reason() == "no NVIDIA GPU or driver found (CUDA_VISIBLE_DEVICES='')"


def test_faked_cuda_discovery_and_resolve(monkeypatch):
    fake_cuda(monkeypatch, names=("NVIDIA A", "NVIDIA B"))
    found = [d for d in devices.discover_devices() if d.kind == "cuda"]
    assert [(d.id, d.name, d.available) for d in found] == [
        ("cuda:0", "NVIDIA A", True),
        ("cuda:1", "NVIDIA B", True),
    ]
    assert found[0].memory_total == 80 * 2**30

    assert devices.resolve_device("cuda").id == "cuda:0"
    assert devices.resolve_device(" CUDA:1 ").name == "NVIDIA B"
    with pytest.raises(UserError) as err:
        devices.resolve_device("cuda:2")
    assert str(err.value) == "cuda:2 is not available: this machine has 2 CUDA GPUs (cuda:0 to cuda:1)."


def test_cuda_memory_reading(monkeypatch):
    monkeypatch.setattr(torch.cuda, "memory_allocated", lambda i: 10 + i)
    monkeypatch.setattr(torch.cuda, "memory_reserved", lambda i: 20 + i)
    monkeypatch.setattr(torch.cuda, "max_memory_allocated", lambda i: 30 + i)
    reset = []
    monkeypatch.setattr(torch.cuda, "reset_peak_memory_stats", reset.append)
    gpu = Device(id="cuda:1", kind="cuda", available=True)
    reading = gpu.memory()
    assert {k: reading[k] for k in ("allocated", "reserved", "peak_allocated")} == {"allocated": 11, "reserved": 21,
                                                                                  "peak_allocated": 31}
    assert reading["process"] > 0  # the run process's own memory beside the allocator's
    assert gpu.in_use(reading) == 11
    gpu.reset_peak()
    assert reset == [1]


# ---------------------------------------------------------------- resolve errors


@pytest.mark.parametrize("spec", ["tpu", "gpu", "cuda:x", ""])
def test_resolve_unknown(spec):
    with pytest.raises(UserError) as err:
        devices.resolve_device(spec)
    message = str(err.value)
    assert message == f"Unknown device {spec!r}; use cpu, mps or cuda (cuda:N for a specific GPU)."
    assert "\n" not in message


def test_resolve_unavailable(monkeypatch):
    fake_mac(monkeypatch, version="13.6")
    with pytest.raises(UserError) as err:
        devices.resolve_device("mps")
    assert str(err.value) == (f"mps is not available: macOS 14.0 or newer is needed for the Apple GPU with PyTorch "
                              f"{TORCH} (this Mac runs macOS 13.6).")

    no_cuda_gpu(monkeypatch)
    with pytest.raises(UserError) as err:
        devices.resolve_device("cuda")
    assert str(err.value) == "cuda is not available: no NVIDIA GPU or driver found."
    with pytest.raises(UserError) as err:
        devices.resolve_device("cuda:1")
    assert str(err.value) == "cuda:1 is not available: no NVIDIA GPU or driver found."


# ---------------------------------------------------------------- precision and GradScaler

MPS = Device(id="mps", kind="mps", available=True, torch_device="cpu")
CPU = Device(id="cpu", kind="cpu", available=True)


def test_mps_bf16_needs_macos_14(monkeypatch):
    fake_mac(monkeypatch, version="13.6", available=True)
    monkeypatch.setattr(torch, "__version__", "2.6.0")
    reason = precision.precision_unsupported_reason(MPS, "bf16")
    assert reason == "bf16 autocast on MPS needs macOS 14 or newer (this Mac runs 13.6)"
    fake_mac(monkeypatch, version="14.0", available=True)
    assert precision.precision_unsupported_reason(MPS, "bf16") == ""
    monkeypatch.setattr(torch, "__version__", "2.5.1")
    assert "PyTorch 2.6 or newer (this is 2.5.1)" in precision.precision_unsupported_reason(MPS, "bf16")


def test_mps_fp16_needs_torch_2_5(monkeypatch):
    monkeypatch.setattr(torch, "__version__", "2.4.0")
    reason = precision.precision_unsupported_reason(MPS, "fp16")
    assert reason == "fp16 autocast on MPS needs PyTorch 2.5 or newer (this is 2.4.0)"
    monkeypatch.setattr(torch, "__version__", "2.5.0+cpu")
    assert precision.precision_unsupported_reason(MPS, "fp16") == ""
    assert precision.precision_unsupported_reason(MPS, "fp32") == ""


@pytest.mark.parametrize("chip, emulated", [("Apple M1 Pro", True), ("Apple M2", True), ("Apple M3 Max", False),
                                           ("Apple M5", False), ("Apple M12", False)])
def test_bf16_on_an_m1_or_m2_gpu_is_said_to_be_emulated_and_planned_with_the_words(monkeypatch, chip, emulated):
    from mpsstudio.engine.basics.config import RunConfig
    from mpsstudio.engine.run import session

    fake_mac(monkeypatch, version="14.5", available=True, chip=chip)
    mps = devices.resolve_device("mps")
    assert precision.precision_unsupported_reason(mps, "bf16") == ""  # it runs: said, not refused
    caveat = precision.precision_caveat(mps, "bf16")
    assert bool(caveat) is emulated and precision.precision_caveat(mps, "fp16") == ""
    plan = session.plan(RunConfig(model="mlp", dataset="synthetic", precision="bf16"), ["mps"])
    assert any("is emulated" in n for n in plan.notes) is emulated


def test_unknown_precision():
    reason = precision.precision_unsupported_reason(CPU, "int8")
    assert reason == "unknown precision 'int8'; choose fp32, fp16 or bf16"


def test_cpu_precisions_on_this_torch():
    # Probed, not assumed: this torch runs both autocast dtypes on the CPU.
    assert precision.precision_unsupported_reason(CPU, "fp32") == ""
    assert precision.precision_unsupported_reason(CPU, "bf16") == ""
    assert precision.precision_unsupported_reason(CPU, "fp16") == ""


def test_grad_scaler(monkeypatch):
    assert precision.grad_scaler_supported(Device(id="cuda:0", kind="cuda", available=True)) is True
    assert precision.grad_scaler_supported(CPU) is True
    monkeypatch.setattr(torch, "__version__", "2.7.1")
    assert precision.grad_scaler_supported(MPS) is False
    monkeypatch.setattr(torch, "__version__", "2.8.0")
    assert precision.grad_scaler_supported(MPS) is True


def test_version_parsing():
    assert devices._version_tuple("2.6.0+cu124") == (2, 6, 0)
    assert devices._version_tuple("2.10.0a0") == (2, 10, 0)
    assert devices._version_tuple("14.5") == (14, 5)
    assert devices._version_tuple("") == ()


# ---------------------------------------------------------------- environment


def test_environment_record(monkeypatch):
    monkeypatch.setenv("PYTORCH_ENABLE_MPS_FALLBACK", "1")
    monkeypatch.delenv("MKL_NUM_THREADS", raising=False)
    monkeypatch.setenv("NCCL_NVLS_ENABLE", "0")  # the lent multi-GPU hosts' multicast switch: recorded
    env = environment.environment()
    expected = {
        "os", "platform", "machine", "hostname", "cpu", "chip", "gpus", "python", "torch", "torchvision",
        "cuda", "cudnn", "mps_built", "mps_available", "threads", "interop_threads", "tf32_matmul",
        "tf32_cudnn", "env", "mpsstudio", "macos_build", "torch_git", "cuda_driver", "python_executable",
        "python_env",
    }
    assert set(env) == expected
    assert env["torch_git"] == torch.version.git_version and env["python_executable"] == sys.executable
    assert env["macos_build"] is None  # not a Mac
    assert env["cuda_driver"] is None or env["cuda_driver"][0].isdigit()
    assert json.loads(json.dumps(env)) == env
    assert env["torch"] == str(torch.__version__)
    assert env["threads"] == torch.get_num_threads()
    assert env["env"]["PYTORCH_ENABLE_MPS_FALLBACK"] == "1"
    assert "MKL_NUM_THREADS" not in env["env"] and env["env"]["NCCL_NVLS_ENABLE"] == "0"
    assert env["mpsstudio"] == "0.1.0"
    if ON_LINUX:
        assert env["os"].startswith("Linux ") and env["chip"] == ""


def test_environment_on_faked_mac(monkeypatch):
    fake_mac(monkeypatch, version="14.5", available=True)
    env = environment.environment()
    assert env["os"] == "macOS 14.5"
    assert env["chip"] == "Apple M1 Pro"
    assert env["macos_build"] == "23F79"  # sysctl kern.osversion, as the fake Mac answers it
    assert environment.machine_label(env) == "Apple M1 Pro, macOS 14.5"


def test_machine_labels():
    gpu_env = {"gpus": ["NVIDIA H100 80GB HBM3"], "hostname": "box", "chip": "", "os": "Linux 6.1"}
    assert environment.machine_label(gpu_env) == "NVIDIA H100 80GB HBM3 on box"
    two = dict(gpu_env, gpus=["NVIDIA H100 80GB HBM3"] * 2)
    assert environment.machine_label(two) == "2x NVIDIA H100 80GB HBM3 on box"
    cpu_env = {"cpu": "Intel(R) Xeon(R) Processor", "os": "Linux 6.1", "gpus": [], "chip": ""}
    assert environment.machine_label(cpu_env) == "Intel(R) Xeon(R) Processor (Linux)"
    assert environment.machine_label({}) == "unknown CPU (unknown OS)"


def test_doctor_rows(monkeypatch):
    monkeypatch.delenv("PYTORCH_ENABLE_MPS_FALLBACK", raising=False)
    no_cuda_gpu(monkeypatch)
    rows = environment.doctor()
    assert all(isinstance(k, str) and isinstance(v, str) for k, v in rows)
    table = dict(rows)
    assert table["PyTorch"] == str(torch.__version__)
    assert table["CUDA"] == "no: no NVIDIA GPU or driver found"
    assert table["CPU fallback for MPS"].startswith("set per run (on by default")
    assert table["CPU threads"] == str(torch.get_num_threads())
    if ON_LINUX:
        assert table["macOS"] == "not macOS"
        assert table["MPS available"] == "no: not an Apple Silicon Mac"
        assert table["MPS built"] == "no: this PyTorch has no MPS support"


def test_doctor_on_faked_mac_with_gpu_fallback(monkeypatch):
    fake_mac(monkeypatch, version="14.5", available=True)
    monkeypatch.setenv("PYTORCH_ENABLE_MPS_FALLBACK", "1")
    fake_cuda(monkeypatch)
    table = dict(environment.doctor())
    assert table["MPS available"] == "yes"
    assert table["MPS built"] == "yes"
    assert table["macOS"] == "14.5"
    assert table["Apple chip"] == "Apple M1 Pro"
    assert table["CPU fallback for MPS"].startswith("set per run")
    assert table["Set: PYTORCH_ENABLE_MPS_FALLBACK"] == "1"
    assert table["CUDA"] == "1 GPU: NVIDIA H100 80GB HBM3 (CUDA 12.4)"
