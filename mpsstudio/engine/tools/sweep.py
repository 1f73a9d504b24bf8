"""`mpsstudio sweep`: throughput against batch size on each device, where the accelerator starts to win.

Each point (a device at a batch size) is a short run with the measurement rules of every run (warm-up timed
apart, synchronized windows, median and IQR of the window throughputs), in its own process. Points run batch
size by batch size, the devices in turn at each, so a machine that warms up or slows down over the sweep
affects every device alike. A device whose point fails (out of memory, a batch larger than the dataset) is not
run at larger batch sizes. The default batch sizes are the powers of two from 1 to `DEFAULT_MAX` (and at most
the training set), stopping per device at the first that does not fit.

The crossover of an accelerator is the smallest batch size from which it is faster than this machine's CPU at
every larger batch size measured, "faster" meaning the 95 % bootstrap interval of the ratio of the two median
throughputs lies above 1 (compare.bootstrap_ratio), so noise is not read as a win.
"""

from __future__ import annotations

import zlib
from collections.abc import Callable, Sequence
from dataclasses import replace

from ..analysis.compare import bootstrap_ratio, run_rates
from ..basics.config import MAX_BATCH, RunConfig, precision_note
from ..basics.errors import UserError
from ..basics.formatting import fmt_ratio, is_finite, whole_numbers
from ..basics.results import RunResult

DEFAULT_MAX = 512
DEFAULT_STEPS = 24  # measured steps per point: at least 8 windows each (the run loop's rule), a few seconds
DEFAULT_WARMUP = 3
MAX_POINTS = 64


def parse_batch_sizes(text: str | None) -> list[int] | None:
    """"1,2,4,8" -> [1, 2, 4, 8] (sorted, unique); None for the default; UserError for anything else."""
    if text is None:
        return None
    sizes = sorted(set(whole_numbers(text, 1, MAX_BATCH, f"Batch sizes must be whole numbers from 1 to "
                                                         f"{MAX_BATCH:,} separated by commas, e.g. 1,2,4,8")))
    if len(sizes) > MAX_POINTS:
        raise UserError(f"Give at most {MAX_POINTS} batch sizes; {len(sizes)} were given.")
    return sizes


def default_batch_sizes(limit: int = DEFAULT_MAX) -> list[int]:
    out, b = [], 1
    while b <= limit:
        out.append(b)
        b *= 2
    return out


def point_config(config: RunConfig, device: str, batch_size: int, steps: int, warmup: int) -> RunConfig:
    """The run of one point: the user's config at this device and batch size, `steps` measured steps."""
    return replace(config, device=device, batch_size=batch_size, steps=steps, epochs=None, warmup_steps=warmup,
                   options=dict(config.options))


def run(config: RunConfig, devices: Sequence[str], batch_sizes: Sequence[int] | None, *,
        run_point: Callable[[RunConfig], RunResult | None], steps: int = DEFAULT_STEPS,
        warmup: int = DEFAULT_WARMUP, should_stop: Callable[[], bool] | None = None,
        on_point: Callable[[RunResult, int, int], None] | None = None) -> list[RunResult]:
    """Run every point (see the module docstring); returns the runs, in the order they ran.

    `run_point(cfg)` runs one point (process.run_point in the front ends) and returns its result (a point
    refused before it started is a failed run with the sentence), or None to leave the point out."""
    stop = should_stop or (lambda: False)
    sizes = list(batch_sizes) if batch_sizes else default_batch_sizes()
    done: list[RunResult] = []
    out_of_room: set[str] = set()
    total = len(sizes) * len(devices)
    for b in sizes:
        for d in devices:
            if stop():
                return done
            if d in out_of_room:
                continue
            result = run_point(point_config(config, d, b, steps, warmup))
            if result is None:
                continue
            done.append(result)
            if on_point is not None:
                on_point(result, len(done), total)
            if result.status == "failed":
                out_of_room.add(d)
            if result.status == "cancelled":
                return done
    return done


def _point(r: RunResult) -> dict:
    s = r.summary
    return {"device": r.config.device, "batch_size": r.config.batch_size,
            "samples_per_s": s.samples_per_s, "samples_per_s_iqr": s.samples_per_s_iqr,
            "step_ms": s.step_ms, "status": r.status, "stability": s.stability,
            "error": r.error or None, "run_id": r.id}


def _usable(r: RunResult) -> bool:
    sps = r.summary.samples_per_s
    return r.status == "finished" and is_finite(sps) and sps > 0


def _seed(*ids: str) -> int:
    return zlib.crc32("|".join(ids).encode())


