"""Comparisons: runs whose configs differ only by device, with each device's speedup over the CPU."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from .results import RunResult


@dataclass
class Comparison:
    """One group: same config but the device. `baseline` is the CPU run the speedups divide by (None if absent)."""

    runs: list[RunResult]
    baseline: RunResult | None
    speedups: dict[str, float | None] = field(default_factory=dict)  # run id -> speedup vs CPU

    @property
    def config(self):
        return self.runs[0].config

    def title(self, sep: str = ", ") -> str:
        """"resnet18 on cifar10, batch 128, fp32" (", inference" for inference runs)."""
        c = self.config
        parts = [f"{c.model} on {c.dataset}", f"batch {c.batch_size}", c.precision]
        if c.mode != "train":
            parts.append(c.mode)
        return sep.join(parts)

    def to_dict(self) -> dict:
        c = self.config
        return {
            "model": c.model, "dataset": c.dataset, "batch_size": c.batch_size, "precision": c.precision,
            "mode": c.mode,
            "baseline_run": self.baseline.id if self.baseline else None,
            "devices": [
                {"run": r.id, "device": r.config.device, "machine": r.machine,
                 "samples_per_s": r.summary.get("samples_per_s"), "speedup_vs_cpu": self.speedups.get(r.id)}
                for r in self.runs
            ],
        }


def speedup(run: RunResult, baseline: RunResult | None) -> float | None:
    """run throughput / CPU throughput; None when either is missing."""
    if baseline is None:
        return None
    a, b = run.summary.get("samples_per_s"), baseline.summary.get("samples_per_s")
    if not a or not b:
        return None
    return a / b


def compare(results: list[RunResult]) -> list[Comparison]:
    """Group finished runs by config-without-device; groups need two or more runs.

    When several runs share a device and machine inside a group, the newest stands for it.
    The CPU baseline is the newest CPU run of the group.
    """
    groups: dict[tuple, dict[tuple, RunResult]] = {}
    for r in sorted(results, key=lambda r: r.created_at):
        if r.status != "finished" or not r.summary.get("samples_per_s"):
            continue
        groups.setdefault(r.config.comparison_key(), {})[(r.config.device, r.machine)] = r
    out = []
    for members in groups.values():
        runs = list(members.values())
        if len(runs) < 2:
            continue
        cpus = [r for r in runs if r.config.device == "cpu"]
        baseline = max(cpus, key=lambda r: r.created_at) if cpus else None
        runs.sort(key=lambda r: (r.config.device != "cpu", r.config.device, r.machine))
        out.append(Comparison(runs, baseline, {r.id: speedup(r, baseline) for r in runs}))
    return out


def speedup_map(comparisons: Iterable[Comparison]) -> dict[str, float | None]:
    """Run id -> speedup vs CPU, over all the given comparisons."""
    return {run_id: value for c in comparisons for run_id, value in c.speedups.items()}
