"""Is one run's throughput a number to trust? The verdict `stable` / `noisy`, with the reason in words.

The rules (documented in docs/architecture.md, "Stability"):
- spread = IQR of the window throughputs / their median; above SPREAD_LIMIT (10 %, pyperf's warning level for
  a standard deviation) the run is noisy, said as everywhere as ± half the IQR over the median (beyond ±5 %);
- fewer than MIN_WINDOWS measurement windows: noisy (too few for a spread at all);
- other programs used at least HOST_BUSY_PERCENT of the machine's CPU during the measured phase, the Mac was
  thermally throttled or in Low Power Mode: noisy, whatever the spread (the number is not this machine's
  normal speed);
- running on battery is named as a possible cause of a noisy run, never a cause by itself.

Steady state (`settled_from`): a stretch of windows drifts when they rise or fall beyond chance (Mann-Kendall's
trend test, 99 %) and the median of its last third differs from that of its first third by more than DRIFT; a run's
windows are steady from the first window whose stretch to the end (at least STEADY_WINDOWS) does not drift. A scaling measures each
number of GPUs from there, or says the run was too short to tell (analysis/scaling.py).
"""

from __future__ import annotations

import re

from ..basics.formatting import fmt_beyond, fmt_spread, is_finite
from ..basics.summary_fields import RunSummary

# the thermal states host.thermal_state writes; anything else in a file is not a measurement and is ignored
THERMAL_STATES = re.compile(r"nominal|throttled \(CPU speed limit \d{1,2} %\)|(thermal|performance) warning level \d{1,3}"
                            r"|thermal state (fair|serious|critical)")

SPREAD_LIMIT = 0.10
MIN_WINDOWS = 5
HOST_BUSY_PERCENT = 15.0


def spread(summary: RunSummary) -> float | None:
    """IQR / median of the window throughputs; None when unknown."""
    med, iqr = summary.samples_per_s, summary.samples_per_s_iqr
    if not is_finite(med) or not is_finite(iqr) or med <= 0:
        return None
    return iqr / med


def host_causes(env: dict) -> list[str]:
    """Measured host conditions that make a run's number unrepresentative, as phrases."""
    causes = []
    load: dict = env["host_load"] if isinstance(env.get("host_load"), dict) else {}
    other = load.get("other_cpu_percent")
    if is_finite(other) and HOST_BUSY_PERCENT <= other <= 100:  # a share of the machine: never above 100 %
        causes.append(f"other programs used {other:.0f} % of the CPU during the run")
    host: dict = env["host"] if isinstance(env.get("host"), dict) else {}
    thermal = host.get("thermal")
    # NSProcessInfo's "fair" is "slightly elevated" (Apple's documentation): no throttling yet, not a disturbance
    if isinstance(thermal, str) and THERMAL_STATES.fullmatch(thermal) and thermal not in ("nominal",
                                                                                          "thermal state fair"):
        causes.append(f"the Mac was {thermal}" if thermal.startswith("throttled") else
                      f"the Mac reported its {thermal.replace('state ', 'state as ')}" if thermal.startswith(
                          "thermal state") else f"the Mac reported a {thermal}")
    if host.get("low_power_mode") is True:
        causes.append("Low Power Mode was on")
    return causes


def assess(summary: RunSummary, env: dict) -> tuple[str | None, str | None]:
    """(verdict, reason): ("stable", None), ("noisy", "phrase; phrase"), or (None, None) with no windows."""
    windows = summary.windows or 0
    if not windows:
        return None, None
    reasons = []
    if windows < MIN_WINDOWS:
        reasons.append(f"only {windows} measurement window{'s' if windows != 1 else ''} "
                       f"(at least {MIN_WINDOWS} are needed for a spread): run more steps")
    s = spread(summary)
    if s is not None and s > SPREAD_LIMIT:
        reasons.append(f"throughput spread {fmt_beyond(s / 2, SPREAD_LIMIT / 2)} between windows (half the IQR over the median), "
                       f"beyond the {fmt_spread(SPREAD_LIMIT / 2)} limit")
    causes = host_causes(env)
    reasons += causes
    if not reasons:
        return "stable", None
    host: dict = env["host"] if isinstance(env.get("host"), dict) else {}
    if host.get("on_battery") is True:
        reasons.append("it ran on battery")
    if s is not None and s > SPREAD_LIMIT and not causes:
        reasons.append("consider re-running on a quiet machine")
    return "noisy", "; ".join(reasons)


DRIFT = 0.03  # the last third of a stretch over its first, beyond this and with a trend: not steady
STEADY_WINDOWS = 8  # the shortest stretch a steady throughput is measured on
TREND_Z = 2.58  # Mann-Kendall's statistic beyond this: the windows rise or fall (99 %, two-sided; at 95 % one level
# run in 13 had its first windows called unsteady)
TREND_POINTS = 400  # a longer stretch is tested on the medians of this many blocks of it


def drift(rates: list[float], seed: int = 0) -> tuple[float, float, float] | None:
    """(ratio, low, high): the median of the last third of `rates` over that of the first third, with its 95 %
    bootstrap interval; None with fewer than STEADY_WINDOWS windows."""
    import statistics

    from .compare import bootstrap_ratio

    if len(rates) < STEADY_WINDOWS:
        return None
    third = len(rates) // 3
    first, last = rates[:third], rates[-third:]
    base = statistics.median(first)
    interval = bootstrap_ratio(last, first, seed)
    if not base > 0 or interval is None:
        return None
    return statistics.median(last) / base, interval[0], interval[1]


def trend_z(rates: list[float]) -> float:
    """Mann-Kendall's trend statistic of the windows in order (positive: rising); 0 for fewer than 3."""
    import numpy as np

    x = np.asarray(rates, dtype=float)
    if len(x) > TREND_POINTS:  # the medians of consecutive blocks: the order is what is tested
        x = np.array([np.median(b) for b in np.array_split(x, TREND_POINTS)])
    n = len(x)
    if n < 3:
        return 0.0
    signs = np.sign(x[None, :] - x[:, None])
    s = float(np.triu(signs, 1).sum())
    var = n * (n - 1) * (2 * n + 5) / 18
    return 0.0 if s == 0 else (s - np.sign(s)) / var ** 0.5


def drifting(rates: list[float], seed: int = 0) -> bool:
    """The windows rise or fall: a trend beyond chance (Mann-Kendall) and their last third off their first by more
    than DRIFT."""
    found = drift(rates, seed)
    return found is not None and abs(found[0] - 1) > DRIFT and abs(trend_z(rates)) > TREND_Z


def settled_from(rates: list[float], seed: int = 0) -> int | None:
    """The first window from which the rest is steady (0: the whole run), None when no stretch of STEADY_WINDOWS
    or more to the end is (the run ended before its throughput settled)."""
    stride = max(1, len(rates) // 40)  # at most ~40 stretches tried, however long the run
    for start in range(0, len(rates) - STEADY_WINDOWS + 1, stride):
        if not drifting(rates[start:], seed):
            return start
    return None
