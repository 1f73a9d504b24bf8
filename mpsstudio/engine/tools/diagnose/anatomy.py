"""The anatomy of a training step on one device (issue 28, part 1): a short diagnostic pass apart from any measured
run, set up exactly as a run is (run.setup.prepare: the same model, step functions and batch sources).

Rounds of two, interleaved so that drift and heat hit both alike (A B A B ..., at least 5 rounds):
1. plain: a group of steps as a run takes them (no synchronization inside; the device synchronized around the
   group), giving the step time (median and IQR over the groups), the wait for the next batch (the loader), and the
   host's own time per step with, within it, its waits for the device: `.item()`, `bool()`, `.tolist()`, `.cpu()`
   and the like on a device tensor are timed while the group runs (`waits_timed`; nothing else is touched);
2. phases: one step with the device synchronized around the copy to the device, the forward pass (with the loss),
   the backward pass and the optimizer, giving each phase's time (median and IQR over the rounds).
Then one step under a TorchDispatchMode (`OpTimer`) that counts the operations with a tensor on the device and
those that make the host wait for it, classifies each by the dispatcher (machine/kernels.py), and times each on the
device: with the device's timing events around it on CUDA and MPS (the wall clock, the device synchronized, where
events cannot be had), less an empty operation's time, which gives the device's own computing per step; on MPS the
fallback operations' share comes from the same times. On the CPU, an empty operation's cost estimates what
dispatching costs there. None of this touches a run's numbers: it runs in its own process, after or instead of one.
"""

from __future__ import annotations

import statistics
import time
from collections import Counter
from collections.abc import Callable
from contextlib import contextmanager

import torch
import torch.nn.functional as F
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten

from ...analysis.bottleneck import judged
from ...analysis.summary import quartiles
from ...machine.kernels import kernel_kind
from ...run.steps import global_settings
from ..toolkit import Stopped

