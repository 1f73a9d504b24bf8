"""Numbers for humans, shared by the window and the CLI (no Qt, no torch)."""

from __future__ import annotations

import math

DASH = "\u2014"


def is_finite(v) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


def fmt_rate(v, dash: str = DASH) -> str:
    """Samples per second: thousands separators, one decimal below 100."""
    if not is_finite(v):
        return dash
    return f"{v:,.0f}" if abs(v) >= 100 else f"{v:,.1f}"


def fmt_bytes(v, dash: str = DASH) -> str:
    """1.2 GiB, 312 MiB, 40.5 KiB."""
    if not is_finite(v) or v <= 0:
        return dash
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if v < 1024 or unit == "TiB":
            return f"{v:.0f} {unit}" if unit == "B" or v >= 100 else f"{v:.1f} {unit}"
        v /= 1024
    return dash


def plural(n: int, noun: str) -> str:
    """E.g. "1 image" or "3 images"."""
    return f"{n:,} {noun}{'' if n == 1 else 's'}"
