"""The PyTorch launch benchmark, on the user's own machine.

PyTorch's announcement of MPS support ("Introducing Accelerated PyTorch Training on Mac", May 2022) reported
about 7x faster training and up to 20x faster evaluation than the CPU, measured by Apple in April 2022 on a
Mac Studio (M1 Ultra, 20-core CPU, 64-core GPU, 128 GB, macOS 12.3, prerelease PyTorch 1.12) with ResNet50 at
batch 128, HuggingFace BERT at batch 64 and VGG16 at batch 64. The per-model figures exist only as bars in
the announcement's charts, so the claim is kept as the text states it.

Here: the same three workloads, in training and in inference, on synthetic data (224 px images; BERT-base-size
encoder on 128-token sequences, `transformer_base`), every run an ordinary run (own process, stored, compared).
No torch here: the front ends plan, estimate and run through this module and engine/process/.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from ..basics.config import RunConfig, precision_note
from ..basics.errors import UserError
from ..basics.formatting import is_finite
from ..basics.results import RunResult

CLAIM_SOURCE = ("PyTorch's MPS launch announcement (May 2022): Apple's test on an M1 Ultra Mac Studio "
                "(20-core CPU, 64-core GPU), macOS 12.3, prerelease PyTorch 1.12")
CLAIMS = {"train": (7.0, "about 7x"), "inference": (20.0, "up to 20x")}
DEFAULT_STEPS, DEFAULT_WARMUP = 10, 2
MODES = ("train", "inference")


@dataclass(frozen=True)
class Workload:
    key: str  # what --workloads takes
    label: str
    model: str  # the built-in model that runs it
    batch_size: int
    gflops_per_sample: float  # forward pass, for the time estimate only (published figures)


WORKLOADS = (
    Workload("resnet50", "ResNet50", "resnet50", 128, 4.1),
    Workload("bert-base", "BERT-base", "transformer_base", 64, 22.5),  # 2 x 88 M weights x 128 tokens
    Workload("vgg16", "VGG16", "vgg16", 64, 15.5),
)
BY_KEY = {w.key: w for w in WORKLOADS}
PROBE = RunConfig(model="resnet50", dataset="synthetic", batch_size=8, steps=2, epochs=None, warmup_steps=1,
                  mode="inference")
TRAIN_COST = 3.0  # a training step costs about three forward passes
PROCESS_S = 5.0  # starting a run's process and loading its data, per run (estimate)


def pick(names: str | None, choices: Sequence[str], what: str) -> list[str]:
    """A comma-separated subset of `choices` (all when None), in the order of `choices`; UserError otherwise."""
    if names is None:
        return list(choices)
    asked = [n.strip().lower() for n in names.split(",") if n.strip()]
    unknown = [n for n in asked if n not in choices]
    if unknown or not asked:
        raise UserError(f"Unknown {what} {', '.join(unknown) or '(none given)'}; choose from {', '.join(choices)}.")
    return [c for c in choices if c in asked]


@dataclass
class Job:
    workload: Workload
    mode: str
    configs: list[RunConfig]  # one per device, cpu first


def plan(devices: Sequence[str], workloads: Sequence[str] | None = None, modes: Sequence[str] | None = None,
         steps: int = DEFAULT_STEPS, warmup: int = DEFAULT_WARMUP) -> list[Job]:
    """One job per workload and mode, each on every given device; configs validated (UserError)."""
    jobs = []
    for key in workloads or [w.key for w in WORKLOADS]:
        w = BY_KEY[key]
        for mode in modes or MODES:
            base = RunConfig(model=w.model, dataset="synthetic", batch_size=w.batch_size, steps=steps,
                             epochs=None, warmup_steps=warmup, mode=mode).validate()
            jobs.append(Job(w, mode, [base.with_device(d) for d in devices]))
    return jobs


def notes(jobs: Sequence[Job]) -> list[str]:
    """What the user should know about these runs' precision (the TF32 note for CUDA runs in full fp32)."""
    return sorted({precision_note(c) for job in jobs for c in job.configs} - {""})


def estimate_s(jobs: Sequence[Job], probe_sps: dict[str, float | None]) -> dict[str, float | None]:
    """Seconds per device for all jobs, scaled from a probe's ResNet50 inference throughput by each workload's
    forward cost (x3 for training); an estimate within a factor of ~2-3 at best. None where no probe ran."""
    out: dict[str, float | None] = {}
    for device, sps in probe_sps.items():
        if not is_finite(sps) or sps <= 0:
            out[device] = None
            continue
        probe_gflops_s = sps * BY_KEY["resnet50"].gflops_per_sample
        total = 0.0
        for job in jobs:
            cfg = next((c for c in job.configs if c.device == device), None)
            if cfg is None:
                continue
            cost = job.workload.gflops_per_sample * (TRAIN_COST if job.mode == "train" else 1.0)
            samples = ((cfg.steps or 0) + cfg.warmup_steps) * cfg.batch
            total += samples * cost / probe_gflops_s + PROCESS_S
        out[device] = total
    return out


def probe(devices: Sequence[str], run: Callable[[list[RunConfig]], list[RunResult]]) -> dict[str, float]:
    """A short ResNet50 inference run per device (batch 8, one warm-up and two measured steps): its
    samples/s, for estimate_s. `run` is process.run_isolated (or a stand-in)."""
    results = run([PROBE.with_device(d) for d in devices])
    return {r.config.device: float(r.summary.samples_per_s) for r in results
            if r.status == "finished" and is_finite(r.summary.samples_per_s)}


@dataclass
class Row:
    """One line of the report: a workload and mode on one device, its speedup, and the published claim."""

    workload: str
    mode: str
    device: str
    samples_per_s: float | None
    speedup: float | None
    low: float | None
    high: float | None
    claim: str
    stability: str | None
    run_id: str


def report(jobs: Sequence[Job], results: Sequence[RunResult]) -> list[Row]:
    """Rows for the runs of `jobs` among `results` (matched by config), speedups from compare()."""
    from ..analysis.compare import compare

    by_key: dict[tuple, list[RunResult]] = {}
    for r in results:
        by_key.setdefault(r.config.comparison_key(), []).append(r)
    rows = []
    for job in jobs:
        runs = by_key.get(job.configs[0].comparison_key(), [])
        entries = {e.run.id: e for c in compare(runs) for e in c.entries}
        for r in runs:
            e = entries.get(r.id)
            rows.append(Row(job.workload.label, job.mode, r.config.device, r.summary.samples_per_s,
                            e.speedup if e else None, e.low if e else None, e.high if e else None,
                            CLAIMS[job.mode][1] if r.config.device != "cpu" else "", r.summary.stability,
                            r.id))
    return rows


def fmt_estimate(seconds: float | None) -> str:
    from ..basics.formatting import fmt_duration

    if seconds is None or not math.isfinite(seconds):
        return "unknown (the probe did not finish)"
    return f"about {fmt_duration(seconds)}"
