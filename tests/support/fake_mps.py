"""A faked Apple Silicon Mac with a faked Apple GPU (MPS) that behaves like torch's real one: every MPS test uses it.

There is no Apple hardware here, and a fake kinder than the real API hides the bug a user will meet (a parity check
that copied MPS tensors to float64 in one `.to` passed every test and failed on every Mac). So the faked device
refuses what the real one refuses, the way torch does, and each behaviour names the torch source it copies
(checked against the torch 2.14.1 macOS wheel, docs/architecture.md "Apple API ledger"):

- Tensors on the device are `FakeMPSTensor`s: `t.device` is `mps`, `t.is_mps` is True, and the values live in a
  CPU tensor inside. Moving a tensor there (`.to("mps")`, `.to(device)`, a factory with `device="mps"`) and back
  (`.cpu()`, `.to("cpu")`) goes through `FakeMPSMode`, a TorchFunctionMode.
- float64 on the device raises TypeError(MPS_ERROR_DOUBLE_NOT_SUPPORTED) (aten/src/ATen/mps/EmptyTensor.cpp,
  empty_mps and empty_strided_mps: TORCH_CHECK_TYPE(dtype != ScalarType::Double, ...)); complex128 raises the
  "does not have support for that dtype" TypeError (aten/src/ATen/native/mps/OperationUtils.mm, getMPSDataType).
- A device tensor copied to a CPU float64 tensor in one op (`t.to("cpu", torch.float64)`, `t.double().cpu()` does
  the first half on the device and raises): torch <= 2.13 raises that same TypeError; 2.14.0-2.14.1 returns a
  float64 tensor into which nothing was copied (pytorch#197715): zeros here.
- An operation mixing a device tensor with a CPU tensor of one or more dimensions raises "Expected all tensors to
  be on the same device" (ATen's TensorIterator / checkSameDevice); 0-dimensional CPU tensors are allowed, as in
  torch. `.numpy()` of a device tensor raises TypeError as torch does (torch/csrc/utils/tensor_numpy.cpp).
- torch.mps's functions run torch's own Python (torch/mps/__init__.py, with its argument checks) over faked
  `torch._C._mps_*` bindings: memory figures are ints in bytes (the storages in use; the driver's adds the
  allocator's cached buffers, rounded up to 1 MiB pages, plus the faked driver overhead), `set_per_process_memory_
  fraction` validates as torch does and then caps the faked allocator as MPSAllocator.mm does (buffers in use and
  cached against fraction x the recommended maximum, the cache released before it raises "MPS backend out of memory
  ..."), freed storages stay cached until reused or `empty_cache`, `recommended_max_memory` is the faked GPU's.
- torch.mps.event's bindings copy MPSEvent.mm 2.14.1 (`FakeEvents`): an event is pending until the host waits,
  `synchronize()` consumes the one-shot CPU-sync flag that `elapsed_time()` then waits for (WouldHang after a short
  wait instead of hanging the suite: pytorch#162872), close events' callbacks come out of order and raise torch's
  own errors; `events_hang` makes every elapsed_time wait "forever".
- The dispatcher has the boxed MPS fallback always (MPSFallback.mm): `fallback_enabled` is the variable torch loaded
  with, and `missing_ops` (no MPS kernel) raise mps_error_fallback's NotImplementedError with it off.
- psutil.swap_memory() is macOS's (psutil/arch/osx/mem.c): `sout` counts page-outs, `used` is VM_SWAPUSAGE.
- NSProcessInfo.thermalState (machine/host.process_thermal_state) says `thermal`; one storage above `abort_above`
  bytes aborts the "process" (`Aborted`, a BaseException), as MPS asserts on one array over 4 GiB (pytorch#143859).
- torch.accelerator's memory stats run torch's own Python (torch/accelerator/memory.py) over faked
  `torch._C._accelerator_*` bindings copying MPSHeapAllocatorImpl::getDeviceStats (torch 2.14.1 and 2.15.0,
  `MPSAllocator.h`): "allocated_bytes" is the buffers in use (m_current_allocated_memory: current, peak, allocated,
  freed), "reserved_bytes" those plus the cached ones; the peak is raised as a buffer is taken and reset to the
  current value by `_accelerator_resetPeakStats`; `memory_stats` is empty until the allocator is initialized (the
  first tensor); torch 2.13.0's wheel has the same getDeviceStats. `device_stats=False` is a torch without the calls
  (torch.accelerator has no max_memory_allocated / reset_peak_memory_stats, as before its memory API).
- autocast("mps") casts like the CPU's autocast lists (both lower matmul/conv/linear); GradScaler("mps") is torch's.
- The energy monitor (zeus-apple-silicon's AppleEnergyMonitor, whose C++ side raises RuntimeError/ValueError:
  apple_energy.hpp) returns cumulative mJ fields, each may be None, and can be told to raise.

`noise` perturbs the floating outputs of matrix products and convolutions by a relative `noise` (a device whose
arithmetic differs from the CPU's, like a real GPU's), so a parity check has a real error to report; `wrong_ops`
makes named kernels compute wrong (a real MPS bug's shape: one operation off, the rest right), so a check can be
asked which layer it is.
"""

