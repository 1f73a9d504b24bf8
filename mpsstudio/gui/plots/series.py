"""Growing numpy buffers for live plots, and the smoothed (EMA) loss: no Qt, no torch."""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np


class GrowingSeries:
    """An (x, y) series in preallocated float64 buffers that double when full (amortised O(1) appends)."""

    def __init__(self, capacity: int = 1024) -> None:
        self._x = np.empty(max(1, capacity), dtype=np.float64)
        self._y = np.empty(max(1, capacity), dtype=np.float64)
        self._n = 0

    def append(self, x: float | Sequence[float] | np.ndarray, y: float | Sequence[float] | np.ndarray) -> None:
        """Append matching x and y values (arrays, lists or scalars)."""
        xs = np.atleast_1d(np.asarray(x, dtype=np.float64))
        ys = np.atleast_1d(np.asarray(y, dtype=np.float64))
        if xs.shape != ys.shape or xs.ndim != 1:
            raise ValueError(f"x and y must be 1-D and of equal length, got {xs.shape} and {ys.shape}")
        end = self._n + len(xs)
        if end > len(self._x):
            capacity = len(self._x)
            while capacity < end:
                capacity *= 2
            self._x = _resized(self._x, self._n, capacity)
            self._y = _resized(self._y, self._n, capacity)
        self._x[self._n:end] = xs
        self._y[self._n:end] = ys
        self._n = end

    @property
    def x(self) -> np.ndarray:
        """The filled part of the x buffer (a view, not a copy)."""
        return self._x[: self._n]

    @property
    def y(self) -> np.ndarray:
        """The filled part of the y buffer (a view, not a copy)."""
        return self._y[: self._n]

    @property
    def capacity(self) -> int:
        return len(self._x)

    def last_y(self) -> float | None:
        return float(self._y[self._n - 1]) if self._n else None

    def __len__(self) -> int:
        return self._n


def _resized(buffer: np.ndarray, filled: int, capacity: int) -> np.ndarray:
    grown = np.empty(capacity, dtype=buffer.dtype)
    grown[:filled] = buffer[:filled]
    return grown


def ema(values: np.ndarray, previous: float | None, alpha: float) -> np.ndarray:
    """Exponential moving average continuing from `previous`; non-finite losses (NaN) are skipped."""
    out = np.empty(len(values), dtype=np.float64)
    ema = previous
    for i, v in enumerate(values.tolist()):
        if math.isfinite(v):
            ema = v if ema is None else ema + alpha * (v - ema)
        out[i] = math.nan if ema is None else ema
    return out
