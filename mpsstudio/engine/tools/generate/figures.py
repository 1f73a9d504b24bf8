"""What both frameworks' generation timings share (timing.py's PyTorch, mlx_timing.py's MLX): the figures made of a
setup's repetitions, the greedy tokens kept, the first setup's warm-up. No torch, no MLX."""

from __future__ import annotations

from ...analysis.repeat import median_interval

FIRST_TOKENS = 16  # the greedy tokens kept of each setup: whether devices, precisions and frameworks generate the same
FIRST_WARMUP_S = 1.0  # a model's first measurement warms up at least this long: a process's first generations are
# slow beyond one warm-up call (the lent H200: 136 decode tokens/s against 210 right after; docs/benchmarks.md)


def figures(first: list[float], decode: list[float], context: int, new_tokens: int, batch: int) -> dict:
    """Median and interval of each figure over the repetitions, paired as they ran: time to the first token (ms),
    prefill tokens/s (the prompt's tokens of every sequence over it), decode tokens/s (the other new tokens of
    every sequence over what the whole call took beyond the first)."""
    out = {}
    for key, values in (("ttft_ms", [1000 * f for f in first]),
                        ("prefill_tps", [batch * context / f for f in first]),
                        ("decode_tps", [batch * (new_tokens - 1) / d for d in decode if d > 0]
                         if new_tokens > 1 else [])):
        found = median_interval(values)
        out[key] = list(found) if found else None
    return out
