"""The built-in `shapes` dataset: 10 kinds of drawn shapes, generated (no download), deterministic.

Position, size, thickness, rotation, brightness, background and noise vary, so a linear model does not
solve it but a small MLP learns it in a couple of epochs.
"""

from __future__ import annotations

import math

import numpy as np
import torch

SHAPE_CLASSES = ["circle", "ring", "square", "hollow square", "triangle", "plus", "cross",
                 "horizontal bars", "vertical bars", "diagonal line"]
SHAPES_SEED = 20240607  # fixed: the shapes data never changes with the run seed
SHAPES_TRAIN, SHAPES_VAL, SHAPES_SIDE = 6000, 1000, 28


def _box(u: np.ndarray, v: np.ndarray, half_u, half_v) -> np.ndarray:
    """Signed distance (in pixels, negative inside) to an axis-aligned box."""
    return np.maximum(np.abs(u) - half_u, np.abs(v) - half_v)


def _plus(u, v, size, thick):
    return np.minimum(_box(u, v, size, thick / 2), _box(u, v, thick / 2, size))


def _bars(u, v, size, thick):
    gap = np.maximum(size * 0.75, thick + 1.5)
    bars = [_box(u, v + k * gap, size, thick / 2) for k in (-1, 0, 1)]
    return np.minimum(np.minimum(bars[0], bars[1]), bars[2])


def _rotate(u, v, angle) -> tuple[np.ndarray, np.ndarray]:
    c, s = np.cos(angle), np.sin(angle)
    return c * u + s * v, -s * u + c * v


def _shape_distance(label: int, u, v, size, thick, tilt) -> np.ndarray:
    """Signed distance to shape `label` in its own frame (u right, v down), per sample."""
    if label == 0:
        return np.sqrt(u * u + v * v) - size
    if label == 1:
        return np.abs(np.sqrt(u * u + v * v) - 0.85 * size) - thick / 2
    if label == 2:
        return _box(u, v, 0.8 * size, 0.8 * size)
    if label == 3:
        return np.abs(_box(u, v, 0.8 * size, 0.8 * size)) - thick / 2
    if label == 4:  # upward triangle as three half-planes
        r = 0.55 * size
        return np.maximum(np.maximum(v - r, 0.866 * u - 0.5 * v - r), -0.866 * u - 0.5 * v - r)
    if label == 5:
        return _plus(u, v, size, thick)
    if label == 6:
        ru, rv = _rotate(u, v, np.float32(math.pi / 4))
        return _plus(ru, rv, size, thick)
    if label == 7:
        return _bars(u, v, size, thick)
    if label == 8:
        return _bars(v, u, size, thick)
    ru, rv = _rotate(u, v, tilt)
    return _box(ru, rv, 1.1 * size, thick / 2)  # one diagonal line, either way


def generate_shapes(n: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    """n random shape images (uint8 (n,1,28,28)) and balanced labels, drawn with vectorised numpy ops.

    Position, size, thickness, rotation, brightness, background and noise vary, so a linear model
    does not solve it but a small MLP learns it in a couple of epochs. (numpy, single-threaded, is
    faster than torch here on a busy machine.)
    """
    rng = np.random.default_rng(seed)

    def uniform(lo: float, hi: float) -> np.ndarray:
        return rng.uniform(lo, hi, (n, 1, 1)).astype(np.float32)

    y = rng.permutation(n) % len(SHAPE_CLASSES)
    size, thick = uniform(6.0, 10.0), uniform(1.5, 3.5)
    centre = (SHAPES_SIDE - 1) / 2
    wander = 0.35 * (centre - size - 1.5)
    cx, cy = centre + uniform(-1, 1) * wander, centre + uniform(-1, 1) * wander
    angle = uniform(-0.25, 0.25)
    tilt = np.where(uniform(0, 1) < 0.5, np.float32(math.pi / 4), np.float32(-math.pi / 4)) + angle
    fg, bg, noise = uniform(0.55, 1.0), uniform(0.0, 0.2), uniform(0.02, 0.12)
    grid = np.arange(SHAPES_SIDE, dtype=np.float32)
    u, v = _rotate(grid.reshape(1, 1, -1) - cx, grid.reshape(1, -1, 1) - cy, angle)
    ink = np.empty((n, SHAPES_SIDE, SHAPES_SIDE), dtype=np.float32)
    for label in range(len(SHAPE_CLASSES)):
        idx = np.flatnonzero(y == label)
        d = _shape_distance(label, u[idx], v[idx], size[idx], thick[idx], tilt[idx])
        ink[idx] = np.clip(0.5 - d, 0, 1)  # one pixel of anti-aliased edge
    img = bg + (fg - bg) * ink + noise * rng.standard_normal((n, SHAPES_SIDE, SHAPES_SIDE), dtype=np.float32)
    x = np.rint(np.clip(img, 0, 1) * 255).astype(np.uint8)
    return torch.from_numpy(x).unsqueeze(1), torch.from_numpy(y.astype(np.int64))
