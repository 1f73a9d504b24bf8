"""How a diagnosis times what the device does (anatomy.py uses these): each operation on the device by its timing
events (DeviceClock), the operations of one step counted, classified and timed (OpTimer), an empty operation's
cost, and the host's waits for the device (waits_timed)."""

from __future__ import annotations

import statistics
import time
from collections import Counter
from collections.abc import Callable
from typing import Any
from contextlib import contextmanager

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten

WAIT_METHODS = ("item", "tolist", "__bool__", "__float__", "__int__", "__index__", "cpu", "numpy")
# operations that make the host wait for the device: a value read on the host, or an output whose size depends on
# the data (the host must learn it before it can go on)
WAITING_OPS = {"aten::_local_scalar_dense", "aten::item", "aten::nonzero", "aten::masked_select", "aten::unique",
               "aten::_unique", "aten::_unique2", "aten::unique_dim", "aten::unique_consecutive",
               "aten::repeat_interleave", "aten::is_nonzero", "aten::equal", "aten::allclose"}


def _on(flat, device_type: str) -> bool:
    return any(isinstance(t, torch.Tensor) and t.device.type == device_type for t in flat)


def _waits(func, args, kwargs, device_type: str) -> bool:
    """Whether this call makes the host wait for the device (never on the CPU, which computes as it goes)."""
    if device_type == "cpu":
        return False
    name = func.name()
    if name in WAITING_OPS:
        return True
    if name in ("aten::_to_copy", "aten::copy_", "aten::to"):
        # a copy from the device to the CPU: _to_copy(self, device=cpu) or copy_(cpu destination, device source)
        if name == "aten::copy_" and len(args) >= 2:
            return (isinstance(args[0], torch.Tensor) and args[0].device.type == "cpu"
                    and isinstance(args[1], torch.Tensor) and args[1].device.type == device_type)
        target = kwargs.get("device")
        return (args and isinstance(args[0], torch.Tensor) and args[0].device.type == device_type
                and target is not None and torch.device(target).type == "cpu")
    return False


class DeviceClock:
    """The device's own time of one call: its timing events recorded around it on CUDA and MPS (torch.cuda.Event,
    torch.mps.event.Event with enable_timing; elapsed_time in milliseconds), else the wall clock with the device
    synchronized around it. Before the first event the device is given a matrix product of at least PAD_S to
    compute, so that the call's kernels are queued before it reaches them: the events then time its kernels alone,
    not the host's dispatching of them (which, timed so, made a tiny MLP's step look like computing).

    MPS events up to torch 2.14 (aten/src/ATen/mps/MPSEvent.mm) are the host's clock read in Metal's completion
    callbacks, not GPU timestamps, and `end.synchronize()` before `elapsed_time` consumes the one-shot notification
    that `elapsed_time` then waits for forever (pytorch#162872); from 2.15 they are the GPU's completion times and
    that hang is gone (machine/apple.mps_event_words). On MPS `elapsed_time` is called alone either way (it waits
    for the end event itself). A timing that raises (MPS: "End event N was not recorded after start event M" for short
    intervals, "Events were not created with argument 'enable_timing=True'") switches this clock to the wall clock
    for the rest of the pass, and `measure` says so; the call it was timing keeps its wall time."""

    PAD_S = 3e-4

    def __init__(self, tdev: torch.device, sync: Callable[[], None]):
        self.sync, self.tdev, self.kind = sync, tdev, tdev.type
        self.make: Callable[[], Any] | None = None  # a timing event of the device (CUDA's or MPS's), or None
        self.pad: torch.Tensor | None = None  # the square matrix whose product keeps the device busy
        self.pad_s = 0.0
        self.failure: str | None = None  # why the events were given up, said in `measure`
        self.overhead = 0.0  # seconds an empty operation takes by this clock (empty_op_s)
        self.tiny = torch.zeros(1, device=tdev)  # the empty operation's tensor, made before any dispatch mode
        makers = {"cuda": lambda: torch.cuda.Event(enable_timing=True),
                  "mps": lambda: torch.mps.event.Event(enable_timing=True)}
        make = makers.get(tdev.type)
        if make is not None:
            try:
                make()  # a build without timing events raises here: the wall clock, nothing to say
            except Exception:
                make = None
        if make is not None:
            self.make = make
            n = 256
            while self.make is not None:  # the smallest square product that keeps the device busy PAD_S
                self.pad = torch.ones(n, n, device=tdev)
                self.time(lambda: torch.mm(self.pad, self.pad), padded=False)  # a first call loads its kernel
                self.pad_s = self.time(lambda: torch.mm(self.pad, self.pad), padded=False)[1]
                if self.pad_s >= self.PAD_S or n >= 8192:
                    break
                n *= 2
            if self.make is None:  # the events failed while the pad was sized: no pad on the wall clock
                self.pad, self.pad_s = None, 0.0

    @property
    def measure(self) -> str:
        """How the operations were timed, in words (a result's `op_clock`)."""
        wall = "the wall clock, the device synchronized around each"
        if self.failure is not None:
            return f"{wall}, after the timing events failed ({self.failure})"
        if self.make is None:
            return wall
        pad = f"a {self.pad.shape[0] if self.pad is not None else 0}² matrix product queued before each"
        if self.kind == "mps":
            from ...machine.apple import mps_event_words

            return f"MPS timing events ({mps_event_words(torch.__version__)}; {pad})"
        return f"CUDA timing events ({pad})"

    def _read(self, start, end) -> float:
        """Seconds between two recorded events. CUDA's elapsed_time needs the end event complete; MPS's waits for
        it itself, and must not be given a synchronized one (pytorch#162872: it would wait forever)."""
        if self.kind != "mps":
            end.synchronize()
        return start.elapsed_time(end) / 1000.0

    def time(self, call, padded: bool = True):
        """(call's result, seconds on the device)."""
        if self.make is None:
            self.sync()
            started = time.perf_counter()
            out = call()
            self.sync()
            return out, time.perf_counter() - started
        start, end = self.make(), self.make()
        self.sync()
        started = time.perf_counter()
        if padded and self.pad is not None:
            torch.mm(self.pad, self.pad)  # the device busy while the call's kernels are queued behind the event
        start.record()
        out = call()
        end.record()
        try:
            return out, self._read(start, end)
        except Exception as exc:  # this device's events are not to be trusted for the rest of the pass
            self.sync()
            took = max(0.0, time.perf_counter() - started - (self.pad_s if padded else 0.0))
            self._give_up(exc)
            return out, took

    def _give_up(self, exc: BaseException) -> None:
        from ...basics.formatting import error_line

        self.failure, self.make = error_line(exc, 160), None
        if self.overhead:  # an empty operation's cost by the clock used from now on
            empty_op_s(self)


