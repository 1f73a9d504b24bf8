"""The interval of a median over rounds (or processes), the same rule wherever rounds decide something. No torch.

Distribution-free: the 95 % interval of the median from order statistics. Sorted, the k-th value from each end,
where k is the largest whose coverage, 1 - 2 P(Binomial(n, 1/2) <= k - 1), is still at least 95 %. With up to 8
values that is the range (k = 1: with 6 values it covers 96.9 %, with 8 the second from each end only 93.0 %); from
9 values on one value at each end falls outside (9: 96.1 %), from 12 two. So a few rounds give the honest range, and
more rounds can narrow an interval that one outlying round widened, never by dropping a round because it looks odd.
With 1 to 5 values the range covers less than 95 % (5: 93.8 %): it is the whole of what was measured, said as a range.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence

CONFIDENCE = 0.95


def order_rank(n: int, confidence: float = CONFIDENCE) -> int:
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
