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
  `torch._C._mps_*` bindings: memory figures are ints in bytes (the bytes of the live device tensors, the driver's
  rounded up to 1 MiB pages plus the faked driver overhead), `set_per_process_memory_fraction` validates as torch
  does and then caps the faked allocator as torch's does (a new storage past fraction x the recommended maximum
  raises the allocator's RuntimeError "MPS backend out of memory ..."), `recommended_max_memory` is the faked GPU's.
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


def vm_error(nbytes: int) -> str:
    """What MPS says on a virtual Mac (GitHub's macOS runners) at the first allocation: the allocator's out-of-memory
    message with a zero budget (aten/src/ATen/mps/MPSAllocator.mm; actions/runner-images#9918)."""
    return (f"MPS backend out of memory (MPS allocated: 0 bytes, other allocations: 0 bytes, max allowed: 1.70 GB). "
            f"Tried to allocate {nbytes / MiB:.2f} MiB on private pool.")


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
        if func.name() not in CROSS_DEVICE_OK:
            flat, _ = tree_flatten((args, kwargs))
            for t in flat:
                if isinstance(t, torch.Tensor) and not isinstance(t, FakeMPSTensor) and t.dim() > 0:
                    raise RuntimeError(MIXED_ERROR)
        if kwargs.get("dtype") is not None:
            _refuse_dtype(kwargs["dtype"])
        kwargs = {k: (CPU if k == "device" and v is not None else v) for k, v in kwargs.items()}
        out = func(*tree_map(_unwrap, args), **tree_map(_unwrap, kwargs))
        device = _active
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