from __future__ import annotations

import contextlib
import functools
import math
import platform
import sys
import threading
import time
import types
import weakref
from dataclasses import dataclass, field

import psutil
import torch
from torch.overrides import TorchFunctionMode
from torch.utils._python_dispatch import return_and_correct_aliasing
from torch.utils._pytree import tree_flatten, tree_map

MPS = torch.device("mps")
CPU = torch.device("cpu")
# aten/src/ATen/mps/EmptyTensor.cpp, MPS_ERROR_DOUBLE_NOT_SUPPORTED
F64_ERROR = ("Cannot convert a MPS Tensor to float64 dtype as the MPS framework doesn't support float64. "
             "Please use float32 instead.")
# aten/src/ATen/native/mps/OperationUtils.mm, getMPSDataType's default case
C128_ERROR = "Trying to convert ComplexDouble to the MPS backend but it does not have support for that dtype."
# ATen's device check (aten/src/ATen/native/TensorIterator.cpp / c10 checkSameDevice)
MIXED_ERROR = ("Expected all tensors to be on the same device, but found at least two devices, mps:0 and cpu!")
# torch/csrc/utils/tensor_numpy.cpp
NUMPY_ERROR = ("can't convert mps:0 device type tensor to numpy. Use Tensor.cpu() to copy the tensor to host "
               "memory first.")
NOISY_OPS = {"aten::mm", "aten::addmm", "aten::bmm", "aten::convolution", "aten::_convolution", "aten::matmul",
             "aten::linear", "aten::baddbmm"}
# torch copies between devices and takes CPU index tensors for a device tensor's indexing
CROSS_DEVICE_OK = {"aten::copy_", "aten::_copy_from", "aten::_to_copy", "aten::index", "aten::index_put_",
                   "aten::_index_put_impl_"}
MiB = 1 << 20
LARGE_HEAP = 32 * MiB  # aten/src/ATen/mps/MPSAllocator.h kLargeHeap: a cached buffer this much larger is still reused


def vm_error(nbytes: int) -> str:
    """What MPS says on a virtual Mac (GitHub's macOS runners) at the first allocation: the allocator's out-of-memory
    message with a zero budget (aten/src/ATen/mps/MPSAllocator.mm; actions/runner-images#9918)."""
    return (f"MPS backend out of memory (MPS allocated: 0 bytes, other allocations: 0 bytes, max allowed: 1.70 GB). "
            f"Tried to allocate {nbytes / MiB:.2f} MiB on private pool.")


def missing_error(op: str) -> str:
    """What `mps_error_fallback` raises (aten/src/ATen/mps/MPSFallback.mm, TORCH_CHECK_NOT_IMPLEMENTED: a
    NotImplementedError) for an operation MPS has no kernel for, with the CPU fallback off."""
    return (f"The operator '{op}' is not currently implemented for the MPS device. If you want this op to be "
            "considered for addition please comment on https://github.com/pytorch/pytorch/issues/141287 and mention "
            "use-case, that resulted in missing op as well as commit hash 0000000. As a temporary fix, you can set the "
            "environment variable `PYTORCH_ENABLE_MPS_FALLBACK=1` to use the CPU as a fallback for this op. WARNING: "
            "this will be slower than running natively on MPS.")


def format_size(size: int) -> str:
    """aten/src/ATen/mps/MPSAllocator.h, format_size: two decimals in bytes, KiB, MiB or GiB."""
    if size <= 1024:
        return f"{size} bytes"
    if size <= 1 << 20:
        return f"{size / 1024:.2f} KiB"
    if size <= 1 << 30:
        return f"{size / (1 << 20):.2f} MiB"
    return f"{size / (1 << 30):.2f} GiB"


def oom_error(allocated: int, other: int, allowed: int, size: int) -> str:
    """The MPS allocator's out-of-memory error (aten/src/ATen/mps/MPSAllocator.mm, alloc_buffer_block: a
    RuntimeError from TORCH_CHECK) when an allocation would pass the high watermark that
    set_per_process_memory_fraction sets (fraction x recommendedMaxWorkingSetSize)."""
    return (f"MPS backend out of memory (MPS allocated: {format_size(allocated)}, other allocations: "
            f"{format_size(other)}, max allowed: {format_size(allowed)}). Tried to allocate {format_size(size)} on "
            f"private pool. Use PYTORCH_MPS_HIGH_WATERMARK_RATIO=0.0 to disable upper limit for memory allocations "
            f"(may cause system failure).")


def _refuse_dtype(dtype) -> None:
    if dtype == torch.float64:
        raise TypeError(F64_ERROR)
    if dtype == torch.complex128:
        raise TypeError(C128_ERROR)


