"""Repeated comparisons: the devices run interleaved, A B B A A B ..., so slow drift and heat affect both sides
(the pairing benchmarks/overhead.py uses). compare.py pairs each round's runs; no torch here."""

from __future__ import annotations

import uuid
from collections.abc import Sequence

from ..basics.config import RunConfig
from ..basics.errors import UserError
from ..basics.formatting import one_line

MAX_ROUNDS = 100


def interleave(configs: Sequence[RunConfig], rounds: int) -> tuple[list[RunConfig], list[dict | None]]:
    """The configs in run order for `rounds` rounds (odd rounds as given, even rounds reversed), and the
    env["repeat"] tag of each run. One round is a plain comparison: no tags."""
    if isinstance(rounds, bool) or not isinstance(rounds, int) or not 1 <= rounds <= MAX_ROUNDS:
        raise UserError(f"The number of repeats must be a whole number from 1 to {MAX_ROUNDS}, "
                        f"not {one_line(repr(rounds), 40)}.")
    if rounds == 1:
        return list(configs), [None] * len(configs)
    set_id = uuid.uuid4().hex[:12]
    order: list[RunConfig] = []
    tags: list[dict | None] = []
    for k in range(1, rounds + 1):
        for cfg in (configs if k % 2 else list(reversed(configs))):
            order.append(cfg)
            tags.append({"set": set_id, "round": k, "rounds": rounds})
    return order, tags
