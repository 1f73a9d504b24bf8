"""Does a run's memory grow, and whose: the tensors PyTorch holds, the driver's (MPS) or the caching allocator's
reserve (CUDA), or the process's? From the memory each measurement window recorded (run/windows.py); no torch.

Each line gets a least-squares slope over the run's steps, given per 100 steps with its 95 % interval (Student's t
over the windows' scatter about the line). The first quarter of the windows is left out: allocator caches fill
there, and a run that settles is not a leak. A line is flagged as growing when its interval lies above zero and it
grew by at least GROWTH_MIN_BYTES and GROWTH_MIN_SHARE of its level over the windows fitted. The driver or reserve
growing while the tensors do not is the pattern of PyTorch #181485 (a Metal cache per input shape): the hint then
names the count of distinct input shapes the run fed its model.
"""

from __future__ import annotations

import math
import statistics

from ..basics.formatting import fmt_bytes, plural
from ..basics.results import WindowRow

LINES = ("memory", "memory_driver", "memory_process")
MIN_WINDOWS = 6  # fitted windows needed to say anything
GROWTH_MIN_BYTES = 8 * 1024**2
GROWTH_MIN_SHARE = 0.05
# Student's t, 97.5th percentile, by degrees of freedom (1-30); beyond, the normal's 1.96 is within 4 %
_T975 = (12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179, 2.160, 2.145, 2.131,
         2.120, 2.110, 2.101, 2.093, 2.086, 2.080, 2.074, 2.069, 2.064, 2.060, 2.056, 2.052, 2.048, 2.045, 2.042)


def t975(df: int) -> float:
    return _T975[df - 1] if 1 <= df <= len(_T975) else 1.96


def slope(xs: list[float], ys: list[float]) -> tuple[float, float, float] | None:
    """(slope, low, high) of the least-squares line through the points, with its 95 % interval; None under 3."""
    n = len(xs)
    if n < 3:
        return None
    mx, my = statistics.fmean(xs), statistics.fmean(ys)
    sxx = sum((x - mx) ** 2 for x in xs)
    if sxx <= 0:
        return None
    b = sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / sxx
    a = my - b * mx
    ssr = sum((y - (a + b * x)) ** 2 for x, y in zip(xs, ys))
    half = t975(n - 2) * math.sqrt(ssr / (n - 2) / sxx)
    return b, b - half, b + half


def growth(windows: list[WindowRow]) -> dict[str, dict]:
    """Per line: bytes per 100 steps with its interval, the windows fitted, the bytes grown over them and whether it
    counts as growing. Lines a run did not record are left out."""
    out: dict[str, dict] = {}
    usable = [w for w in windows if w.steps is not None and w.first_step is not None]
    fitted = usable[len(usable) // 4:]
    for line in LINES:
        points = [(w.first_step + w.steps - 1, value) for w in fitted  # type: ignore[operator]  # (both set)
                  if isinstance(value := getattr(w, line), (int, float)) and not isinstance(value, bool)
                  and math.isfinite(value)]
        if len(points) < MIN_WINDOWS:
            continue
        xs, ys = [float(x) for x, _ in points], [float(y) for _, y in points]
        fit = slope(xs, ys)
        if fit is None:
            continue
        b, low, high = fit
        grown = b * (xs[-1] - xs[0])
        level = max(abs(ys[0]), 1.0)
        out[line] = {"per_100_steps": 100 * b, "low": 100 * low, "high": 100 * high, "windows": len(points),
                     "grown": grown, "growing": low > 0 and grown >= GROWTH_MIN_BYTES
                     and grown >= GROWTH_MIN_SHARE * level}
    return out


def _signed(v: float) -> str:
    return ("-" if v < 0 else "") + (fmt_bytes(abs(v)) if abs(v) >= 1 else "0 B")


def _rate(g: dict | None) -> str:
    if g is None:
        return "?"
    return f"{_signed(g['per_100_steps'])} per 100 steps ({_signed(g['low'])} to {_signed(g['high'])}, 95 % interval)"


def flag(lines: dict[str, dict], kind: str, shapes: int | None) -> str | None:
    """One sentence when memory grows: whose, how fast, the likely cause and the fix; None when nothing grows."""
    tensors, driver, process = (lines.get(k) for k in LINES)
    grows = {k: bool(v and v["growing"]) for k, v in lines.items()}
    seen = f" (this run fed its model {plural(shapes, 'distinct input shape')})" if shapes else ""
    if grows.get("memory_driver") and not grows.get("memory"):
        if kind == "mps":
            cause = ("MPS keeps compiled graphs and buffers per input shape; pad or bucket inputs to a few fixed shapes, "
                     "or call torch.mps.empty_cache() every few hundred steps" if shapes and shapes > 1 else
                     "the driver keeps freed buffers cached; call torch.mps.empty_cache() every few hundred steps, or "
                     "lower PYTORCH_MPS_HIGH_WATERMARK_RATIO to cap it")
            return (f"The Metal driver's memory grew {_rate(driver)} while the tensors PyTorch holds stayed flat"
                    f"{seen}: {cause}.")
        cause = ("varying shapes fragment it; fixed or bucketed shapes, or PYTORCH_CUDA_ALLOC_CONF="
                 "expandable_segments:True, would help" if shapes and shapes > 1 else
                 "torch.cuda.empty_cache() returns it; PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True limits "
                 "fragmentation")
        return (f"The CUDA caching allocator's reserve grew {_rate(driver)} while the tensors PyTorch holds stayed "
                f"flat{seen}: {cause}.")
    if grows.get("memory"):
        whose = "The run process's memory" if kind == "cpu" else "The tensors PyTorch holds"
        return (f"{whose} grew {_rate(tensors)}{seen}: something keeps tensors alive from step to step (a list of "
                "losses or outputs kept with their graph: keep loss.item() values once in a while, or .detach() "
                "them); a smaller batch only delays running out.")
    if grows.get("memory_process") and kind != "cpu":
        return (f"The run process's memory grew {_rate(process)} while the device's stayed flat{seen}: objects "
                "accumulate on the host (Python lists, kept batches or outputs copied to the CPU).")
    return None


def summary_fields(windows: list[WindowRow], kind: str, shapes: int | None) -> dict:
    """memory_growth, memory_flag and input_shapes for a run's summary (re-derived whenever a run is read back)."""
    lines = growth(windows)
    return {"memory_growth": lines, "memory_flag": flag(lines, kind, shapes), "input_shapes": shapes}
