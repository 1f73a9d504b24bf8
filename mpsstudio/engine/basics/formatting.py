"""Numbers and messages for humans, one implementation each, shared by the engine, the CLI and the window.

No Qt and no torch here: rates, bytes (IEC units), durations, counts, plurals and one-line error text.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field, replace
from collections.abc import Sequence
from typing import TypeGuard
from datetime import datetime, timezone

DASH = "\u2014"
ELLIPSIS = "\u2026"


def is_finite(v: object) -> TypeGuard[float]:
    """A real number a float can hold (not a bool, NaN, an infinity, or an integer of hundreds of digits)."""
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        return False
    try:
        return math.isfinite(v)
    except OverflowError:  # an int too large for a float
        return False


def fmt_rate(v, dash: str = DASH) -> str:
    """Samples per second: thousands separators, one decimal below 100."""
    if not is_finite(v):
        return dash
    return f"{v:,.0f}" if abs(v) >= 100 else f"{v:,.1f}"


# How sure a measured throughput (or step time) is, said one way everywhere: the median ± half the interquartile
# range of its measurement windows, relative to the median. The table, the status bar, the CLI, the sweep, diagnose
# and the CSV's "±" column all use spread_of and fmt_spread, and this sentence explains it.
SPREAD_WORDS = ("± is half the interquartile range of the measurement windows, relative to the median: the middle "
                "half of the windows fell within the median ± it")


def spread_of(median, iqr) -> float | None:
    """Half the IQR over the median (0.04 for ±4 %); None when either is unknown."""
    if not is_finite(median) or not is_finite(iqr) or median <= 0 or iqr < 0:
        return None
    return iqr / 2 / median


def fmt_spread(share, dash: str = DASH) -> str:
    """"±4 %" for 0.04 (spread_of's share), "±<1 %" below half a percent, "±>1,000 %" beyond ten times."""
    if not is_finite(share) or share < 0:
        return dash
    if share > 10:
        return "±>1,000 %"
    percent = 100 * share
    if 0 < percent < 0.5:
        return "±<1 %"
    return f"±{max(1, round(percent)) if percent else 0:,} %"


def fmt_beyond(share: float, limit: float) -> str:
    """A spread said beside the limit it passed, never reading as the limit itself: "±5.4 %" where whole percents
    would say "±5 %" of a ±5 % limit, else as fmt_spread."""
    shown = fmt_spread(share)
    if is_finite(share) and share > limit and shown == fmt_spread(limit) and share <= 10:
        return f"±{100 * share:.1f} %"
    return shown


def fmt_bytes(v, dash: str = DASH) -> str:
    """1.2 GiB, 312 MiB, 40.5 KiB (IEC units: powers of 1024)."""
    if not is_finite(v) or v <= 0:
        return dash
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if v < 1024 or unit == "TiB":
            return f"{v:.0f} {unit}" if unit == "B" or v >= 100 else f"{v:.1f} {unit}"
        v /= 1024
    return dash


def fmt_ratio(v: float, two_decimals_below: float = 10.0) -> str:
    """A speedup or a bound of its interval, without the x: 0.95, 3.02, 48.5, 1,210. A value that would read
    1.00 without being 1 keeps a third decimal (0.996): which side of 1.0 it is on decides "no clear
    difference"."""
    if f"{v:.2f}" == "1.00" and v != 1.0:
        return f"{v:.3f}"
    return f"{v:.2f}" if v < two_decimals_below else f"{v:.1f}" if v < 100 else f"{v:,.0f}"


def fmt_err(v, dash: str = DASH) -> str:
    """A relative error: "3.2e-04", "not finite", or the dash for one not measured."""
    if v is None:
        return dash
    return f"{v:.1e}" if is_finite(v) else "not finite"


def fmt_duration(v, dash: str = DASH) -> str:
    """0.84 s, 12.3 s, 8 min 20 s, 1 h 05 min."""
    if not is_finite(v) or v < 0:
        return dash
    if v < 10:
        return f"{v:.2f} s"
    if v < 100:
        return f"{v:.1f} s"
    minutes, seconds = divmod(round(v), 60)
    if minutes < 60:
        return f"{minutes} min {seconds:02d} s"
    hours, minutes = divmod(minutes, 60)
    return f"{hours} h {minutes:02d} min"


def fmt_count(n, dash: str = DASH) -> str:
    """A count as people say it, three significant digits above a million: 831,626 / 1.71 M / 134 M / 1.20 B."""
    if not is_finite(n):
        return dash
    for scale, unit in ((1e9, "B"), (1e6, "M")):
        if abs(n) >= scale:
            v = n / scale
            return f"{v:,.2f} {unit}" if abs(v) < 10 else f"{v:,.1f} {unit}" if abs(v) < 100 else f"{v:,.0f} {unit}"
    return f"{int(n):,}"


def local_time(iso: str) -> datetime | None:
    """An ISO timestamp (UTC when it names no zone) in the local time zone; None when it is not one."""
    try:
        dt = datetime.fromisoformat(str(iso))
    except (TypeError, ValueError):
        return None
    if dt.tzinfo is None:
        dt = dt.replace(tzinfo=timezone.utc)
    try:
        return dt.astimezone()
    except OverflowError:  # year 1 at +14:00 is before the first day a datetime holds, in UTC or here
        return None


def instant(iso: str) -> float:
    """When an ISO timestamp happened, as seconds since 1970 (UTC when it names no zone; `local_time` reads it): what
    runs and results are ordered by, since their texts keep the offset they were written with ("23:00+14:00" is
    09:00 UTC, before "10:00+00:00"). -inf for a text that is not one, or no clock's (such a row sorts first)."""
    dt = local_time(iso)
    return dt.timestamp() if dt else float("-inf")


def fmt_timestamp(iso: str) -> str:
    """"2026-11-21 14:03" in local time (the text as it was when it is not a timestamp)."""
    dt = local_time(iso)
    return f"{dt:%Y-%m-%d %H:%M}" if dt else str(iso)


def plural(n: int, noun: str, nouns: str | None = None) -> str:
    """E.g. "1 image" or "3 images"; `nouns` for an irregular plural ("classes")."""
    return f"{n:,} {noun if n == 1 else nouns or noun + 's'}"


def runs_and_results(runs: int, tools: int) -> str:
    """"2 runs", "1 tool result", "2 runs and 1 tool result": what a history command moved (runs said when none
    of either)."""
    said = [plural(runs, "run")] if runs or not tools else []
    return " and ".join(said + ([plural(tools, "tool result")] if tools else []))


def printable(text) -> str:
    """`text` with control characters (terminal escape sequences, newlines, tabs) replaced by "?": a name
    from an imported file can then neither clear a terminal nor fake a table row."""
    return "".join(ch if ch.isprintable() else "?" for ch in str(text))


def one_line(text: str, limit: int = 300) -> str:
    """`text` on one line (all whitespace, newlines included, collapsed), cut to `limit` characters."""
    line = " ".join(str(text).split())
    return line if len(line) <= limit else line[: limit - 1].rstrip() + ELLIPSIS


def error_line(exc: BaseException, limit: int = 300, with_type: bool = True) -> str:
    """An exception as one line: 'ValueError: what it said' (or only what it said), cut to `limit`."""
    message = one_line(str(exc), limit)
    if not with_type:
        return message or type(exc).__name__
    return one_line(f"{type(exc).__name__}: {message}", limit) if message else type(exc).__name__


_SIZE = re.compile(r"\s*(\d+(?:\.\d+)?)\s*([kmgt]?)(i?b)?\s*", re.IGNORECASE)
_UNITS = {"": 1, "k": 1024, "m": 1024**2, "g": 1024**3, "t": 1024**4}


def whole_numbers(text: str, low: int, high: int, refusal: str) -> list[int]:
    """"8, 16,32" -> [8, 16, 32], in the order given; UserError(`refusal` + "'x' is not one.") for a part that is not
    a plain whole number from `low` to `high` ("³" is a digit to str.isdigit, not to int)."""
    from .errors import UserError

    out = []
    for part in text.split(","):
        part = part.strip()
        if not (part.isascii() and part.isdigit() and low <= int(part) <= high):
            raise UserError(f"{refusal}; {part!r} is not one.")
        out.append(int(part))
    return out


def parse_memory_size(text: str, what: str = "The memory limit") -> int:
    """"8G", "512M", "1.5 GiB", "1073741824" -> bytes (powers of 1024), from 1 MiB; UserError for anything else."""
    from .errors import UserError

    match = _SIZE.fullmatch(text or "")
    if not match:
        raise UserError(f"{what} must be a size such as 8G, 512M or 1.5GiB, not {printable(text)!r}.")
    value = float(match.group(1)) * _UNITS[match.group(2).lower()]
    if value < 1024**2 or value > 2**62:
        raise UserError(f"{what} must be between 1 MiB and 4 EiB, not {printable(text)!r}.")
    return int(value)


# One table shape for every front end: the tools' views (tools/toolview.py, tools/diagnose/view.py), a contrast's
# rows, the report's tables, the CLI's grid and the window's table widgets all pass a `Table`.
@dataclass(frozen=True)
class Table:
    """Cells as the user reads them (text with units, a dash for a value not measured), a header per column and
    whether the column is numeric (right-aligned); the legend says what the numbers are, under the table."""

    headers: list[str]
    rows: list[list[str]] = field(default_factory=list)
    numeric: list[bool] = field(default_factory=list)
    legend: str = ""

    def __post_init__(self):
        if len(self.numeric) != len(self.headers):
            raise ValueError(f"a table of {len(self.headers)} columns has {len(self.numeric)} alignments")
        for row in self.rows:
            if len(row) != len(self.headers):
                raise ValueError(f"a table of {len(self.headers)} columns has a row of {len(row)} cells")

    def with_legend(self, legend: str) -> Table:
        return replace(self, legend=legend)


@dataclass
class Chart:
    """Horizontal bars, one per label, with optional interval whiskers and a reference line (1.0 for ratios): a
    report's chart (report/svg.py draws it)."""

    labels: list[str]
    values: Sequence[float | None]
    unit: str
    lows: Sequence[float | None] = field(default_factory=list)
    highs: Sequence[float | None] = field(default_factory=list)
    reference: float | None = None
    notes: list[str] = field(default_factory=list)  # a word beside each bar ("noisy", "failed"); "" for none