class FakeMPSTensor(torch.Tensor):
    """A tensor on the faked Apple GPU: its values are `elem`, a CPU tensor; everything else says mps."""

    elem: torch.Tensor

    @staticmethod
    def __new__(cls, elem: torch.Tensor, requires_grad: bool = False):
        _refuse_dtype(elem.dtype)
        r = torch.Tensor._make_wrapper_subclass(cls, elem.shape, strides=elem.stride(),
                                                storage_offset=elem.storage_offset(), dtype=elem.dtype,
                                                device=CPU, requires_grad=requires_grad)
        device = _active
        if device is not None and device.broken == "oom":
            raise RuntimeError(vm_error(elem.untyped_storage().nbytes()))
        r.elem = elem
        if device is not None:
            device.allow(elem)
            device.track(elem)  # the values, not the wrapper: Module.to swaps wrappers, which weakrefs forbid
        return r

    @property
    def device(self):  # the real one says cpu: autograd then needs no Metal device guard
        return MPS

    @property
    def is_mps(self):
        return True

    @property
    def is_cpu(self):
        return False

    def __repr__(self, *, tensor_contents=None):
        return f"FakeMPSTensor({self.elem!r}, device='mps:0')"

    def __tensor_flatten__(self):
        return ["elem"], None

    @staticmethod
    def __tensor_unflatten__(inner, meta, outer_size, outer_stride):
        return FakeMPSTensor(inner["elem"])

    @classmethod
    def __torch_dispatch__(cls, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        device = _active
        if device is not None and func.name() in device.missing_ops and not device.fallback_enabled:
            raise NotImplementedError(missing_error(func.name()))
        if func.name() not in CROSS_DEVICE_OK:
            flat, _ = tree_flatten((args, kwargs))
            for t in flat:
                if isinstance(t, torch.Tensor) and not isinstance(t, FakeMPSTensor) and t.dim() > 0:
                    raise RuntimeError(MIXED_ERROR)
        if kwargs.get("dtype") is not None:
            _refuse_dtype(kwargs["dtype"])
        kwargs = {k: (CPU if k == "device" and v is not None else v) for k, v in kwargs.items()}
        out = func(*tree_map(_unwrap, args), **tree_map(_unwrap, kwargs))
        if device is not None and (device.noise or device.broken) and func.name() in NOISY_OPS \
                and (device.noise_in == "all" or torch.is_grad_enabled()):  # backward runs with grad mode off
            out = tree_map(device.perturb, out)
        if device is not None and func.name() in device.wrong_ops:  # one kernel that computes wrong
            out = tree_map(lambda x: device.miscompute(x, device.wrong_ops[func.name()]), out)
        return return_and_correct_aliasing(func, args, kwargs, tree_map(_wrap, out))


def _unwrap(x):
    return x.elem if isinstance(x, FakeMPSTensor) else x


def _wrap(x):
    if isinstance(x, torch.Tensor) and not isinstance(x, FakeMPSTensor):
        return FakeMPSTensor(x)
    return x


def _is_mps(device) -> bool:
    if device is None:
        return False
    try:
        return torch.device(device).type == "mps"
    except (RuntimeError, TypeError):
        return False


class FakeMPSMode(TorchFunctionMode):
    """Moves tensors to and from the faked device where torch would move them to and from MPS."""

    def __init__(self, device: "FakeMPS"):
        super().__init__()
        self.fake = device

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        src = args[0] if args and isinstance(args[0], torch.Tensor) else None
        if func is torch.Tensor.to and src is not None:
            if len(args) > 1 and isinstance(args[1], torch.Tensor):
                device, dtype = args[1].device, args[1].dtype
            else:
                device, dtype, _, _ = torch._C._nn._parse_to(*args[1:], **kwargs)
            return self._to(src, device, dtype)
        if func in (torch.Tensor.cpu,) and isinstance(src, FakeMPSTensor):
            return self._to(src, CPU, None)
        if func is torch.Tensor.numpy and isinstance(src, FakeMPSTensor):
            raise TypeError(NUMPY_ERROR)
        if func in (torch.Tensor.double,) and isinstance(src, FakeMPSTensor):
            raise TypeError(F64_ERROR)
        if _is_mps(kwargs.get("device")):  # a factory: torch.zeros(..., device="mps")
            _refuse_dtype(kwargs.get("dtype"))
            cpu_kwargs = {**kwargs, "device": CPU}
            with torch._C.DisableTorchFunction():
                out = func(*args, **cpu_kwargs)
            if isinstance(out, torch.Tensor):
                _refuse_dtype(out.dtype)  # torch.tensor([1.5], dtype=None) is float32; from float64 data too
                return FakeMPSTensor(out.detach(), requires_grad=out.requires_grad)
            return out
        autocast = torch.is_autocast_enabled("mps")
        if autocast and not torch.is_autocast_enabled("cpu"):
            with torch.autocast("cpu", dtype=torch.get_autocast_dtype("mps")):
                return func(*args, **kwargs)
        return func(*args, **kwargs)

    def _to(self, src: torch.Tensor, device, dtype):
        fake = isinstance(src, FakeMPSTensor)
        if device is None:
            if dtype is not None and fake:
                _refuse_dtype(dtype)
            with torch._C.DisableTorchFunction():
                return src.to(dtype=dtype) if dtype is not None else src
        if device.type == "mps":
            if fake:
                if dtype is not None and dtype != src.dtype:
                    _refuse_dtype(dtype)
                    with torch._C.DisableTorchFunction():
                        return src.to(dtype=dtype)
                return src
            target = dtype or src.dtype
            _refuse_dtype(target)
            with torch._C.DisableTorchFunction():
                moved = src.detach().to(dtype=target).clone()
            return FakeMPSTensor(moved, requires_grad=src.requires_grad)
        if device.type == "cpu" and fake:
            if dtype in (torch.float64, torch.complex128):
                if self.fake.torch_version < (2, 14):
                    raise TypeError(F64_ERROR)
                return torch.zeros(src.shape, dtype=dtype)  # 2.14.0-2.14.1 copy nothing (pytorch#197715)
            with torch._C.DisableTorchFunction():
                out = src.elem.detach().clone()
                return out.to(dtype=dtype) if dtype is not None else out
        with torch._C.DisableTorchFunction():
            return src.to(device=device, dtype=dtype) if dtype is not None else src.to(device)


@dataclass
class FakeEnergy:
    """zeus-apple-silicon's AppleEnergyMetrics: cumulative millijoules per part, each may be None."""

    cpu_total_mj: int | None = None
    efficiency_cores_mj: list | None = None
    performance_cores_mj: list | None = None
    efficiency_core_manager_mj: int | None = None
    performance_core_manager_mj: int | None = None
    dram_mj: int | None = None
    gpu_mj: int | None = None
    gpu_sram_mj: int | None = None
    ane_mj: int | None = None


@dataclass
class FakeAppleMonitor:
    """zeus_apple_silicon.AppleEnergyMonitor: get_cumulative_energy() -> AppleEnergyMetrics; its C++ side raises
    RuntimeError (IOReport subscription failed) or ValueError (invalid_argument) when a reading fails. `fail_on`:
    the readings (1 = the first) that raise; `gpu_mw`: the GPU's faked power."""

    gpu_mw: int = 12_000
    cpu_mw: int = 3_000
    ane_mw: int = 0
    fail_on: set = field(default_factory=set)
    error: type = RuntimeError
    fields_missing: tuple = ()
    mj: dict | None = None  # fixed cumulative readings (a test moves them); None: the faked powers over time
    readings: int = 0
    _clock: float = 0.0

    def get_cumulative_energy(self) -> FakeEnergy:
        import time

        self.readings += 1
        if self.readings in self.fail_on or "all" in self.fail_on:
            raise self.error("IOReport: failed to sample the Energy Model channels")
        if self.mj is not None:
            return FakeEnergy(**self.mj)
        now = time.perf_counter()
        self._clock = self._clock or now
        elapsed = now - self._clock  # cumulative since the first reading
        values = {"gpu_mj": int(self.gpu_mw * elapsed), "gpu_sram_mj": int(0.02 * self.gpu_mw * elapsed),
                  "cpu_total_mj": int(self.cpu_mw * elapsed), "dram_mj": int(500 * elapsed), "ane_mj": int(self.ane_mw * elapsed)}
        for name in self.fields_missing:
            values[name] = None
        return FakeEnergy(**values)


class WouldHang(BaseException):
    """A wait that never ends on a Mac. Raised after FakeEvents.HANG_S instead of hanging the suite; a BaseException,
    as nothing in the app can catch a hang: code that waits this way must not be written, not be caught."""


class Aborted(BaseException):
    """A Metal assertion: the real process aborts (SIGABRT) and nothing in it can catch that. In-process (a run
    "process" that is a thread) the thread ends here, as the process would, without its answer."""


def _sswap(*values):
    """psutil's sswap tuple (total, used, free, percent, sin, sout)."""
    import psutil

    return psutil._common.sswap(*values) if hasattr(psutil._common, "sswap") else psutil._ntuples.sswap(*values)


class FakeEvents:
    """torch.mps.Event's bindings over MPSEvent as torch 2.14.1 implements them (aten/src/ATen/mps/MPSEvent.mm and
    MPSEvent.h, checked in the macOS wheel's header: `bool m_cpu_sync_completed`):
    - `record` signals a Metal shared event when the GPU reaches it; with timing it registers a listener that, when
      the GPU gets there, reads the host's clock (`clock_gettime_nsec_np(CLOCK_MONOTONIC_RAW)`: not a GPU timestamp)
      and sets the one-shot CPU-sync flag.
    - This faked GPU runs what it is given at once, but reports it done only when the host waits (the device
      synchronized, `elapsed_time`, `synchronize`, `query`): the state of a real GPU with work queued ahead, which
      the diagnosis makes sure of. An event is then pending until the host waits.
    - `synchronize()` of a pending event registers a second listener and waits for the flag, consuming it
      (`waitForCpuSync` sets it false). `elapsed_time(start, end)` commits and waits for the stream, then waits for
      the end event's flag again: after `synchronize()` that flag never comes back (pytorch#162872), which raises
      WouldHang here after HANG_S.
    - Completion callbacks arrive on another thread: for two events closer than `event_reorder_s` they come out of
      order, and `elapsed_time` raises torch's own TORCH_CHECKs (strings of libtorch_cpu.dylib 2.14.1): "Events were
      not created with argument 'enable_timing=True'" (the start's time still 0) or "End event N was not recorded
      after start event M".
    - Released events go back to a pool and are reset when acquired again (`MPSEventPool::acquireEvent`)."""

    HANG_S = 0.2

    def __init__(self, device: "FakeMPS"):
        self.device = device
        self.events: dict[int, dict] = {}
        self.pool: list[int] = []
        self.counter = 0
        self.hangs = 0  # waits that would never end on a Mac

    def _get(self, event_id: int) -> dict:
        if event_id not in self.events or self.events[event_id]["released"]:
            raise RuntimeError(f"Invalid Event ID: {event_id}")  # MPSEventPool::getInUseEvent
        return self.events[event_id]

    def acquireEvent(self, enable_timing: bool) -> int:
        if self.pool:
            event_id = self.pool.pop()
        else:
            self.counter += 1
            event_id = self.counter
        self.events[event_id] = {"timing": bool(enable_timing), "counter": 0, "signaled": 0, "reached_at": 0.0,
                                 "completion": 0, "flag": False, "listeners": 0, "released": False}
        return event_id

    def releaseEvent(self, event_id: int) -> None:
        self._get(event_id)["released"] = True
        self.pool.append(event_id)

    def recordEvent(self, event_id: int) -> None:
        e = self._get(event_id)
        e["counter"] += 1
        e["reached_at"] = time.perf_counter()  # this GPU has done everything queued before it
        if e["timing"]:
            e["listeners"] += 1

    def waitForEvent(self, event_id: int) -> None:
        self._get(event_id)

    def complete_all(self) -> None:
        """The GPU has reached every recorded event: each listener runs (its clock read, the flag set)."""
        for e in self.events.values():
            if e["signaled"] < e["counter"]:
                e["signaled"] = e["counter"]
                if e["listeners"]:
                    e["completion"] = int(e["reached_at"] * 1e9)
                    e["flag"], e["listeners"] = True, 0

    def queryEvent(self, event_id: int) -> bool:
        self.complete_all()
        e = self._get(event_id)
        return bool(e["counter"]) and e["signaled"] >= e["counter"]

    def synchronizeEvent(self, event_id: int) -> None:
        e = self._get(event_id)
        if e["signaled"] >= e["counter"]:  # notifyLocked: nothing pending, nothing to wait for
            return
        e["listeners"] += 1
        self.complete_all()
        self._wait_for_cpu_sync(e, event_id)

    def _wait_for_cpu_sync(self, e: dict, event_id: int) -> None:
        if not e["flag"]:
            time.sleep(self.HANG_S)
            self.hangs += 1
            raise WouldHang(f"MPS event {event_id}: waitForCpuSync would wait forever on a Mac (pytorch#162872: "
                            "its one-shot CPU-sync flag was consumed by an earlier synchronize())")
        e["flag"] = False

    def elapsedTimeOfEvents(self, start_id: int, end_id: int) -> float:
        if self.device.events_hang:
            time.sleep(self.HANG_S)
            self.hangs += 1
            raise WouldHang(f"MPS event {end_id}: elapsed_time would wait forever on a Mac (its listener never ran)")
        self.device._synchronize()  # m_default_stream->synchronize(COMMIT_AND_WAIT)
        start, end = self._get(start_id), self._get(end_id)
        self._wait_for_cpu_sync(end, end_id)
        start_time, end_time = start["completion"], end["completion"]
        if start_time and end_time and end_time - start_time < self.device.event_reorder_s * 1e9:
            # the two callbacks raced: the end's ran first, the start's is late or read a later clock
            if end_time - start_time < self.device.event_reorder_s * 0.5e9:
                start_time = 0
            else:
                start_time, end_time = end_time, start_time
        if not (start_time > 0 and end_time > 0):
            raise RuntimeError("Events were not created with argument 'enable_timing=True'")
        if not end_time > start_time:
            raise RuntimeError(f"End event {end_id} was not recorded after start event {start_id}")
        return (end_time - start_time) * 1e-6


class FakeMPS:
    """The faked Mac and its GPU. `install(monkeypatch)` patches platform facts, torch's MPS bindings and the
    energy monitor process-wide; `activate()` is the context (per thread: TorchFunctionModes are thread-local) in
    which torch code moves tensors to the faked device."""

    def __init__(self, *, macos: str = "14.5", chip: str = "Apple M1 Pro", gpu_cores: int = 16,
                 memory: int = 32 << 30, recommended_max: int = 21 << 30, driver_overhead: int = 8 * MiB,
                 noise: float = 0.0, torch_version: tuple[int, int] | None = None, available: bool = True,
                 built: bool = True, monitor: FakeAppleMonitor | None = None, machine: str = "arm64",
                 sysctls: dict | None = None, broken: str | None = None, fallback_ops: tuple = ("aten::linalg_svd",),
                 fallback_enabled: bool = True, noise_in: str = "all", wrong_ops: dict | None = None,
                 event_reorder_s: float = 5e-5, swap_used: int = 0, pageouts_per_read: int = 512 * MiB,
                 missing_ops: tuple = (), thermal: str = "nominal", events_hang: bool = False,
                 abort_above: int | None = None, device_stats: bool = True):
        self.macos, self.chip, self.gpu_cores, self.memory = macos, chip, gpu_cores, memory
        self.recommended_max, self.driver_overhead, self.noise = recommended_max, driver_overhead, noise
        self.noise_in = noise_in  # "all" operations, or "forward" ones only (grad mode on)
        self.available, self.built, self.machine = available, built, machine
        self.sysctls = {"machdep.cpu.brand_string": chip, "hw.memsize": str(memory), "kern.osversion": "23F79",
                        **(sysctls or {})}
        self.broken = broken  # "oom": a virtual Mac's MPS (every allocation fails); "wrong" / "nan": bad results
        self.fallback_ops = set(fallback_ops)  # registered per op from MPSFallback.mm (a CPU kernel in disguise)
        self.fallback_enabled = fallback_enabled  # PYTORCH_ENABLE_MPS_FALLBACK=1 when torch loaded
        # no MPS kernel at all: the boxed fallback runs them on the CPU, or raises with the variable off
        self.missing_ops = set(missing_ops)
        self.thermal = thermal  # what NSProcessInfo.thermalState says (machine/host.process_thermal_state)
        self.events_hang = events_hang  # every elapsed_time waits forever (a listener that never runs)
        # one storage larger than this aborts the process, as MPS asserts on one array over 4 GiB (pytorch#143859)
        self.abort_above = abort_above
        self.device_stats = device_stats  # torch.accelerator's memory calls exist (torch/accelerator/memory.py)
        # {op name: relative error}: kernels that compute wrong (as MPS has, depending on the batch or the allocator's
        # state: PyTorch #109457, #193487): each output is off by that share of its largest value
        self.wrong_ops = dict(wrong_ops or {})
        real = tuple(int(p) for p in torch.__version__.split("+")[0].split(".")[:2])
        self.torch_version = torch_version or real
        self.monitor = monitor or FakeAppleMonitor()
        self.fraction: float | None = None
        self.syncs = 0
        self.event_reorder_s = event_reorder_s  # two events closer than this complete out of order (MPSEvent.mm)
        self.swap_used, self.pageouts_per_read, self._pageouts = swap_used, pageouts_per_read, 0
        self.pool: list[int] = []  # the allocator's cached buffers: freed storages' bytes, until empty_cache
        self.peak = 0  # allocated_bytes.all.peak (MPSHeapAllocatorImpl's m_current_allocated_memory Stat)
        self.taken = self.given_back = 0  # its allocated / freed totals
        self.initialized = False  # _accelerator_isAllocatorInitialized: after the first tensor
        self._refs: dict[int, int] = {}  # storages in use: data pointer -> tensors holding it
        self._bytes: dict[int, int] = {}  # storages in use: data pointer -> bytes
        self._lock = threading.RLock()  # a finalizer may run while the lock is held
        self._generator = torch.Generator()
        self._noise_gen = torch.Generator().manual_seed(1234)

    # -- tensors ---------------------------------------------------------------------------------------

    def track(self, t: torch.Tensor) -> None:
        """Count `t`'s storage as in use until the last tensor on it is gone; then its bytes are a cached buffer in
        the allocator's pool (MPSAllocator.mm: a freed buffer goes back to its pool, not to the system)."""
        try:
            storage = t.untyped_storage()
            ptr, nbytes = storage.data_ptr(), storage.nbytes()
        except (RuntimeError, AttributeError):
            return
        with self._lock:
            if ptr not in self._refs:
                self.taken += nbytes
            self._refs[ptr] = self._refs.get(ptr, 0) + 1
            self._bytes[ptr] = nbytes
            self.initialized = True
            self.peak = max(self.peak, sum(self._bytes.values()))
        weakref.finalize(t, self._release, ptr)

    def _release(self, ptr: int) -> None:
        with self._lock:
            left = self._refs.get(ptr, 0) - 1
            if left > 0:
                self._refs[ptr] = left
                return
            self._refs.pop(ptr, None)
            nbytes = self._bytes.pop(ptr, 0)
            if nbytes:
                self.pool.append(nbytes)
                self.given_back += nbytes

    def perturb(self, x):
        if isinstance(x, torch.Tensor) and x.is_floating_point() and not isinstance(x, FakeMPSTensor):
            with torch._C.DisableTorchFunction():
                if self.broken in ("wrong", "nan"):
                    return torch.full_like(x, 0.0 if self.broken == "wrong" else math.nan)
                wobble = torch.rand(x.shape, generator=self._noise_gen, dtype=torch.float32) * 2 - 1
                return x + (x.abs() * wobble * self.noise).to(x.dtype)
        return x

    def miscompute(self, x, error: float):
        if isinstance(x, torch.Tensor) and x.is_floating_point() and not isinstance(x, FakeMPSTensor) and x.numel():
            with torch._C.DisableTorchFunction():
                return x + (x.abs().max() * error).to(x.dtype)
        return x

    def allow(self, elem: torch.Tensor) -> None:
        """A new storage for `elem`, as MPSAllocator.mm's alloc_buffer_block takes one: a cached buffer of the pool
        that fits is reused (get_free_buffer); else a new one while `[MTLDevice currentAllocatedSize]` (buffers in
        use and cached ones alike) plus its size stays within the high watermark that
        torch.mps.set_per_process_memory_fraction set (fraction x recommendedMaxWorkingSetSize; never set: torch's
        default 1.7x, which these tests never reach); else the cached buffers are released and it is tried again
        (release_cached_buffers); else the allocator's RuntimeError "MPS backend out of memory ...". A view of a
        storage already on the device allocates nothing."""
        storage = elem.untyped_storage()
        size = storage.nbytes()
        with self._lock:
            if storage.data_ptr() in self._refs:
                return
            if self.abort_above is not None and size > self.abort_above:
                raise Aborted("failed assertion `[MPSNDArray initWithDevice:descriptor:isTextureBacked:] Error: total "
                              "bytes of NDArray > 2**32'")
            cap = int(self.fraction * self.recommended_max) if self.fraction else None
            used, cached = sum(self._bytes.values()), sum(self.pool)
            fits = [b for b in self.pool if size <= b <= size + LARGE_HEAP]
            if fits and (cap is None or used + cached + size <= cap):
                self.pool.remove(min(fits))
                return
            if cap is None or used + cached + size <= cap:
                return
            self.pool.clear()  # release_cached_buffers, then alloc_buffer again
            if used + size > cap:
                raise RuntimeError(oom_error(used, self.driver_overhead, cap, size))

    def allocated(self) -> int:
        """torch.mps.current_allocated_memory(): the bytes of the buffers in use (the live device storages)."""
        with self._lock:
            return int(sum(self._bytes.values()))

    def cached(self) -> int:
        """The bytes of the buffers in the allocator's pools (freed, kept for reuse until empty_cache)."""
        with self._lock:
            return int(sum(self.pool))

    def empty_cache(self) -> None:
        """torch.mps.empty_cache(): the cached buffers go back to the system (MPSAllocator's emptyCache)."""
        with self._lock:
            self.pool.clear()

    def driver(self) -> int:
        """torch.mps.driver_allocated_memory(): `[MTLDevice currentAllocatedSize]`, the buffers in use and cached."""
        return int(math.ceil((self.allocated() + self.cached()) / MiB) * MiB + self.driver_overhead)

    # -- torch._C._mps_* -------------------------------------------------------------------------------

    def _synchronize(self) -> None:
        """torch.mps.synchronize: the stream committed and waited for; every recorded event completes."""
        self.syncs += 1
        events = getattr(self, "events", None)
        if events is not None:
            events.complete_all()

    def swap_memory(self):
        """psutil.swap_memory() on macOS (psutil 7.2.2 `psutil/arch/osx/mem.c`): total, used and free from
        sysctl(VM_SWAPUSAGE), but `sin`/`sout` are `vmstat.pageins`/`vmstat.pageouts` x the page size: every page
        written out, file-backed ones included, not swap. Here the machine writes out `pageouts_per_read` bytes of
        files between two readings while its swap stays at `swap_used`."""
        self._pageouts += self.pageouts_per_read
        total = 4 << 30
        return _sswap(total, self.swap_used, total - self.swap_used, round(100 * self.swap_used / total, 1),
                      self._pageouts // 2, self._pageouts)

    def _set_fraction(self, fraction: float) -> None:
        self.fraction = fraction

    # -- torch._C._accelerator_* (torch.accelerator's memory stats, MPSAllocator.mm getDeviceStats) ------------

    def _device_stats(self, index: int) -> dict:
        with self._lock:
            current, cached = sum(self._bytes.values()), sum(self.pool)
            stat = {"current": current, "peak": self.peak, "allocated": self.taken, "freed": self.given_back}
            reserved = {"current": current + cached, "peak": max(self.peak, current + cached),
                        "allocated": self.taken, "freed": self.given_back}
        return {"allocated_bytes": {"all": stat}, "reserved_bytes": {"all": reserved},
                "active_bytes": {"all": dict(stat)}}

    def _reset_peak(self, index: int) -> None:
        with self._lock:
            self.peak = sum(self._bytes.values())

    def install(self, monkeypatch) -> "FakeMPS":
        from mpsstudio.engine.machine import devices
        from mpsstudio.engine.machine.energy import ioreport

        answers = self.sysctls
        monkeypatch.setattr(sys, "platform", "darwin")
        monkeypatch.setattr(platform, "mac_ver", lambda *a: (self.macos, ("", "", ""), self.machine))
        monkeypatch.setattr(platform, "machine", lambda: self.machine)
        monkeypatch.setattr(devices, "sysctl", lambda name: answers.get(name, ""))
        monkeypatch.setattr(devices, "apple_gpu_cores", lambda: self.gpu_cores)
        C = torch._C
        monkeypatch.setattr(C, "_has_mps", self.built)
        monkeypatch.setattr(C, "_mps_is_available", lambda: self.available)
        # torch.backends.mps caches is_available (lru_cache; dynamo reads its __wrapped__): replaced whole, alike
        monkeypatch.setattr(torch.backends.mps, "is_built", lambda: self.built)
        monkeypatch.setattr(torch.backends.mps, "is_available", functools.lru_cache(lambda: self.available))
        monkeypatch.setattr(C, "_mps_deviceSynchronize", self._synchronize)
        monkeypatch.setattr(psutil, "swap_memory", self.swap_memory)
        monkeypatch.setattr(C, "_mps_currentAllocatedMemory", self.allocated)
        monkeypatch.setattr(C, "_mps_driverAllocatedMemory", self.driver)
        monkeypatch.setattr(C, "_mps_recommendedMaxMemory", lambda: int(self.recommended_max))
        monkeypatch.setattr(C, "_mps_setMemoryFraction", self._set_fraction)
        monkeypatch.setattr(C, "_mps_emptyCache", self.empty_cache)
        monkeypatch.setattr(C, "_accelerator_isAllocatorInitialized", lambda: self.initialized, raising=False)
        monkeypatch.setattr(C, "_accelerator_getDeviceStats", self._device_stats, raising=False)
        monkeypatch.setattr(C, "_accelerator_resetPeakStats", self._reset_peak, raising=False)
        if not self.device_stats:
            for name in ("max_memory_allocated", "reset_peak_memory_stats"):
                monkeypatch.delattr(torch.accelerator, name, raising=False)
        events = FakeEvents(self)
        for name in ("acquireEvent", "releaseEvent", "recordEvent", "waitForEvent", "synchronizeEvent", "queryEvent",
                     "elapsedTimeOfEvents"):
            monkeypatch.setattr(C, f"_mps_{name}", getattr(events, name))
        self.events = events
        monkeypatch.setattr(C, "_mps_get_default_generator", lambda: self._generator)
        monkeypatch.setattr(C, "_mps_is_in_bad_fork", lambda: False)
        monkeypatch.setattr(torch.mps, "_default_mps_generator", None)
        monkeypatch.setattr(ioreport, "_apple", lambda: types.SimpleNamespace(AppleEnergyMonitor=lambda: self.monitor))
        monkeypatch.setattr(ioreport, "_ioreg", lambda: '"Device Utilization %"=73')
        from mpsstudio.engine.machine import host

        monkeypatch.setattr(host, "process_thermal_state", lambda: self.thermal)
        self._fake_dispatcher(monkeypatch)
        from mpsstudio.engine.machine.apple import FALLBACK_VAR

        monkeypatch.setenv(FALLBACK_VAR, "1" if self.fallback_enabled else "0")
        version = tuple(int(p) for p in self.macos.split(".")[:2])
        monkeypatch.setattr(torch._C, "_mps_is_on_macos_or_newer", lambda major, minor: version >= (major, minor))
        monkeypatch.setattr(torch.backends.mps, "is_macos_or_newer",
                            lambda major, minor: version >= (major, minor))
        monkeypatch.setattr(sys.modules[__name__], "_active", self)
        return self

    def _fake_dispatcher(self, monkeypatch) -> None:
        """The dispatcher's MPS registrations as the macOS wheel has them (machine/kernels.kernel_kind reads these): an MPS
        kernel wherever there is a CPU one (RegisterMPS.cpp), `fallback_ops` registered from MPSFallback.mm, and a
        boxed fallback for every other op always (MPSFallback.mm, TORCH_LIBRARY_IMPL(_, MPS, m): `mps_fallback`
        with PYTORCH_ENABLE_MPS_FALLBACK on, `mps_error_fallback` otherwise; the symbols are in libtorch_cpu.dylib
        2.14.1). Which one, torch read from the variable when it loaded: `install` sets it from
        `fallback_enabled`, as a run process sets it before torch loads."""
        C = torch._C
        has, dump, backend = (C._dispatch_has_kernel_for_dispatch_key, C._dispatch_dump_table,
                              C._dispatch_has_backend_fallback)

        def has_kernel(op, key):
            if key == "MPS":
                return op in self.fallback_ops or (op not in self.missing_ops and has(op, "CPU"))
            return has(op, key)

        def dump_table(op):
            lines = [line for line in dump(op).splitlines() if not line.startswith("MPS:")]
            if has_kernel(op, "MPS"):
                where = ("aten/src/ATen/mps/MPSFallback.mm:42" if op in self.fallback_ops
                         else "build/aten/src/ATen/RegisterMPS_0.cpp:1")
                lines.append(f"MPS: registered at /Users/runner/work/pytorch/pytorch/{where} [kernel]")
            return "\n".join(lines)

        def has_backend_fallback(key):  # MPSFallback.mm: TORCH_LIBRARY_IMPL(_, MPS, m) registers one either way
            return True if key == C.DispatchKey.MPS else backend(key)
        monkeypatch.setattr(C, "_dispatch_has_kernel_for_dispatch_key", has_kernel)
        monkeypatch.setattr(C, "_dispatch_dump_table", dump_table)
        monkeypatch.setattr(C, "_dispatch_has_backend_fallback", has_backend_fallback)

    @contextlib.contextmanager
    def activate(self):
        """Tensors go to the faked device in this thread while this context is open."""
        with FakeMPSMode(self):
            yield self


_active: FakeMPS | None = None


def fake_mac(monkeypatch, version: str = "14.5", machine: str = "arm64", built: bool = True, available: bool = False,
             sysctls: dict | None = None, **kwargs) -> FakeMPS:
    """A faked Mac (MPS unavailable unless `available`); tensors move to its GPU inside `.activate()`."""
    return FakeMPS(macos=version, machine=machine, built=built, available=available, sysctls=sysctls,
                   **kwargs).install(monkeypatch)
