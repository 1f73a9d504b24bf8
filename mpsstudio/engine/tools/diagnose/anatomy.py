"""The anatomy of a training step on one device (issue 28, part 1): a short diagnostic pass apart from any measured
run, set up exactly as a run is (run.setup.prepare: the same model, step functions and batch sources).

Rounds of two, interleaved so that drift and heat hit both alike (A B A B ..., at least 5 rounds):
1. plain: a group of steps as a run takes them (no synchronization inside; the device synchronized around the
   group), giving the step time (median and IQR over the groups), the wait for the next batch (the loader), and the
   host's own time per step with, within it, its waits for the device: `.item()`, `bool()`, `.tolist()`, `.cpu()`
   and the like on a device tensor are timed while the group runs (`waits_timed`; nothing else is touched);
2. phases: one step with the device synchronized around the copy to the device, the forward pass (with the loss),
   the backward pass and the optimizer, giving each phase's time (median and IQR over the rounds).
Then one step under a TorchDispatchMode (`OpTimer`, timing.py) that counts the operations with a tensor on the
device and those that make the host wait for it, classifies each by the dispatcher (machine/kernels.py), and times
each on the device: with the device's timing events around it on CUDA and MPS (the wall clock, the device
synchronized, where events cannot be had or fail), less an empty operation's time, which gives the device's own
computing per step; on MPS the fallback operations' share comes from the same times. That timing has a deadline:
the anatomy of the rounds goes to the parent first, which ends the process and keeps it if the timing never ends.
On the CPU, an empty operation's cost estimates what dispatching costs there. None of this touches a run's numbers:
it runs in its own process, after or instead of one.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from contextlib import contextmanager

import torch

from ...analysis.bottleneck import judged
from ...analysis.summary import quartiles
from ...machine.apple import mps_event_hang_note
from .syncs import Replay
from ...machine.kernels import kernel_kind
from ...run.steps import global_settings
from ...run.setup import Prepared
from ..toolkit import Stopped
from .timing import DeviceClock, OpTimer, empty_op_s, empty_op_us, waits_timed

PLAIN_GROUPS = 5  # rounds at least
MAX_ROUNDS = 12
GROUP_S = 0.15  # target seconds of a plain group
MAX_GROUP_STEPS = 50
MAX_PASS_S = 4.0  # the rounds' target seconds: more rounds for a fast model, never fewer than PLAIN_GROUPS
# the per-operation timing's deadline: this many seconds, plus OP_DEADLINE_STEPS plain steps' time; past it the
# parent ends the process and keeps the anatomy of the rounds (an MPS event can wait forever: pytorch#162872)
OP_DEADLINE_S = 60.0
OP_DEADLINE_STEPS = 50


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
            span: tuple[float, float] = (0.0, 1.0),
            checkpoint: Callable[[dict | None, float | None, str], None] | None = None) -> tuple[dict, Prepared]:
    """(the step anatomy of `config` on its device, the Prepared run it measured: model and steps for the
    layer check). Stopped when the user stops between passes. `checkpoint(anatomy, deadline_s, why)` is called
    before the per-operation timing with the anatomy of the rounds (what stands if that timing never ends; the
    parent ends the process after `deadline_s`), and `checkpoint(None, None, "")` once it has ended."""
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
            def keep(anatomy, deadline_s, why):  # with the preflight the run's setup made on MPS
                if checkpoint is not None:
                    found = {"preflight": noted["preflight"]} if "preflight" in noted and anatomy else {}
                    checkpoint({**anatomy, **found} if anatomy else None, deadline_s, why)
            result = _passes(config, p, say, check, keep)
            if "preflight" in noted:  # what the run's own preflight found before an MPS run (run/preflight.py)
                result["preflight"] = noted["preflight"]
            return result, p
        finally:
            p.model.zero_grad(set_to_none=True)


def _passes(cfg, p, say, check, checkpoint) -> dict:
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

    out = {"device": dev.id, "kind": dev.kind, "device_name": dev.name, "batch_size": cfg.batch_size,
           "precision": cfg.precision, "mode": cfg.mode, "workers": cfg.workers,
           "passes": {"rounds": rounds, "plain_steps_per_group": per_group, "phase_steps": rounds}}
    out["step_ms"], out["step_iqr_ms"] = _stats(step_s)
    out["data_ms"], out["data_iqr_ms"] = _stats(data_s)
    out["host_ms"], out["host_iqr_ms"] = _stats(host_s)
    for name, values in phases.items():
        out[f"{name}_ms"], out[f"{name}_iqr_ms"] = _stats(values)
    if cfg.accumulate > 1 and phases["optimizer"]:  # one optimizer step every `accumulate`: its mean per step
        out["optimizer_ms"] = 1000 * statistics.fmean(phases["optimizer"])
    out["samples_per_s"] = cfg.batch_size / (out["step_ms"] / 1000) if out["step_ms"] > 0 else None
    out["sync_wait_ms"] = _stats(wait_s)[0]
    if dev.kind != "cpu":  # what the host's waits cost, measured by removing them (syncs.py)
        say("timing the step without its waits for the device", 0.67)
        out.update(_without_waits(dev.kind, step_fn, src, raw, sync, per_group))
    if dev.kind == "cpu":
        out["launch_us"], out["launch_measure"] = empty_op_us(), "estimated"
    check()

    deadline_s = OP_DEADLINE_S + OP_DEADLINE_STEPS * statistics.median(step_s)
    # registry.ended puts how the process ended in place of {how}
    why = (f"the timing of each operation on {dev.id} did not finish: {{how}}"
           + (mps_event_hang_note(torch.__version__) if dev.kind == "mps" else "")
           + "; the bound is judged without the device's own time or the operations' count")
    checkpoint(judged({**out, **_untimed(dev.kind), "op_timing_error": why}), deadline_s, why)
    say("timing each operation of one step", 0.7)
    clock = DeviceClock(p.tdev, sync)
    empty_op_s(clock)
    xb, yb = src.place(next(raw))
    sync()
    timer = OpTimer(dev.kind, clock)
    with timer:
        step_fn(xb, yb)
    sync()
    checkpoint(None, None, "")
    kinds = {op: kernel_kind(op, dev.kind) for op in timer.counts}
    out.update({"ops": sum(timer.counts.values()), "distinct_ops": len(timer.counts),
                "sync_count": sum(timer.waits.values()),
                "sync_ops": [{"op": op, "count": n} for op, n in timer.waits.most_common()],
                "device_ms": 1000 * timer.device_s, "empty_op_us": 1e6 * clock.overhead, "op_clock": clock.measure,
                "missing_ops": sorted(op for op, k in kinds.items() if k == "missing")})
    total = sum(timer.seconds.values())
    fallback: list[dict] = [{"op": op, "count": timer.counts[op], "share": timer.seconds[op] / total if total > 0 else None}
                for op, kind in kinds.items() if kind == "cpu_fallback"]
    fallback.sort(key=lambda o: (-(o["share"] or 0), o["op"]))
    out["fallback_ops"] = fallback
    out["fallback_share"] = sum(o["share"] or 0 for o in fallback) if fallback and total > 0 else None
    if dev.kind != "cpu":
        busy = max(0.0, out["host_ms"] - out["sync_wait_ms"])
        out["launch_us"] = 1000 * busy / out["ops"] if out["ops"] else None
        out["launch_measure"] = "measured"
    return judged(out)


SYNC_ROUNDS = 3  # alternated pairs of groups (as it is, then its waits answered from the record)


def _without_waits(kind: str, step_fn, src, raw, sync, per_group: int) -> dict:
    """The step with its reads from the device answered from a record (syncs.Replay), timed in groups alternated with
    the step as it is: `nosync_step_ms` and `sync_cost_ms` (their medians' difference), and where the reads are
    asked for (`sync_calls`); {} when the step reads nothing back."""
    replay = Replay(kind)
    sync()
    with replay.recording():
        step_fn(*src.place(next(raw)))
    sync()
    if not replay.values:
        return {}
    plain: list[float] = []
    free: list[float] = []
    for r in range(SYNC_ROUNDS):
        for replayed in ((False, True) if r % 2 == 0 else (True, False)):
            batches = [src.place(next(raw)) for _ in range(per_group)]
            sync()
            started = time.perf_counter()
            if replayed:
                with replay.replaying():
                    for batch in batches:
                        replay.next_step()
                        step_fn(*batch)
            else:
                for batch in batches:
                    step_fn(*batch)
            sync()
            (free if replayed else plain).append((time.perf_counter() - started) / per_group)
    with_waits, without = statistics.median(plain), statistics.median(free)
    return {"nosync_step_ms": 1000 * without, "sync_cost_ms": 1000 * max(0.0, with_waits - without),
            "sync_calls": replay.where(), "sync_method": (f"{SYNC_ROUNDS} alternated pairs of {per_group}-step groups, "
                                                          "as it is and with its reads answered from a record")}


def _untimed(kind: str) -> dict:
    """The figures only the per-operation timing gives, as a result without it has them (unknown)."""
    figures: dict = {"ops": None, "distinct_ops": None, "sync_count": None, "sync_ops": [], "device_ms": None,
               "empty_op_us": None, "op_clock": None, "missing_ops": [], "fallback_ops": [], "fallback_share": None}
    return figures if kind == "cpu" else {**figures, "launch_us": None, "launch_measure": None}


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
            steps.feed.loss_of(model, x, y)
        sync()
        return {"copy": t1 - t0, "forward": time.perf_counter() - t1, "backward": 0.0, "optimizer": 0.0}
    n_acc = cfg.accumulate
    if steps.micro % n_acc == 0:
        opt.zero_grad(set_to_none=True)
    with steps.autocast():
        loss = steps.feed.loss_of(model, x, y)
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