def analyse(results: Sequence[RunResult], config: RunConfig | None = None, steps: int = DEFAULT_STEPS) -> dict:
    """The sweep's JSON: points, best batch per device, the crossover of each accelerator against the CPU, and
    the config and environment it ran with (the first point's)."""
    points = [_point(r) for r in results]
    by_device: dict[str, dict[int, RunResult]] = {}
    for r in results:
        if _usable(r):
            by_device.setdefault(r.config.device, {})[r.config.batch] = r
    best = {d: max(runs.values(), key=lambda r: r.summary.rate).config.batch_size
            for d, runs in by_device.items()}
    crossovers = [c for d in by_device if d != "cpu" for c in [_crossover(d, by_device)] if c is not None]
    envs = [r.env for r in results if r.env]
    result = {"tool": "sweep", "points": points, "best": best,
              "crossover": crossovers[0] if crossovers else None, "crossovers": crossovers,
              "steps": steps, "config": (config or (results[0].config if results else RunConfig())).to_dict(),
              "env": envs[0] if envs else {},
              "notes": sorted({precision_note(r.config) for r in results} - {""})}
    result["sentence"] = sentence(result)
    return result


def _crossover(device: str, by_device: dict[str, dict[int, RunResult]]) -> dict | None:
    cpu, acc = by_device.get("cpu", {}), by_device[device]
    common = sorted(set(cpu) & set(acc))
    if not common:
        return None
    ratios = []
    for b in common:
        a, c = acc[b], cpu[b]
        ratio = a.summary.rate / c.summary.rate
        interval = bootstrap_ratio(run_rates(a), run_rates(c),
                                   seed=_seed(a.id, c.id))
        faster = interval[0] > 1.0 if interval else ratio > 1.0
        ratios.append({"batch_size": b, "speedup": ratio, "low": interval[0] if interval else None,
                       "high": interval[1] if interval else None, "faster": faster})
    start = None
    for item in reversed(ratios):  # the longest run of "faster" reaching the largest common batch
        if not item["faster"]:
            break
        start = item["batch_size"]
    last = ratios[-1]
    return {"device": device, "baseline": "cpu", "batch_size": start, "largest_batch": last["batch_size"],
            "speedup_at_largest": last["speedup"], "ratios": ratios,
            "faster_everywhere": start == common[0], "never_faster": start is None}


def sentence(result: dict) -> str:
    parts = []
    for c in result.get("crossovers") or []:
        d, at = c["device"], c["largest_batch"]
        x = fmt_ratio(c["speedup_at_largest"])
        if c["never_faster"]:
            parts.append(f"{d} is not clearly faster than the cpu at the largest batch measured ({at}: {x}x); "
                         f"at small batches each operation's launch cost outweighs its work.")
        elif c["faster_everywhere"]:
            parts.append(f"{d} is faster than the cpu at every batch size measured, from {c['batch_size']} on; at "
                         f"batch {at} it is {x}x.")
        else:
            parts.append(f"{d} is faster than the cpu from batch {c['batch_size']} on; at batch {at} it is {x}x.")
    best = result.get("best") or {}
    if best:
        parts.append("Best throughput: " + ", ".join(_best_words(d, b, result.get("points") or [])
                                                    for d, b in best.items()) + ".")
    if not parts:
        return "No point of the sweep finished, so there is nothing to compare."
    return " ".join(parts + list(result.get("notes") or []))


def separated(a: dict, b: dict, key: str = "samples_per_s", iqr: str = "samples_per_s_iqr") -> bool:
    """Whether two measurements' middle halves (median ± half the IQR: the one ± rule) do not overlap; unknown
    spreads count as overlapping (nothing is "best" on a guess)."""
    if not all(is_finite(v) for v in (a.get(key), a.get(iqr), b.get(key), b.get(iqr))):
        return False
    (lo, hi) = sorted((a, b), key=lambda p: p[key])
    return lo[key] + lo[iqr] / 2 < hi[key] - hi[iqr] / 2


def _best_words(device: str, batch: int, points: list[dict]) -> str:
    """"cpu at batch 64", or "cpu: no clear best between batch 32 and 64" when the runner-up's middle half overlaps
    the best's."""
    mine = sorted((p for p in points if p.get("device") == device and p.get("status") == "finished"
                   and is_finite(p.get("samples_per_s"))), key=lambda p: p["samples_per_s"], reverse=True)
    if len(mine) < 2 or mine[0]["batch_size"] != batch or separated(mine[0], mine[1]):
        return f"{device} at batch {batch}"
    close = sorted(p["batch_size"] for p in mine[1:] if not separated(mine[0], p))
    return (f"{device}: no clear best between batch {batch} and {', '.join(str(b) for b in close)} (their middle "
            "halves overlap)")
