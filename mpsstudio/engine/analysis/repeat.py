"""Repeated measurement, between rounds or processes (no torch): the order of a repeat's runs; the interval of a
median over rounds, the same rule wherever rounds decide something; and one mode or two.

Repeated comparisons: the devices run interleaved, A B B A A B ..., so slow drift and heat affect both sides (the
pairing benchmarks/overhead.py uses). compare.py pairs each round's runs.

The interval of a median over rounds (median_interval), distribution-free: the 95 % interval of the median from
order statistics. Sorted, the k-th value from each end, where k is the largest whose coverage, 1 - 2 P(Binomial(n,
1/2) <= k - 1), is still at least 95 %. With up to 8 values that is the range (k = 1: with 6 values it covers
96.9 %, with 8 the second from each end only 93.0 %); from 9 values on one value at each end falls outside (9:
96.1 %), from 12 two. So a few rounds give the honest range, and more rounds can narrow an interval that one
outlying round widened, never by dropping a round because it looks odd. With 1 to 5 values the range covers less
than 95 % (5: 93.8 %): it is the whole of what was measured, said as a range.

One mode or two (split): figures of one thing measured in separate processes (a device check's products, a
repeat's or a regression check's runs), read as a distribution. Sorted, the largest step between neighbours splits
them in two when it is a real gap: at least MODE_GAP (a 25 % jump) and more than twice the spread within either
side (both in ratios), with at least MIN_MODE values on each side (one slow process is more often a busy moment of
the machine than a kernel chosen per process). Fewer than MIN_PROCESSES values cannot tell one mode from two.
"""

from __future__ import annotations

import math
import statistics
import uuid
from collections.abc import Sequence

from ..basics.config import RunConfig
from ..basics.errors import UserError
from ..basics.formatting import fmt_rate, one_line

MAX_ROUNDS = 100


def interleave(configs: Sequence[RunConfig], rounds: int) -> tuple[list[RunConfig], list[dict | None]]:
    """The configs in run order for `rounds` rounds (odd rounds as given, even rounds reversed), and the
    env["repeat"] tag of each run. One round is a plain comparison: no tags."""
    if isinstance(rounds, bool) or not isinstance(rounds, int) or not 1 <= rounds <= MAX_ROUNDS:
        raise UserError(f"The number of repeats must be a whole number from 1 to {MAX_ROUNDS}, "
                        f"not {one_line(repr(rounds), 40)}.")
    if rounds == 1:
        return list(configs), [None] * len(configs)
    set_id = uuid.uuid4().hex[:12]
    order: list[RunConfig] = []
    tags: list[dict | None] = []
    for k in range(1, rounds + 1):
        for cfg in (configs if k % 2 else list(reversed(configs))):
            order.append(cfg)
            tags.append({"set": set_id, "round": k, "rounds": rounds})
    return order, tags


ROUNDS_CONFIDENCE = 0.95


def order_rank(n: int, confidence: float = ROUNDS_CONFIDENCE) -> int:
    """k (1-based): the k-th smallest and the k-th largest of n values bound the median at `confidence`; 1 (the
    range) when no narrower pair reaches it."""
    k = 1
    below = 1.0 / 2 ** n  # P(Binomial(n, 1/2) <= k - 1) for k = 1
    while 2 * k < n:
        below_next = below + math.comb(n, k) / 2 ** n  # P(B <= k)
        if 1 - 2 * below_next < confidence:
            break
        k, below = k + 1, below_next
    return k


def median_interval(values: Sequence[float]) -> tuple[float, float, float] | None:
    """(median, low, high) of the values; None for none."""
    xs = sorted(values)
    if not xs:
        return None
    k = order_rank(len(xs))
    return statistics.median(xs), xs[k - 1], xs[-k]


def how_said(n: int) -> str:
    """What the interval of n rounds is, in words: "range over 5 rounds", "95 % interval of the median of 9 rounds"."""
    if order_rank(n) == 1:
        return f"range over {n} rounds"
    return f"95 % interval of the median of {n} rounds"


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
