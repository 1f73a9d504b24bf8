"""One mode or two: figures of one thing measured in separate processes (a device check's products, a repeat's or a
regression check's runs), read as a distribution. No torch.

Sorted, the largest step between neighbours splits them in two when it is a real gap: at least MODE_GAP (a 25 %
jump) and more than twice the spread within either side (both in ratios), with at least MIN_MODE values on each
side (one slow process is more often a busy moment of the machine than a kernel chosen per process). Fewer than
MIN_PROCESSES values cannot tell one mode from two.
"""

from __future__ import annotations

import math
import statistics

from ..basics.formatting import fmt_rate

MODE_GAP = 1.25
MIN_PROCESSES = 3
MIN_MODE = 2


def split(values: list[float]) -> list[list[float]]:
    """The values as one mode or two (each sorted, the lower first); [] for none."""
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


def slow_mode(rates: list[float], what: str) -> str:
    """"" when throughputs (samples/s, one a process) fall in one mode; else the sentence saying the two: "the 6
    runs on mps fell in two modes: 2 of 6 at 0.62x the others' samples/s (1,234 [1,200-1,250] vs 2,000
    [1,980-2,020]); the interval spans both"."""
    found = split(rates)
    if len(found) != 2:
        return ""
    slow, fast = found
    n = len(slow) + len(fast)

    def said(xs: list[float]) -> str:
        return f"{fmt_rate(statistics.median(xs))} [{fmt_rate(xs[0])}-{fmt_rate(xs[-1])}]"
    ratio = statistics.median(slow) / statistics.median(fast)
    return (f"the {n} {what} fell in two modes: {len(slow)} of {n} at {ratio:.2f}x the others' samples/s "
            f"({said(slow)} vs {said(fast)}), as a kernel or placement chosen per process does; the interval spans "
            "both")
