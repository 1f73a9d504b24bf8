"""The interval of a median over rounds: the order statistics whose coverage is still 95 % (analysis/repeat)."""

from __future__ import annotations

import math

from mpsstudio.engine.analysis import repeat as rounds  # the interval of a median over rounds


def coverage(n: int, k: int) -> float:
    return 1 - 2 * sum(math.comb(n, i) for i in range(k)) / 2 ** n


def test_the_rank_is_the_largest_whose_coverage_is_still_95_percent():
    for n in range(1, 80):
        k = rounds.order_rank(n)
        assert k == 1 or coverage(n, k) >= 0.95, n
        assert 2 * (k + 1) > n or coverage(n, k + 1) < 0.95, n  # one further in would cover less
    assert [rounds.order_rank(n) for n in (5, 8, 9, 11, 12, 20)] == [1, 1, 2, 2, 3, 6]  # the published table


def test_a_few_rounds_give_their_range_and_more_leave_the_outliers_out():
    assert rounds.median_interval([3.0, 1.0, 2.0]) == (2.0, 1.0, 3.0)
    nine = [1.0, 1.05, 1.04, 1.05, 0.5, 1.06, 1.05, 1.04, 1.9]
    assert rounds.median_interval(nine) == (1.05, 1.0, 1.06)  # 0.5 and 1.9 left out
    assert rounds.median_interval([]) is None
    assert rounds.how_said(8) == "range over 8 rounds"
    assert rounds.how_said(9) == "95 % interval of the median of 9 rounds"
