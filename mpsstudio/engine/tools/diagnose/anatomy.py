"""The anatomy of a training step on one device (issue 28, part 1): a short diagnostic pass apart from any measured
run, set up exactly as a run is (run.setup.prepare: the same model, step functions and batch sources).

Rounds of three, interleaved so that drift and heat hit each alike (A B C A B C ..., at least 5 rounds):
1. plain: a group of steps as a run takes them (no synchronization inside; the device synchronized around the
   group), giving the step time (median and IQR over the groups) and the wait for the next batch (the loader);
2. host: one step with the device synchronized before it and not after, giving the host's time to issue a step;
3. phases: one step with the device synchronized around the copy to the device, the forward pass (with the loss),
   the backward pass and the optimizer, giving each phase's time (median and IQR over the rounds).
Then:
4. operations: one step under a TorchDispatchMode that counts the operations with a tensor on the device and the
   ones that make the host wait for the device (`.item()`, copies to the CPU, data-dependent shapes), each
   classified by the dispatcher (machine/kernels.py), each timed with the device synchronized around it (as inspect
   times the fallback ones): less an empty operation's round trip, the device's own computing time; where the
   step waits for the device, the waits are timed (a mode that times those operations alone);
5. on the CPU, an empty operation's cost (the estimate of what launching costs there).
None of these synchronizations touches a run's numbers: this runs in its own process, after or instead of a run.
"""

from __future__ import annotations

import statistics
import time
from collections import Counter
from collections.abc import Callable

import torch
import torch.nn.functional as F
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten

from ...analysis.bottleneck import judged
from ...machine.kernels import kernel_kind
from ...run.steps import global_settings
from ..toolkit import Stopped

PLAIN_GROUPS = 5  # rounds at least
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


class OpTimer(TorchDispatchMode):
    """Counts the operations with a tensor on the device, those that make the host wait for it, and times each with
    the device synchronized around it: its time less an empty operation's round trip (`overhead`) is what the
    device spent computing it. Below autograd, so the host's bookkeeping is not in the times."""

    def __init__(self, device_type: str, sync: Callable[[], None], overhead: float):
        super().__init__()
        self.device_type, self.sync, self.overhead = device_type, sync, overhead
        self.counts: Counter[str] = Counter()
        self.waits: Counter[str] = Counter()
        self.seconds: Counter[str] = Counter()  # with the round trip
        self.device_s = 0.0  # without it

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        flat, _ = tree_flatten((args, kwargs))
        if not _on(flat, self.device_type):
            return func(*args, **kwargs)
        name = func.name()
        self.counts[name] += 1
        if _waits(func, args, kwargs, self.device_type):
            self.waits[name] += 1
        self.sync()
        started = time.perf_counter()
        out = func(*args, **kwargs)
        self.sync()
        took = time.perf_counter() - started
        self.seconds[name] += took
        self.device_s += max(0.0, took - self.overhead)
        return out


def round_trip_s(tdev: torch.device, sync: Callable[[], None], reps: int = 40) -> float:
    """Seconds of an empty operation with the device synchronized around it (median): launching it, the device
    starting it and the host learning it is done, with next to nothing computed."""
    tiny = torch.zeros(1, device=tdev)
    times = []
    for _ in range(reps):
        sync()
        t0 = time.perf_counter()
        tiny.add_(1)
        sync()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


class WaitTimer(TorchDispatchMode):
    """Times the operations that make the host wait for the device (nothing is synchronized beyond what they
    do themselves); every other operation passes through."""

    def __init__(self, device_type: str):
        super().__init__()
        self.device_type = device_type
        self.seconds = 0.0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if not _waits(func, args, kwargs, self.device_type):
            return func(*args, **kwargs)
        started = time.perf_counter()
        out = func(*args, **kwargs)
        self.seconds += time.perf_counter() - started
        return out


def _stats(values: list[float]) -> tuple[float, float]:
    """(median, IQR) in milliseconds of seconds."""
    ms = [v * 1000 for v in values]
    if len(ms) < 2:
        return (ms[0] if ms else 0.0), 0.0
    q1, med, q3 = statistics.quantiles(ms, n=4, method="inclusive")
    return med, q3 - q1


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
    with global_settings(config) as flushing:
        p = prepare(config, None, data, None, check, flushing, {})
        p.meter.close()
        try:
            return _passes(config, p, say, check), p
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

    # rounds of: a plain group, a host step, a phased step (A B C A B C ...): drift and heat hit all three alike
    per_group = max(2, min(MAX_GROUP_STEPS, round(GROUP_S / guess)))
    rounds = max(PLAIN_GROUPS, min(MAX_ROUNDS, round(MAX_PASS_S / (guess * (per_group + 2)))))
    step_s, data_s, host_s, kept = [], [], [], []
    phases: dict[str, list[float]] = {k: [] for k in ("copy", "forward", "backward", "optimizer")}
    for r in range(rounds):
        say(f"timing steps, their host work and each phase (round {r + 1} of {rounds})", 0.1 + 0.55 * r / rounds)
        sync()
        waited = 0.0
        t0 = time.perf_counter()
        for _ in range(per_group):
            t = time.perf_counter()
            batch = next(raw)
            waited += time.perf_counter() - t
            kept.append(step_fn(*src.place(batch)))
        sync()
        step_s.append((time.perf_counter() - t0) / per_group)
        data_s.append(waited / per_group)
        kept.clear()
        xb, yb = src.place(next(raw))
        sync()
        t0 = time.perf_counter()
        step_fn(xb, yb)
        host_s.append(time.perf_counter() - t0)
        sync()
        for name, value in _phased_step(cfg, steps, src, next(raw), sync).items():
            phases[name].append(value)
        check()
    n_pass = rounds

    say("timing each operation of one step", 0.7)
    overhead = round_trip_s(p.tdev, sync)
    xb, yb = src.place(next(raw))
    sync()
    timer = OpTimer(dev.kind, sync, overhead)
    with timer:
        step_fn(xb, yb)
    sync()
    kinds = {op: kernel_kind(op, dev.kind) for op in timer.counts}
    out = {"device": dev.id, "kind": dev.kind, "device_name": dev.name, "batch_size": cfg.batch_size,
           "precision": cfg.precision, "mode": cfg.mode, "workers": cfg.workers,
           "ops": sum(timer.counts.values()), "distinct_ops": len(timer.counts),
           "sync_count": sum(timer.waits.values()),
           "sync_ops": [{"op": op, "count": n} for op, n in timer.waits.most_common()],
           "device_ms": 1000 * timer.device_s, "round_trip_us": 1e6 * overhead,
           "missing_ops": sorted(op for op, k in kinds.items() if k == "missing"),
           "passes": {"rounds": rounds, "plain_steps_per_group": per_group, "host_steps": rounds,
                      "phase_steps": rounds}}
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

    out["sync_wait_ms"] = 0.0
    if out["sync_count"] and dev.kind != "cpu":
        say("timing the waits for the device", 0.8)
        waits = []
        for _ in range(n_pass):
            xb, yb = src.place(next(raw))
            sync()
            timer = WaitTimer(dev.kind)
            with timer:
                step_fn(xb, yb)
            sync()
            waits.append(timer.seconds)
        out["sync_wait_ms"] = _stats(waits)[0]
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
