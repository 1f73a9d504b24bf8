"""One mode or two: the timings of one shape across fresh processes (timing.py), read as a distribution
(analysis/repeat.split: a gap of MODE_GAP and MIN_MODE processes a side). No torch.

Each mode is said with its count and its range (the fastest and the slowest process in it): with a few processes a
range is the honest interval. Fewer than MIN_PROCESSES: "too few processes to tell".
"""

from __future__ import annotations

import statistics

from ...analysis.repeat import MIN_MODE, MIN_PROCESSES, MODE_GAP, split

__all__ = ["MIN_MODE", "MIN_PROCESSES", "MODE_GAP", "distribution", "distribution_sentence", "mode_record", "split"]


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
