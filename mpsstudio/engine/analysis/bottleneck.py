"""What bounds a training step, in one word and one sentence, from a diagnosis's measured step anatomy (the
diagnose tool, engine/tools/diagnose/). No torch: the same function names the bound of a fresh diagnosis and of
one read back from a file, so the words always follow the numbers.

The figures (milliseconds per step, medians over steps):
- `step_ms`: the step as a run takes it (no synchronization inside, the loader's wait included);
- `data_ms`: the wait for the next batch (the loader); `copy_ms`, `forward_ms`, `backward_ms`, `optimizer_ms`: each
  phase with the device synchronized around it;
- `host_ms`: the host's time per step as a run takes them (the loader's wait apart), which includes its waits for
  the device inside the step (`sync_wait_ms`: `.item()`, `bool()`, `.cpu()` and the like on a device tensor) and,
  when the device is far behind, its waits for room in the device's queue;
- `device_ms`: the device's own computing per step (each operation timed with the device synchronized around it,
  less an empty operation's round trip; an estimate);
- `ops`: operations per step; `launch_us`: the host's cost per operation (on a GPU the host's busy time over the
  operations, measured; on the CPU, which computes as it goes, the cost of an empty operation, estimated);
- `fallback_share`: the share of the time in operations spent in ones that ran on the CPU (MPS only).

Each candidate cause gets the share of the step it costs; the largest one past its threshold is the bound, else the
device's own computing is (`compute`).
"""

from __future__ import annotations

from ..basics.formatting import is_finite, plural

BOUNDS = ("data", "launch", "fallback", "sync", "compute")
# the share of the step a cause must cost to be named the bound (below, the device's computing dominates)
# (the waits' cost is a lower bound, what overlapping the host's and the device's work would save, and a wait is one
# line to remove: named from 15 %)
THRESHOLDS = {"data": 0.30, "fallback": 0.30, "sync": 0.15, "launch": 0.30}
PHASES = ("data", "copy", "forward", "backward", "optimizer")


def _ms(v: float | None) -> str:
    if v is None:
        return "? ms"
    return f"{v:,.2f} ms" if v < 10 else f"{v:,.1f} ms"


def costs(a: dict) -> dict[str, float]:
    """The milliseconds per step each cause costs (0 where it does not apply or was not measured).

    On a GPU the host's own work (`busy`: its time to issue a step, less its waits inside it) overlaps the device's
    computing (`device_ms`: each operation timed alone, less an empty operation's round trip) unless a wait stops
    it, so without waits a step takes about the larger of the two. Launching costs what the host's work exceeds the
    device's by (the device idles that long); the waits cost what the step takes beyond that overlap and the wait for
    data. A result without `device_ms` takes the part of the step the host's work does not cover as the device's."""
    step = a.get("step_ms") or 0.0
    compute = sum(a.get(f"{p}_ms") or 0.0 for p in ("forward", "backward", "optimizer"))
    host, wait, data = a.get("host_ms") or 0.0, a.get("sync_wait_ms") or 0.0, a.get("data_ms") or 0.0
    busy = max(0.0, host - wait)
    out = {"data": data, "fallback": (a.get("fallback_share") or 0.0) * compute}
    if a.get("kind") == "cpu":
        # the CPU computes each operation as the host issues it: what launching costs is the operations' count
        # times an empty operation's cost; waiting for the CPU is computing
        out["launch"] = (a.get("ops") or 0) * (a.get("launch_us") or 0.0) / 1000.0
        out["sync"] = 0.0
    else:
        device = a.get("device_ms")
        device = device if is_finite(device) and device >= 0 else max(0.0, step - busy - data)
        out["launch"] = max(0.0, busy - device)
        measured = a.get("sync_cost_ms")
        if is_finite(measured) and measured >= 0:  # measured by removing the waits (diagnose/syncs.py)
            out["sync"] = measured
        else:
            out["sync"] = max(0.0, step - max(device, busy) - data) if (a.get("sync_count") or 0) > 0 else 0.0
    return {k: max(0.0, min(v, step)) if step > 0 else 0.0 for k, v in out.items()}


def classify(a: dict) -> tuple[str, dict[str, float]]:
    """(bound, share of the step per cause) for one device's anatomy `a`."""
    step = a.get("step_ms") or 0.0
    spent = costs(a)
    shares = {k: (v / step if step > 0 else 0.0) for k, v in spent.items()}
    over = [k for k in ("data", "fallback", "sync", "launch") if shares[k] >= THRESHOLDS[k]]
    bound = max(over, key=lambda k: shares[k]) if over else "compute"
    return bound, shares