class OpTimer(TorchDispatchMode):
    """Counts the operations with a tensor on the device, those that make the host wait for it, and times each on
    the device (DeviceClock): its time less an empty operation's (`overhead`) is what the device spent computing
    it. Below autograd, so the host's bookkeeping is not in the times."""

    def __init__(self, device_type: str, clock: DeviceClock):
        super().__init__()
        self.device_type, self.clock = device_type, clock
        self.counts: Counter[str] = Counter()
        self.waits: Counter[str] = Counter()
        self.seconds: Counter[str] = Counter()
        self.device_s = 0.0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        flat, _ = tree_flatten((args, kwargs))
        if not _on(flat, self.device_type):
            return func(*args, **kwargs)
        name = func.name()
        self.counts[name] += 1
        waits = _waits(func, args, kwargs, self.device_type)
        if waits:
            self.waits[name] += 1
        out, took = self.clock.time(lambda: func(*args, **kwargs))
        self.seconds[name] += took
        if not waits:  # a wait's end event follows the host's round trip: a value copied back is not computing
            self.device_s += max(0.0, took - self.clock.overhead)
        return out


def empty_op_s(clock: DeviceClock, reps: int = 40) -> float:
    """Seconds an empty operation takes by `clock` (median), kept as the clock's `overhead`: what timing an operation
    adds to what it computes. Measured again by the wall clock when the events fail on the way."""
    tiny = clock.tiny
    events = clock.make is not None
    times = [clock.time(lambda: tiny.add_(1))[1] for _ in range(reps)]
    if events and clock.make is None:  # the events failed part way: every figure by the one clock used from now on
        times = [clock.time(lambda: tiny.add_(1))[1] for _ in range(reps)]
    clock.overhead = statistics.median(times)
    return clock.overhead


@contextmanager
def waits_wrapped(wrap):
    """Within the block, each of torch.Tensor's methods that wait for the device (WAIT_METHODS) is
    `wrap(name, method)`; the originals are back after it, an inherited one removed again."""
    saved = {name: torch.Tensor.__dict__.get(name) for name in WAIT_METHODS}
    try:
        for name in WAIT_METHODS:
            setattr(torch.Tensor, name, wrap(name, getattr(torch.Tensor, name)))
        yield
    finally:
        for name, original in saved.items():
            if original is None:
                delattr(torch.Tensor, name)
            else:
                setattr(torch.Tensor, name, original)


@contextmanager
def waits_timed(device_type: str):
    """Within the block, the seconds the host spends in Tensor methods that wait for the device (WAIT_METHODS on a
    tensor of `device_type`) add up in the yielded list's one item. Only those methods are wrapped, so every other
    operation runs at its own speed (a dispatch mode would slow them all, and shrink the waits)."""
    total = [0.0]

    def timed(_name, method):
        def wrapper(self, *args, **kwargs):
            if self.device.type != device_type:
                return method(self, *args, **kwargs)
            started = time.perf_counter()
            try:
                return method(self, *args, **kwargs)
            finally:
                total[0] += time.perf_counter() - started
        return wrapper
    with waits_wrapped(timed):
        yield total


def empty_op_us(reps: int = 2000) -> float:
    """Microseconds of one small CPU operation with autograd recording it (what dispatch costs per operation,
    whatever the operation computes): the estimate of launching on the CPU."""
    w = torch.zeros(4, requires_grad=True)
    for _ in range(50):
        w * 1.0
    times = []
    for _ in range(3):
        t0 = time.perf_counter()
        for _ in range(reps // 3):
            w * 1.0
        times.append((time.perf_counter() - t0) / (reps // 3))
    return 1e6 * min(times)
