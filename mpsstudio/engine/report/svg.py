"""A part's chart as SVG: one horizontal bar per label, interval whiskers, a dashed reference line (1.0 for
ratios), the value written beside each bar. Plain SVG 1.1 with its fonts and colours inline: nothing to fetch."""

from __future__ import annotations

import math
from html import escape

from ..basics.formatting import is_finite
from . import Chart

WIDTH = 720
ROW = 30
LABEL_W = 250
VALUE_W = 150
TOP = 14
BOTTOM = 40
FONT = "-apple-system, BlinkMacSystemFont, 'Segoe UI', Helvetica, Arial, sans-serif"
BAR = "#0a84ff"
FAINT = "#9fc9ff"


def _fmt(v: float) -> str:
    if v == 0:
        return "0"
    if abs(v) >= 1e7 or abs(v) < 1e-3:
        return f"{v:.3g}"
    if abs(v) >= 100:
        return f"{v:,.0f}"
    return f"{v:.2f}" if abs(v) < 10 else f"{v:.1f}"


def _cut(text: str, limit: int = 40) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "\u2026"


def chart_svg(chart: Chart) -> str:
    """The chart as an <svg> element (fits WIDTH; the height follows the bars)."""
    n = len(chart.labels)
    values = [v if is_finite(v) and v > 0 else None for v in chart.values]
    highs = [h if is_finite(h) else None for h in (chart.highs or [None] * n)]
    lows = [lo if is_finite(lo) else None for lo in (chart.lows or [None] * n)]
    notes = chart.notes or [""] * n
    peak = max([v for v in values if v] + [h for h in highs if h] + [chart.reference or 0] + [1e-9])
    top = peak * 1.08
    plot_w = WIDTH - LABEL_W - VALUE_W
    height = TOP + n * ROW + BOTTOM

    def x(v: float) -> float:
        return LABEL_W + plot_w * max(0.0, v) / top
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{height}" '
           f'viewBox="0 0 {WIDTH} {height}" role="img" font-family="{escape(FONT)}" font-size="12">',
           f'<rect width="{WIDTH}" height="{height}" fill="#ffffff"/>']
    step = _tick_step(top)
    tick = 0.0
    while tick <= top + 1e-12:
        out.append(f'<line x1="{x(tick):.1f}" y1="{TOP - 4}" x2="{x(tick):.1f}" y2="{TOP + n * ROW}" '
                   'stroke="#e5e5ea" stroke-width="1"/>')
        out.append(f'<text x="{x(tick):.1f}" y="{TOP + n * ROW + 16}" text-anchor="middle" fill="#6e6e73">'
                   f'{escape(_fmt(tick))}</text>')
        tick += step
    for i, label in enumerate(chart.labels):
        y = TOP + i * ROW
        out.append(f'<text x="{LABEL_W - 8}" y="{y + ROW / 2 + 4:.1f}" text-anchor="end" fill="#1d1d1f">'
                   f'<title>{escape(label)}</title>{escape(_cut(label))}</text>')
        v = values[i]
        if v is None:
            out.append(f'<text x="{LABEL_W + 4}" y="{y + ROW / 2 + 4:.1f}" fill="#6e6e73">not measured</text>')
            continue
        fill = FAINT if notes[i] else BAR
        out.append(f'<rect x="{LABEL_W}" y="{y + 7}" width="{x(v) - LABEL_W:.1f}" height="{ROW - 14}" rx="3" '
                   f'fill="{fill}"/>')
        right = x(v)
        low, high = lows[i], highs[i]
        if low is not None and high is not None:
            a, b, mid = x(low), x(high), y + ROW / 2
            out.append(f'<path d="M{a:.1f} {mid:.1f}H{b:.1f}M{a:.1f} {mid - 6:.1f}V{mid + 6:.1f}'
                       f'M{b:.1f} {mid - 6:.1f}V{mid + 6:.1f}" stroke="#1d1d1f" stroke-width="1.5" fill="none"/>')
            right = max(right, b)
        words = _fmt(v) + (f" [{_fmt(low)}\u2013{_fmt(high)}]" if low is not None and high is not None else "") + (f" \u00b7 {notes[i]}" if notes[i] else "")
        out.append(f'<text x="{right + 6:.1f}" y="{y + ROW / 2 + 4:.1f}" fill="#1d1d1f">{escape(words)}</text>')
    if chart.reference is not None and chart.reference <= top:
        r = x(chart.reference)
        out.append(f'<line x1="{r:.1f}" y1="{TOP - 6}" x2="{r:.1f}" y2="{TOP + n * ROW + 2}" stroke="#3a3a3c" '
                   'stroke-width="1" stroke-dasharray="4 3"/>')
    out.append(f'<text x="{LABEL_W + plot_w / 2:.1f}" y="{height - 6}" text-anchor="middle" fill="#3a3a3c">'
               f'{escape(chart.unit)}</text>')
    out.append("</svg>")
    return "\n".join(out)


def _tick_step(top: float) -> float:
    """A round step giving 4 to 8 ticks."""
    raw = top / 5
    power = 10 ** math.floor(math.log10(raw)) if raw > 0 else 1.0
    for m in (1, 2, 2.5, 5, 10):
        if raw <= m * power:
            return m * power
    return 10 * power