PLAIN_GROUPS = 5  # rounds at least
WAIT_METHODS = ("item", "tolist", "__bool__", "__float__", "__int__", "__index__", "cpu", "numpy")
MAX_ROUNDS = 12
GROUP_S = 0.15  # target seconds of a plain group
MAX_GROUP_STEPS = 50
MAX_PASS_S = 4.0  # the rounds' target seconds: more rounds for a fast model, never fewer than PLAIN_GROUPS
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
    not the host's dispatching of them (which, timed so, made a tiny MLP's step look like computing)."""

    PAD_S = 3e-4

    def __init__(self, tdev: torch.device, sync: Callable[[], None]):
        self.sync, self.make, self.pad = sync, None, None
        makers = {"cuda": lambda: torch.cuda.Event(enable_timing=True),
                  "mps": lambda: torch.mps.event.Event(enable_timing=True)}
        make = makers.get(tdev.type)
        if make is not None:
            try:
                self.make = make
                n = 256
                while True:  # the smallest square product that keeps the device busy PAD_S
                    self.pad = torch.ones(n, n, device=tdev)
                    self._elapsed(lambda: torch.mm(self.pad, self.pad))  # a first call loads its kernel: not timed
                    if self._elapsed(lambda: torch.mm(self.pad, self.pad)) >= self.PAD_S or n >= 8192:
                        break
                    n *= 2
            except Exception:  # no timing events here (a build without them): the wall clock
                self.make, self.pad = None, None
        self.measure = f"events, {self.pad.shape[0]}² product before" if self.make is not None else "wall clock"

    def _elapsed(self, call) -> float:
        start, end = self.make(), self.make()
        self.sync()
        start.record()
        call()
        end.record()
        end.synchronize()
        return start.elapsed_time(end) / 1000.0

    def time(self, call):
        """(call's result, seconds on the device)."""
        if self.make is None:
            self.sync()
            started = time.perf_counter()
            out = call()
            self.sync()
            return out, time.perf_counter() - started
        start, end = self.make(), self.make()
        self.sync()
        torch.mm(self.pad, self.pad)  # the device busy while the call's kernels are queued behind the event
        start.record()
        out = call()
        end.record()
        end.synchronize()
        return out, start.elapsed_time(end) / 1000.0


class OpTimer(TorchDispatchMode):
    """Counts the operations with a tensor on the device, those that make the host wait for it, and times each on
    the device (DeviceClock): its time less an empty operation's (`overhead`) is what the device spent computing
    it. Below autograd, so the host's bookkeeping is not in the times."""

    def __init__(self, device_type: str, clock: DeviceClock, overhead: float):
        super().__init__()
        self.device_type, self.clock, self.overhead = device_type, clock, overhead
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
            self.device_s += max(0.0, took - self.overhead)
        return out


def empty_op_s(tdev: torch.device, clock: DeviceClock, reps: int = 40) -> float:
    """Seconds an empty operation takes by `clock` (median): what timing an operation adds to what it computes."""
    tiny = torch.zeros(1, device=tdev)
    return statistics.median(clock.time(lambda: tiny.add_(1))[1] for _ in range(reps))


@contextmanager
def waits_timed(device_type: str):
    """Within the block, the seconds the host spends in Tensor methods that wait for the device (WAIT_METHODS on a
    tensor of `device_type`) add up in the yielded list's one item. Only those methods are wrapped, so every other
    operation runs at its own speed (a dispatch mode would slow them all, and shrink the waits)."""
    total = [0.0]
    saved = {name: torch.Tensor.__dict__.get(name) for name in WAIT_METHODS}

    def timed(method):
        def wrapper(self, *args, **kwargs):
            if self.device.type != device_type:
                return method(self, *args, **kwargs)
            started = time.perf_counter()
            try:
                return method(self, *args, **kwargs)
            finally:
                total[0] += time.perf_counter() - started
        return wrapper
    try:
        for name in WAIT_METHODS:
            setattr(torch.Tensor, name, timed(getattr(torch.Tensor, name)))
        yield total
    finally:
        for name, original in saved.items():
            if original is None:
                delattr(torch.Tensor, name)
            else:
                setattr(torch.Tensor, name, original)


def _stats(values: list[float]) -> tuple[float, float]:
    """(median, IQR) in milliseconds of seconds, as a run's summary takes them (analysis.summary.quartiles)."""
    if not values:
        return 0.0, 0.0
    q1, med, q3 = quartiles([v * 1000 for v in values])
    return med, q3 - q1


@contextmanager
def _no_waits():
    yield [0.0]


def _endless(source):
    while True:
        yield from source.raw_epoch()


def measure(config, data, *, progress: Callable[[str, float], None], stop: Callable[[], bool],
            span: tuple[float, float] = (0.0, 1.0)) -> tuple[dict, object]:
    """(the step anatomy of `config` on its device, the Prepared run it measured: model and steps for the
    layer check). Stopped when the user stops between passes."""
    from ...run.setup import prepare

    lo, hi = span

    def say(message: str, at: float) -> None:
        progress(f"{config.device}: {message}", lo + (hi - lo) * at)

    def check() -> None:
        if stop():
            raise Stopped()
    noted: dict = {}
    with global_settings(config) as flushing:
        p = prepare(config, None, data, None, check, flushing, noted)
        p.meter.close()
        try:
            result = _passes(config, p, say, check)
            if "preflight" in noted:  # what the run's own preflight found before an MPS run (run/preflight.py)
                result["preflight"] = noted["preflight"]
            return result, p
        finally:
            p.model.zero_grad(set_to_none=True)


def _passes(cfg, p, say, check) -> dict:
    dev, steps, src, sync = p.device, p.steps, p.train, p.device.synchronize
    step_fn = steps.choose()
    p.model.train(cfg.mode == "train")
    raw = _endless(src)
    say("warming up", 0.0)
    warm = max(3, min(cfg.warmup_steps, 10))
    x, y = src.place(next(raw))
    steps.first(step_fn, x, y)
    sync()
    started = time.perf_counter()
    for _ in range(warm - 1):
        step_fn(*src.place(next(raw)))
    sync()
    guess = max((time.perf_counter() - started) / max(1, warm - 1), 1e-6)
    check()

    # rounds of: a plain group, a phased step (A B A B ...): drift and heat hit both alike
    per_group = max(2, min(MAX_GROUP_STEPS, round(GROUP_S / guess)))
    rounds = max(PLAIN_GROUPS, min(MAX_ROUNDS, round(MAX_PASS_S / (guess * (per_group + 1)))))
    step_s, data_s, host_s, wait_s, kept = [], [], [], [], []
    phases: dict[str, list[float]] = {k: [] for k in ("copy", "forward", "backward", "optimizer")}
    for r in range(rounds):
        say(f"timing steps and each phase (round {r + 1} of {rounds})", 0.1 + 0.55 * r / rounds)
        sync()
        loading = hosting = 0.0
        with waits_timed(dev.kind) if dev.kind != "cpu" else _no_waits() as waited:
            t0 = time.perf_counter()
            for _ in range(per_group):
                t = time.perf_counter()
                batch = next(raw)
                t1 = time.perf_counter()
                kept.append(step_fn(*src.place(batch)))
                loading += t1 - t
                hosting += time.perf_counter() - t1
            sync()
            step_s.append((time.perf_counter() - t0) / per_group)
        data_s.append(loading / per_group)
        host_s.append(hosting / per_group)
        wait_s.append(waited[0] / per_group)
        kept.clear()
        for name, value in _phased_step(cfg, steps, src, next(raw), sync).items():
            phases[name].append(value)
        check()

    say("timing each operation of one step", 0.7)
    clock = DeviceClock(p.tdev, sync)
    overhead = empty_op_s(p.tdev, clock)
    xb, yb = src.place(next(raw))
    sync()
    timer = OpTimer(dev.kind, clock, overhead)
    with timer:
        step_fn(xb, yb)
    sync()
    kinds = {op: kernel_kind(op, dev.kind) for op in timer.counts}
    out = {"device": dev.id, "kind": dev.kind, "device_name": dev.name, "batch_size": cfg.batch_size,
           "precision": cfg.precision, "mode": cfg.mode, "workers": cfg.workers,
           "ops": sum(timer.counts.values()), "distinct_ops": len(timer.counts),
           "sync_count": sum(timer.waits.values()),
           "sync_ops": [{"op": op, "count": n} for op, n in timer.waits.most_common()],
           "device_ms": 1000 * timer.device_s, "empty_op_us": 1e6 * overhead, "op_clock": clock.measure,
           "missing_ops": sorted(op for op, k in kinds.items() if k == "missing"),
           "passes": {"rounds": rounds, "plain_steps_per_group": per_group, "phase_steps": rounds}}
    total = sum(timer.seconds.values())
    fallback = [{"op": op, "count": timer.counts[op], "share": timer.seconds[op] / total if total > 0 else None}
                for op, kind in kinds.items() if kind == "cpu_fallback"]
    fallback.sort(key=lambda o: (-(o["share"] or 0), o["op"]))
    out["fallback_ops"] = fallback
    out["fallback_share"] = sum(o["share"] or 0 for o in fallback) if fallback and total > 0 else None
    out["step_ms"], out["step_iqr_ms"] = _stats(step_s)
    out["data_ms"], out["data_iqr_ms"] = _stats(data_s)
    out["host_ms"], out["host_iqr_ms"] = _stats(host_s)
    for name, values in phases.items():
        out[f"{name}_ms"], out[f"{name}_iqr_ms"] = _stats(values)
    if cfg.accumulate > 1 and phases["optimizer"]:  # one optimizer step every `accumulate`: its mean per step
        out["optimizer_ms"] = 1000 * statistics.fmean(phases["optimizer"])
    out["samples_per_s"] = cfg.batch_size / (out["step_ms"] / 1000) if out["step_ms"] > 0 else None
    check()

    out["sync_wait_ms"] = _stats(wait_s)[0]
    if dev.kind == "cpu":
        out["launch_us"], out["launch_measure"] = empty_op_us(), "estimated"
    else:
        busy = max(0.0, out["host_ms"] - out["sync_wait_ms"])
        out["launch_us"] = 1000 * busy / out["ops"] if out["ops"] else None
        out["launch_measure"] = "measured"
    return judged(out)


def _phased_step(cfg, steps, src, batch, sync) -> dict[str, float]:
    """One step with the device synchronized around each phase, as the run's step functions do it (run/steps.py:
    autocast, the GradScaler, gradient accumulation's optimizer every `accumulate` micro-batches): seconds each."""
    opt, scaler, model = steps.optimizer, steps.scaler, steps.forward
    sync()
    t0 = time.perf_counter()
    x, y = src.place(batch)
    sync()
    t1 = time.perf_counter()
    if cfg.mode == "inference":
        with torch.inference_mode(), steps.autocast():
            F.cross_entropy(model(x), y)
        sync()
        return {"copy": t1 - t0, "forward": time.perf_counter() - t1, "backward": 0.0, "optimizer": 0.0}
    n_acc = cfg.accumulate
    if steps.micro % n_acc == 0:
        opt.zero_grad(set_to_none=True)
    with steps.autocast():
        loss = F.cross_entropy(model(x), y)
    sync()
    t2 = time.perf_counter()
    scaled = loss / n_acc if n_acc > 1 else loss
    (scaler.scale(scaled) if scaler is not None else scaled).backward()
    sync()
    t3 = time.perf_counter()
    steps.micro += 1
    if steps.micro % n_acc == 0:
        if scaler is not None:
            scaler.step(opt)
            scaler.update()
        else:
            opt.step()
    sync()
    return {"copy": t1 - t0, "forward": t2 - t1, "backward": t3 - t2, "optimizer": time.perf_counter() - t3}


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
