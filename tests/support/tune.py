"""A tune's candidates answered at once (their throughput and loss chosen), for the engine's tune and the window's."""

from __future__ import annotations

from mpsstudio.engine.basics.config import RunConfig
from mpsstudio.engine.basics.results import RunResult, WindowRow
from mpsstudio.engine.tools import tune

BASE = RunConfig(model="mnist_cnn", dataset="synthetic", device="cpu", batch_size=64)


class Clock:
    def __init__(self):
        self.t = 0.0

    def __call__(self):
        return self.t


def fake_runs(speeds: dict, losses: dict | None = None, errors: dict | None = None, clock: Clock | None = None,
              cost_s: float = 1.0, jitter: float = 0.0):
    """run_point for tune.run: a candidate's throughput from `speeds` by (precision, channels_last, batch) (windows
    within ±1 % of it), its loss from `losses` (default 2.3), failed with `errors`' sentence."""
    ran = []

    def run_point(cfg: RunConfig) -> RunResult:
        key = (cfg.precision, cfg.channels_last, cfg.batch_size)
        ran.append(key)
        if clock is not None:
            clock.t += cost_s
        if errors and key in errors:
            return RunResult(config=cfg, status="failed", error=errors[key])
        sps = speeds.get(key, 100.0) * (1 + jitter * ((len(ran) % 5) - 2) / 2)  # varies round to round
        windows = [WindowRow(samples_per_s=sps * f) for f in (0.99, 1.0, 1.01, 0.995, 1.005, 1.0, 0.99, 1.01)]
        summary = {"samples_per_s": sps, "samples_per_s_iqr": sps * 0.01, "peak_memory": 1_000_000 * cfg.batch_size
                   * (0.6 if cfg.precision != "fp32" else 1.0), "warmup_s": 0.5,
                   "final_loss": (losses or {}).get(key, 2.3)}
        return RunResult(config=cfg, status="finished", summary=summary, windows=windows)
    return run_point, ran


def grid_of(precisions=("fp32", "bf16"), layouts=(False, True), sizes=(64,), why=lambda c: ""):
    return tune.grid(BASE, ["cpu"], batch_sizes=list(sizes), precisions=list(precisions), channels_last=list(layouts),
                     compiled=[False], threads=[None], why_not=why)


def no_check(cfg):
    return None

