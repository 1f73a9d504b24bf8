"""Is one run's throughput a number to trust? The verdict `stable` / `noisy`, with the reason in words.

The rules (documented in docs/architecture.md, "Stability"):
- spread = IQR of the window throughputs / their median; above SPREAD_LIMIT (10 %, pyperf's warning level for
  a standard deviation) the run is noisy, said as everywhere as ± half the IQR over the median (beyond ±5 %);
- fewer than MIN_WINDOWS measurement windows: noisy (too few for a spread at all);
- other programs used at least HOST_BUSY_PERCENT of the machine's CPU during the measured phase, the Mac was
  thermally throttled or in Low Power Mode: noisy, whatever the spread (the number is not this machine's
  normal speed);
- running on battery is named as a possible cause of a noisy run, never a cause by itself.
"""

from __future__ import annotations

import re

from ..basics.formatting import fmt_spread, is_finite

# the thermal states host.thermal_state writes; anything else in a file is not a measurement and is ignored
THERMAL_STATES = re.compile(r"nominal|throttled \(CPU speed limit \d{1,2} %\)|(thermal|performance) warning level \d{1,3}"
                            r"|thermal state (fair|serious|critical)")

SPREAD_LIMIT = 0.10
MIN_WINDOWS = 5
HOST_BUSY_PERCENT = 15.0


def spread(summary: dict) -> float | None:
    """IQR / median of the window throughputs; None when unknown."""
    med, iqr = summary.get("samples_per_s"), summary.get("samples_per_s_iqr")
    if not is_finite(med) or not is_finite(iqr) or med <= 0:
        return None
    return iqr / med


def host_causes(env: dict) -> list[str]:
    """Measured host conditions that make a run's number unrepresentative, as phrases."""
    causes = []
    load = env.get("host_load") if isinstance(env.get("host_load"), dict) else {}
    other = load.get("other_cpu_percent")
    if is_finite(other) and HOST_BUSY_PERCENT <= other <= 100:  # a share of the machine: never above 100 %
        causes.append(f"other programs used {other:.0f} % of the CPU during the run")
    host = env.get("host") if isinstance(env.get("host"), dict) else {}
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


def assess(summary: dict, env: dict) -> tuple[str | None, str | None]:
    """(verdict, reason): ("stable", None), ("noisy", "phrase; phrase"), or (None, None) with no windows."""
    windows = summary.get("windows") or 0
    if not windows:
        return None, None
    reasons = []
    if windows < MIN_WINDOWS:
        reasons.append(f"only {windows} measurement window{'s' if windows != 1 else ''} "
                       f"(at least {MIN_WINDOWS} are needed for a spread): run more steps")
    s = spread(summary)
    if s is not None and s > SPREAD_LIMIT:
        reasons.append(f"throughput spread {fmt_spread(s / 2)} between windows (half the IQR over the median), "
                       f"beyond the {fmt_spread(SPREAD_LIMIT / 2)} limit")
    causes = host_causes(env)
    reasons += causes
    if not reasons:
        return "stable", None
    host = env.get("host") if isinstance(env.get("host"), dict) else {}
    if host.get("on_battery") is True:
        reasons.append("it ran on battery")
    if s is not None and s > SPREAD_LIMIT and not causes:
        reasons.append("consider re-running on a quiet machine")
    return "noisy", "; ".join(reasons)
