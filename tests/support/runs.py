"""Runs as tests make them: finished runs with windows, summaries from window rates, sweep points, stored runs."""

from __future__ import annotations

import random

from mpsstudio.engine.analysis.summary import RunFacts, summarise
from mpsstudio.engine.basics.config import RunConfig
from mpsstudio.engine.basics.results import EpochRow, RunResult, WindowRow
from mpsstudio.engine.basics.summary_fields import RunSummary


def good_run(run_id="a" * 32, device="cuda:0"):
    return RunResult(RunConfig(device=device, steps=10, epochs=None), env={"machine_label": "H100 server"},
                     summary={"samples_per_s": 900.0, "samples_per_s_iqr": 9.0, "final_loss": 0.5},
                     losses=[2.0, 1.0], windows=[WindowRow(samples_per_s=900.0, seconds=0.1)], id=run_id,
                     created_at="2026-01-01T00:00:00+00:00")



def run_with(device, rates, machine="Mac", origin="local", env=None, created="2026-01-01T00:00:00+00:00",
             batch_size=64, train_size=6400, epoch_times=(), **cfg):
    """A finished run whose summary is computed from window throughputs, as a real run's is."""
    cfg = {"steps": 100, "epochs": None, **cfg}
    config = RunConfig(device=device, batch_size=batch_size, **cfg)
    r = RunResult(config=config, env={"machine_label": machine, **(env or {})}, origin=origin, created_at=created)
    r.windows = [WindowRow(steps=5, seconds=5 * batch_size / v, samples=5 * batch_size,
                           samples_per_s=v, data_wait_s=0.0, memory=0) for v in rates]
    r.epochs = [EpochRow(epoch=i + 1, seconds=s, val_loss=None, val_accuracy=None) for i, s in enumerate(epoch_times)]
    summarise(r, RunFacts(batch_size=batch_size, train_size=train_size))
    return r


def noisy_rates(center, spread, n=30, seed=1):
    rng = random.Random(seed)
    return [center * (1 + rng.uniform(-spread, spread)) for _ in range(n)]



def point(device: str, batch: int, sps: float, spread: float = 0.01, status: str = "finished") -> RunResult:
    r = RunResult(config=RunConfig(device=device, batch_size=batch, steps=8, epochs=None), status=status)
    r.windows = [WindowRow(samples_per_s=sps * (1 + spread * ((i % 3) - 1)), steps=1, seconds=0.1,
                           data_wait_s=0.0) for i in range(10)]
    r.summary = RunSummary.made({"samples_per_s": sps if status == "finished" else None,
                                 "samples_per_s_iqr": sps * spread, "step_ms": 1000 * batch / sps,
                                 "stability": "stable"})
    return r



MAC = {"machine_label": "Apple M2 Pro, macOS 14.5", "os": "macOS 14.5", "torch": "2.8.0"}


def make_run(device="cpu", sps=100.0, created="2026-11-21T08:00:00+00:00", status="finished", env=MAC,
             error="", **cfg):
    cfg.setdefault("model", "resnet18")
    cfg.setdefault("dataset", "cifar10")
    cfg.setdefault("batch_size", 128)
    config = RunConfig(device=device, steps=200, epochs=None, **cfg)
    summary = {"samples_per_s": sps, "samples_per_s_iqr": None if sps is None else 0.02 * sps,
               "warmup_s": 0.84, "warmup_steps": 10, "s_per_epoch": None if not sps else 50_000 / sps,
               "final_loss": 1.1034, "val_accuracy": 0.978, "peak_memory": 1_288_490_188, "windows": 40}
    return RunResult(config=config, status=status, env=dict(env), summary=summary, error=error,
                     losses=[2.3, 1.9, 1.4], created_at=created,
                     windows=[] if sps is None else [WindowRow(samples_per_s=sps * f) for f in (0.99, 1.01) * 20])



def plain_run(device="cpu", sps=100.0, created="2026-01-01T00:00:00+00:00", status="finished", machine="Mac", **cfg):
    config = RunConfig(device=device, steps=10, epochs=None, **cfg)
    return RunResult(config=config, status=status, env={"machine_label": machine},
                     summary={"samples_per_s": sps, "samples_per_s_iqr": 1.0, "final_loss": 0.5},
                     losses=[2.0, 1.5, 1.0], windows=[], created_at=created)

