"""A tune's rounds (tools/tune: the grid and the whole tune; report.py: the scoring): every candidate measured in
rounds within the budget, interleaved (A B C, then C B A, ...) so drift and heat hit all alike. From round MIN_ROUNDS
on, a candidate whose ratio to the device's best (paired round by round) lies wholly below 1 is dropped, if it is in
the worse half (successive halving by intervals), and the result says so. Further rounds run while the budget allows
one more (estimated from the last). Then, on a device whose fastest candidates the noise still ties, or whose
fastest has an interval wider than ±5 % (report.contenders), those and the current settings get up to
LEADER_ROUNDS more rounds of their own while the budget holds one, until the interval of their paired ratio
(analysis/repeat.median_interval: from 9 rounds one outlying round at each end is left out) tells them apart or is
within ±5 %. No torch.
"""

from __future__ import annotations

import math
import statistics
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

from ...basics.config import RunConfig
from ...basics.results import RunResult
from .options import DEFAULT_STEPS, DEFAULT_WARMUP, MAX_ROUNDS

if TYPE_CHECKING:
    from . import Candidate, Grid

MIN_ROUNDS = 3  # rounds every candidate gets (budget allowing) before any is dropped: a between-round interval
LEADER_ROUNDS = 6  # more rounds, past the others', for a device's fastest while tied or its interval is wide


def run(config: RunConfig, g: Grid, *, run_point: Callable[[RunConfig], RunResult | None], budget_s: float,
        steps: int = DEFAULT_STEPS, warmup: int = DEFAULT_WARMUP, max_rounds: int = MAX_ROUNDS,
        should_stop: Callable[[], bool] | None = None,
        on_point: Callable[[Candidate, RunResult, int], None] | None = None,
        clock: Callable[[], float] = time.monotonic, reserve_points: int = 0) -> dict:
    """Measure the grid in rounds within the budget. A point starts only where it should end within the budget (the
    mean of the points so far), leaving room for `reserve_points` more (the parity checks that follow). Returns
    {"runs": {key: [RunResult, ...]}, "rounds": n, "dropped": {key: why}, "elapsed_s", "out_of_budget": bool,
    "stopped": bool}."""
    stop = should_stop or (lambda: False)
    started = clock()
    runs: dict[str, list[RunResult]] = {}
    dropped: dict[str, str] = {}
    live = [c for c in g.candidates if c.key not in g.refused]
    too_big: set[tuple] = set()  # (device, settings) that failed at a batch: larger batches of it are not run
    rounds, stopped, out_of_budget = 0, False, False
    last_round_s = 0.0
    points_s: list[float] = []

    def left_s() -> float:  # the budget left once the reserved points are counted
        mean = sum(points_s) / len(points_s) if points_s else 0.0
        return budget_s - (clock() - started) - mean * reserve_points
    def measure(cand: Candidate) -> bool:
        """Run one point; False when the tune stops there (cancelled)."""
        point_started = clock()
        result = run_point(cand.config(config, steps, warmup))
        points_s.append(clock() - point_started)
        if result is None:
            return True
        runs.setdefault(cand.key, []).append(result)
        if on_point is not None:
            on_point(cand, result, rounds)
        if result.status == "failed":
            too_big.add((_family(cand), cand.batch_size))
        return result.status != "cancelled"
    while rounds < max_rounds and live:
        if rounds and last_round_s > left_s():
            out_of_budget = rounds < max_rounds
            break
        rounds += 1
        round_started = clock()
        order = live if rounds % 2 else list(reversed(live))
        for cand in order:
            if stop():
                stopped = True
                break
            if rounds == 1 and points_s and sum(points_s) / len(points_s) > left_s():
                out_of_budget = True
                break
            if any(f == _family(cand) and b < cand.batch_size for f, b in too_big):
                dropped.setdefault(cand.key, "a smaller batch of these settings did not run")
                continue
            if not measure(cand):
                stopped = True
                break
        last_round_s = clock() - round_started
        if stopped or out_of_budget:
            break
        live = [c for c in live if c.key not in dropped and _still_running(runs.get(c.key))]
        if rounds >= MIN_ROUNDS:
            for key, why in _halve(live, runs, g.baselines, rounds).items():
                dropped[key] = why
            live = [c for c in live if c.key not in dropped]
    remeasured: list[str] = []
    leader_rounds = 0
    while not stopped and rounds >= MIN_ROUNDS and leader_rounds < LEADER_ROUNDS:
        by_key = {c.key: c for c in live}
        leaders = [by_key[k] for k in _contenders(config, g, runs, dropped) if k in by_key]
        mean = sum(points_s) / len(points_s) if points_s else 0.0
        if len(leaders) < 2 or mean * len(leaders) > left_s():
            break
        rounds += 1
        leader_rounds += 1
        remeasured += [c.key for c in leaders if c.key not in remeasured]
        for cand in (leaders if rounds % 2 else list(reversed(leaders))):
            if stop() or not measure(cand):
                stopped = True
                break
        live = [c for c in live if _still_running(runs.get(c.key))]
    return {"runs": runs, "rounds": rounds, "dropped": dropped, "elapsed_s": clock() - started,
            "out_of_budget": out_of_budget, "stopped": stopped, "leader_rounds": leader_rounds,
            "remeasured": remeasured}


def _family(c: Candidate) -> tuple:
    """A candidate's settings but its batch size."""
    return c.device, c.precision, c.channels_last, c.compile, c.threads


def _contenders(config: RunConfig, g: Grid, runs: dict, dropped: dict) -> list[str]:
    """report.contenders of the rounds so far: the leaders still tied, with their device's current settings."""
    from .report import candidates, contenders

    return contenders(candidates(g, {"runs": runs, "dropped": dropped}, {}))


def _still_running(results: list[RunResult] | None) -> bool:
    return results is not None and bool(results) and results[-1].status == "finished"


def _halve(live: list[Candidate], runs: dict, baselines: dict, rounds: int) -> dict[str, str]:
    """Per device, the candidates in the worse half whose ratio to the best (paired round by round: report's
    interval) lies wholly below 1; the user's current settings are always kept."""
    from .report import paired_ratio

    out: dict[str, str] = {}
    for device in dict.fromkeys(c.device for c in live):
        mine = [(c, [r for r in runs[c.key] if r.status == "finished"]) for c in live
                if c.device == device and runs.get(c.key)]
        mine = [(c, ok) for c, ok in mine if ok]
        mine.sort(key=lambda cs: statistics.median(r.summary.samples_per_s or 0.0 for r in cs[1]),
                  reverse=True)
        if len(mine) < 3:
            continue
        best = mine[0][1]
        keep = math.ceil(len(mine) / 2)
        for cand, ok in mine[keep:]:
            ratio, low, high = paired_ratio(ok, best)
            if cand == baselines.get(device) or ratio is None or high is None or high >= 1.0:
                continue
            out[cand.key] = (f"after round {rounds}: {ratio:.2f}x [{low:.2f}x-{high:.2f}x] the best's samples/s "
                             "(successive halving)")
    return out
