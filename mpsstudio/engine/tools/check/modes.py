"""One mode or two: the timings of one shape across fresh processes (timing.py), read as a distribution. No torch.

Sorted, the largest step between neighbours splits them in two when it is a real gap: at least MODE_GAP (a 25 %
jump) and more than twice the spread within either side (both in ratios), with at least MIN_MODE processes on each
side (one slow process is more often a busy moment of the machine than a kernel chosen per process).
Each mode is said with its count and its range (the fastest and the slowest process in it): with a few processes a
range is the honest interval. Fewer than MIN_PROCESSES: "too few processes to tell".
"""

from __future__ import annotations

import math
import statistics

MODE_GAP = 1.25
MIN_PROCESSES = 3
MIN_MODE = 2


def split(values: list[float]) -> list[list[float]]:
    """The values as one mode or two (each sorted); [] for none."""
    xs = sorted(v for v in values if math.isfinite(v) and v > 0)
    if len(xs) < 2 * MIN_MODE:
        return [xs] if xs else []
    steps = [xs[i + 1] / xs[i] for i in range(MIN_MODE - 1, len(xs) - MIN_MODE)]  # gaps leaving MIN_MODE a side
    at = MIN_MODE - 1 + max(range(len(steps)), key=steps.__getitem__)
    step = xs[at + 1] / xs[at]
    low, high = xs[:at + 1], xs[at + 1:]
    within = max(low[-1] / low[0], high[-1] / high[0])
    if step >= MODE_GAP and math.log(step) > 2 * math.log(within):
        return [low, high]
    return [xs]


def mode_record(values: list[float]) -> dict:
    return {"count": len(values), "median_ms": statistics.median(values), "low_ms": values[0], "high_ms": values[-1]}


def distribution(device: str, shape: str, values: list[float]) -> dict:
    """One shape's timings across processes: its modes and the sentence saying them."""
    modes = split(values)
    row = {"device": device, "shape": shape, "ms": list(values), "modes": [mode_record(m) for m in modes]}
    row["sentence"] = distribution_sentence(row)
    return row


def _n(value: float) -> str:
    return f"{value:,.2f}" if value < 100 else f"{value:,.0f}"


def _mode(m: dict) -> str:
    """"12.10 ms [11.80-12.30]": the median process and the range of the mode."""
    return f"{_n(m['median_ms'])} ms [{_n(m['low_ms'])}-{_n(m['high_ms'])}]"


def distribution_sentence(row: dict) -> str:
    modes, n = row["modes"], len(row["ms"])
    what = f"{row['shape']} on {row['device']}"
    if n < MIN_PROCESSES:
        return f"{what}: {n} process{'es' if n != 1 else ''}, too few to tell one mode from two."
    if len(modes) == 1:
        return f"{what}: one mode over {n} fresh processes, {_mode(modes[0])}."
    fast, slow = modes
    ratio = slow["median_ms"] / fast["median_ms"]
    return (f"{what}: two modes: {slow['count']} of {n} fresh processes ran it {ratio:.1f}x slower ({_mode(slow)} vs "
            f"{_mode(fast)}): a kernel chosen per process, pytorch#182815's shape.")