class FakeMPS:
    """The faked Mac and its GPU. `install(monkeypatch)` patches platform facts, torch's MPS bindings and the
    energy monitor process-wide; `activate()` is the context (per thread: TorchFunctionModes are thread-local) in
    which torch code moves tensors to the faked device."""

    def __init__(self, *, macos: str = "14.5", chip: str = "Apple M1 Pro", gpu_cores: int = 16,
                 memory: int = 32 << 30, recommended_max: int = 21 << 30, driver_overhead: int = 8 * MiB,
                 noise: float = 0.0, torch_version: tuple[int, int] | None = None, available: bool = True,
                 built: bool = True, monitor: FakeAppleMonitor | None = None, machine: str = "arm64",
                 sysctls: dict | None = None, broken: str | None = None, fallback_ops: tuple = ("aten::linalg_svd",),
                 fallback_enabled: bool = True, noise_in: str = "all", wrong_ops: dict | None = None):
        self.macos, self.chip, self.gpu_cores, self.memory = macos, chip, gpu_cores, memory
        self.recommended_max, self.driver_overhead, self.noise = recommended_max, driver_overhead, noise
        self.noise_in = noise_in  # "all" operations, or "forward" ones only (grad mode on)
        self.available, self.built, self.machine = available, built, machine
        self.sysctls = {"machdep.cpu.brand_string": chip, "hw.memsize": str(memory), **(sysctls or {})}
        self.broken = broken  # "oom": a virtual Mac's MPS (every allocation fails); "wrong" / "nan": bad results
        self.fallback_ops = set(fallback_ops)  # registered per op from MPSFallback.mm (a CPU kernel in disguise)
        self.fallback_enabled = fallback_enabled  # PYTORCH_ENABLE_MPS_FALLBACK=1 when torch loaded
        # {op name: relative error}: kernels that compute wrong (as MPS has, depending on the batch or the allocator's
        # state: PyTorch #109457, #193487): each output is off by that share of its largest value
        self.wrong_ops = dict(wrong_ops or {})
        real = tuple(int(p) for p in torch.__version__.split("+")[0].split(".")[:2])
        self.torch_version = torch_version or real
        self.monitor = monitor or FakeAppleMonitor()
        self.fraction: float | None = None
        self.syncs = 0
        self._live: dict[int, weakref.ref] = {}  # the device tensors' values (a WeakSet would compare tensors)
        self._lock = threading.Lock()
        self._generator = torch.Generator()
        self._noise_gen = torch.Generator().manual_seed(1234)

    # -- tensors ---------------------------------------------------------------------------------------

    def track(self, t: torch.Tensor) -> None:
        key = id(t)
        with self._lock:
            self._live[key] = weakref.ref(t, lambda _, key=key: self._live.pop(key, None))

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
        """Raise the allocator's out-of-memory error when a new storage for `elem` would pass the limit that
        torch.mps.set_per_process_memory_fraction set (0: unlimited, as in torch; never set: torch's default
        of 1.7x the recommended maximum, which these tests never reach)."""
        if not self.fraction:
            return
        storage = elem.untyped_storage()
        live = self.storages()
        if storage.data_ptr() in live:  # a view of a tensor already on the device: nothing new is allocated
            return
        allowed, used, size = int(self.fraction * self.recommended_max), sum(live.values()), storage.nbytes()
        if used + size > allowed:
            raise RuntimeError(oom_error(used, self.driver_overhead, allowed, size))

    def allocated(self) -> int:
        """Bytes of the live device tensors' storages (each storage once)."""
        return int(sum(self.storages().values()))

    def storages(self) -> dict[int, int]:
        """The live device tensors' storages: data pointer -> bytes."""
        with self._lock:
            tensors = [ref() for ref in list(self._live.values())]
        seen: dict[int, int] = {}
        for t in tensors:
            if t is None:
                continue
            try:
                storage = t.untyped_storage()
                seen[storage.data_ptr()] = storage.nbytes()
            except (RuntimeError, AttributeError):
                continue
        return seen

    def driver(self) -> int:
        return int(math.ceil(self.allocated() / MiB) * MiB + self.driver_overhead)

    # -- torch._C._mps_* -------------------------------------------------------------------------------

    def _synchronize(self) -> None:
        self.syncs += 1

    def _set_fraction(self, fraction: float) -> None:
        self.fraction = fraction

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
        monkeypatch.setattr(C, "_mps_currentAllocatedMemory", self.allocated)
        monkeypatch.setattr(C, "_mps_driverAllocatedMemory", self.driver)
        monkeypatch.setattr(C, "_mps_recommendedMaxMemory", lambda: int(self.recommended_max))
        monkeypatch.setattr(C, "_mps_setMemoryFraction", self._set_fraction)
        monkeypatch.setattr(C, "_mps_emptyCache", lambda: None)
        # torch/mps/event.py's Event over MPSEvent (aten/src/ATen/mps/MPSEvent.mm): ids from 1, elapsed time in
        # milliseconds between two recorded events; this device computes as it is asked, so a record is when
        # everything before it is done
        events: dict[int, float | None] = {}
        monkeypatch.setattr(C, "_mps_acquireEvent", lambda timing: events.setdefault(len(events) + 1, None) or len(events))
        monkeypatch.setattr(C, "_mps_releaseEvent", lambda event: None)
        monkeypatch.setattr(C, "_mps_recordEvent", lambda event: events.__setitem__(event, time.perf_counter()))
        monkeypatch.setattr(C, "_mps_synchronizeEvent", lambda event: None)
        monkeypatch.setattr(C, "_mps_queryEvent", lambda event: True)
        monkeypatch.setattr(C, "_mps_elapsedTimeOfEvents", lambda a, b: 1000.0 * (events[b] - events[a]))
        monkeypatch.setattr(C, "_mps_get_default_generator", lambda: self._generator)
        monkeypatch.setattr(C, "_mps_is_in_bad_fork", lambda: False)
        monkeypatch.setattr(torch.mps, "_default_mps_generator", None)
        monkeypatch.setattr(ioreport, "_apple", lambda: types.SimpleNamespace(AppleEnergyMonitor=lambda: self.monitor))
        monkeypatch.setattr(ioreport, "_ioreg", lambda: '"Device Utilization %"=73')
        self._fake_dispatcher(monkeypatch)
        version = tuple(int(p) for p in self.macos.split(".")[:2])
        monkeypatch.setattr(torch._C, "_mps_is_on_macos_or_newer", lambda major, minor: version >= (major, minor))
        monkeypatch.setattr(torch.backends.mps, "is_macos_or_newer",
                            lambda major, minor: version >= (major, minor))
        monkeypatch.setattr(sys.modules[__name__], "_active", self)
        return self

    def _fake_dispatcher(self, monkeypatch) -> None:
        """The dispatcher's MPS registrations as the macOS wheel has them (machine/kernels.kernel_kind reads these): an MPS
        kernel wherever there is a CPU one (RegisterMPS.cpp), `fallback_ops` registered from MPSFallback.mm, and
        the boxed CPU fallback for every other op only with PYTORCH_ENABLE_MPS_FALLBACK=1 (MPSFallback.mm,
        TORCH_LIBRARY_IMPL(_, MPS, m))."""
        C = torch._C
        has, dump, backend = (C._dispatch_has_kernel_for_dispatch_key, C._dispatch_dump_table,
                              C._dispatch_has_backend_fallback)

        def has_kernel(op, key):
            if key == "MPS":
                return op in self.fallback_ops or has(op, "CPU")
            return has(op, key)

        def dump_table(op):
            lines = [line for line in dump(op).splitlines() if not line.startswith("MPS:")]
            if has_kernel(op, "MPS"):
                where = ("aten/src/ATen/mps/MPSFallback.mm:42" if op in self.fallback_ops
                         else "build/aten/src/ATen/RegisterMPS_0.cpp:1")
                lines.append(f"MPS: registered at /Users/runner/work/pytorch/pytorch/{where} [kernel]")
            return "\n".join(lines)

        def has_backend_fallback(key):
            return self.fallback_enabled if key == C.DispatchKey.MPS else backend(key)
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