def sentence(a: dict, bound: str, shares: dict[str, float]) -> str:
    """The bound in words, with the numbers that make it and what would help."""
    device, step = a.get("device", "the device"), a.get("step_ms") or 0.0
    waiter = device
    if bound == "data":
        workers = a.get("workers") or 0
        fix = ("with 0 workers the training process loads every batch itself: try --workers 4 (Advanced → Data "
               "workers) or keep the data in memory" if workers == 0 else
               f"its {plural(workers, 'worker')} cannot keep up: more workers, smaller images or data kept in memory "
               "would help")
        wait = (f"loading the data takes {shares['data']:.0%} of each step" if a.get("kind") == "cpu" else
                f"the loader keeps {waiter} waiting {shares['data']:.0%} of each step")
        return f"data: {wait} ({_ms(a['data_ms'])} of {_ms(step)}); {fix}."
    if bound == "launch":
        ops, per = a.get("ops") or 0, a.get("launch_us") or 0.0
        fix = "larger batches or torch.compile (fewer, larger operations) would help."
        if a.get("kind") == "cpu":
            total = ops * per / 1000.0
            size = (f"about {_ms(total)}, more than the whole {_ms(step)} step" if total >= step else
                    f"about {_ms(total)} of a {_ms(step)} step")
            return (f"launch: {ops:,} operations a step at ~{per:,.1f} µs each just to dispatch (an empty "
                    f"operation's cost, estimated) come to {size}: dispatching, not arithmetic, is the largest part of "
                    f"the CPU's step; {fix}")
        return (f"launch: {ops:,} operations a step at ~{per:,.1f} µs each to launch (the host's time, measured) take "
                f"{_ms(costs(a)['launch'])} of a {_ms(step)} step, so {device} waits for the host; {fix}")
    if bound == "fallback":
        names = ", ".join(o["op"] for o in (a.get("fallback_ops") or [])[:3]) or "some operations"
        return (f"fallback: {names} ran on the CPU: {shares['fallback']:.0%} of the step "
                f"({_ms(costs(a)['fallback'])} of {_ms(step)}), each copying its tensors to the CPU and back; a newer "
                "PyTorch or another operation that MPS has would help.")
    if bound == "sync":
        if is_finite(a.get("sync_cost_ms")):
            return (f"sync: the host waits for {device} {_where_waits(a)}; without those waits the step takes "
                    f"{_ms(a.get('nosync_step_ms'))} instead of {_ms(step)}: they cost {shares['sync']:.0%} of it "
                    "(measured by answering them from a record); keep the values on the device (no .item(), "
                    ".tolist(), bool() or printing of tensors inside the step) to save that.")
        ops = ", ".join(f"{o['op']} ({o['count']})" for o in (a.get("sync_ops") or [])[:3])
        return (f"sync: the step waits for {device} {plural(a.get('sync_count') or 0, 'time')} ({ops}) and takes "
                f"{_ms(costs(a)['sync'])} of its {_ms(step)} beyond what the host's and the device's work would take "
                "overlapped; keeping values on the device (no .item(), .tolist(), bool() or printing of tensors "
                "inside the step) would save about that.")
    parts = [(p, a.get(f"{p}_ms") or 0.0) for p in ("forward", "backward", "optimizer")]
    total = sum(v for _, v in parts)
    said = ", ".join(f"{p} {v / total:.0%}" for p, v in parts if v > 0) if total > 0 else "no phase measured"
    helps = (["lower precision (bf16 or fp16 autocast)"] if a.get("precision", "fp32") == "fp32" else []) + [
        "a smaller model", "a faster device"]
    waits = ""
    if is_finite(a.get("sync_cost_ms")) and shares.get("sync", 0.0) >= SYNC_SAID:  # below the bound, still worth it
        waits = (f" The host's waits for {device} ({_where_waits(a)}) also cost {shares['sync']:.0%} of the step "
                 f"({_ms(a['sync_cost_ms'])}, measured by answering them from a record): keeping those values on the "
                 "device saves that.")
    return (f"compute: {device} spends the step computing ({said} of {_ms(total)}); {', '.join(helps[:-1])} or "
            f"{helps[-1]} would make it shorter.{waits}")


SYNC_SAID = 0.05  # a measured share of the step the host's waits cost from which a sentence names them


def _where_waits(a: dict) -> str:
    """"6 times a step: .item() at blocks_item.py:15 (6)"."""
    calls = [c for c in (a.get("sync_calls") or []) if isinstance(c, dict)]
    count = sum(c.get("count") or 0 for c in calls) or a.get("sync_count") or 0
    where = ", ".join(f"{c.get('call')} ({c.get('count')})" for c in calls[:3])
    return f"{plural(count, 'time')} a step" + (f": {where}" if where else "")


def phase_sum_ratio(a: dict) -> float | None:
    """The synchronized phases' sum over the unsynchronized step (1.0: they account for it exactly)."""
    step = a.get("step_ms")
    values = [v for p in PHASES if is_finite(v := a.get(f"{p}_ms"))]
    if not is_finite(step) or step <= 0 or len(values) < len(PHASES):
        return None
    return sum(values) / step


def judged(a: dict) -> dict:
    """`a` with its bound, shares, sentence and phase-sum ratio (re-derived on every read)."""
    bound, shares = classify(a)
    return {**a, "bound": bound, "shares": shares, "sentence": sentence(a, bound, shares),
            "phase_sum_ratio": phase_sum_ratio(a)}
