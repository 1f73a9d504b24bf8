"""`mpsstudio tune`: which precision, memory layout, compile, batch size (and, on the CPU, thread count) make this
model fastest on this machine, at what cost in memory and accuracy.

The grid: for each device, every combination of the asked settings, and on CUDA for fp32 the TF32 axis (off, in
convolutions as PyTorch's default does, in convolutions and matrix products). A setting a device cannot take (bf16 on an old
macOS or torch, a CPU autocast dtype this PyTorch cannot compute in (probed: current torch computes matmul, linear and
conv in fp16 on the CPU; an older one warns and stays in fp32), compile in the frozen app, channels_last
for token input) is a candidate with the engine's sentence, never dropped silently. The user's current settings are
the baseline of each device, always measured.

Each candidate is a short run with every run's rules (warm-up and compile timed apart, synchronized windows), run by
the front end's process.run_point: on a GPU the candidates share a warm worker (process/warm.py: each builds its
model and optimizer afresh in a process that has imported torch and made its GPU context once), a compiled one and
the CPU's get a process of their own. The candidates are interleaved in rounds (A B C, then C B A, ...) so drift and
heat hit all alike (rounds.py: successive halving, then more rounds for tied or imprecise leaders).
The same seed and the same number of steps for every candidate make their losses comparable: each is compared with
fp32 at the same batch size on the same device; a loss that is not finite, or more than LOSS_DIVERGED above fp32's,
makes a candidate unusable, and so does a failed parity check of one step against the CPU in float64 (`inspect`, once
per device and reduced precision; run_check, the front end's process.run_tool) on an accelerator. On the CPU that
check measures the precision's own rounding (there is no other CPU to compare with): shown, not judged.

The scoring and the sentence are in report.py; no torch here but in why_not_here.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace

from ...basics.config import RunConfig
from ...basics.errors import UserError
from ...basics.results import RunResult
from .options import (BOTH, DEFAULT_BUDGET_MIN, DEFAULT_STEPS, DEFAULT_WARMUP, MAX_BUDGET_MIN, MAX_ROUNDS, TF32,
                      default_batch_sizes, default_threads, parse_budget, parse_choice, parse_precisions, parse_rounds,
                      parse_tf32, parse_threads)
from .rounds import LEADER_ROUNDS, MIN_ROUNDS, run

__all__ = ["BOTH", "DEFAULT_BUDGET_MIN", "DEFAULT_STEPS", "DEFAULT_WARMUP", "LEADER_ROUNDS", "MAX_BUDGET_MIN",
           "MAX_ROUNDS", "MIN_ROUNDS", "TF32", "TF32_WORDS", "Candidate", "Grid", "default_batch_sizes", "default_threads",
           "first_wrong_layer", "grid", "input_kind", "parse_budget", "parse_choice", "parse_precisions",
           "parse_rounds", "parse_tf32", "parse_threads", "plan", "run", "tf32_of", "tune", "why_not_here"]

TF32_WORDS = {"off": "TF32 off", "conv": "TF32 in convolutions", "all": "TF32 in convolutions and matrix products"}
MAX_CANDIDATES = 256


@dataclass(frozen=True)
class Candidate:
    device: str
    precision: str = "fp32"
    channels_last: bool = False
    compile: bool = False
    batch_size: int = 64
    threads: int | None = None  # the CPU's thread count; None: torch's default
    tf32: str | None = None  # CUDA's TF32 (TF32), said of fp32 candidates; None: the setup's, unsaid

    @property
    def key(self) -> str:
        return (f"{self.device}|{self.precision}|{'cl' if self.channels_last else 'nchw'}|"
                f"{'compiled' if self.compile else 'eager'}|b{self.batch_size}|t{self.threads or 'default'}"
                + (f"|tf32-{self.tf32}" if self.tf32 else ""))

    def label(self) -> str:
        """"bf16 + channels_last + compile, batch 128" (fp32 and the defaults unsaid past the precision; TF32 said
        where it is an axis)."""
        parts = [self.precision] + (["channels_last"] if self.channels_last else []) + \
            (["compile"] if self.compile else []) + ([f"{self.threads} threads"] if self.threads else []) + \
            ([TF32_WORDS[self.tf32]] if self.tf32 else [])
        return f"{' + '.join(parts)}, batch {self.batch_size}"

    def config(self, base: RunConfig, steps: int, warmup: int) -> RunConfig:
        tf32 = base.tf32 if self.tf32 is None else self.tf32 == "all"
        tf32_conv = base.tf32_conv if self.tf32 is None else self.tf32 == "conv"
        return replace(base, device=self.device, precision=self.precision, channels_last=self.channels_last,
                       compile=self.compile, batch_size=self.batch_size, threads=self.threads, steps=steps,
                       epochs=None, warmup_steps=warmup, early_stop_patience=None, keep_best=False,
                       options=dict(base.options), tf32=tf32, tf32_conv=tf32_conv)

    @classmethod
    def of(cls, config: RunConfig, device: str | None = None) -> "Candidate":
        device = device or config.device
        return cls(device, config.precision or "fp32", bool(config.channels_last), bool(config.compile),
                   config.batch, config.threads if device == "cpu" else None,
                   tf32_of(config) if device.startswith("cuda") and config.precision == "fp32" else None)


def tf32_of(config: RunConfig) -> str:
    """The setup's TF32 as the axis names it."""
    return "all" if config.tf32 else "conv" if config.tf32_conv else "off"


@dataclass
class Grid:
    candidates: list[Candidate]
    refused: dict[str, str] = field(default_factory=dict)  # key -> why this device cannot take it
    baselines: dict[str, Candidate] = field(default_factory=dict)  # device -> the user's current settings


def grid(config: RunConfig, devices: Sequence[str], *, batch_sizes: Sequence[int], precisions: Sequence[str],
         channels_last: Sequence[bool], compiled: Sequence[bool], threads: Sequence[int | None],
         why_not: Callable[[Candidate], str], tf32: Sequence[str] = TF32) -> Grid:
    """Every combination per device, the user's current settings first; `why_not(candidate)` is the engine's
    sentence for a candidate that device cannot take ("" when it can). `tf32`: the TF32 settings of CUDA's fp32
    candidates (the others keep the setup's)."""
    out = Grid([])
    for d in devices:
        base = Candidate.of(config, d)
        out.baselines[d] = base
        cuda = d.startswith("cuda")

        def tf32_axis(p: str) -> list[str | None]:
            return list(tf32) if cuda and p == "fp32" else [None]
        combos = [Candidate(d, p, cl, c, b, t if d == "cpu" else None, f)
                  for b in batch_sizes for p in precisions for cl in channels_last for c in compiled
                  for t in (threads if d == "cpu" else [None]) for f in tf32_axis(p)]
        for cand in [base] + [c for c in dict.fromkeys(combos) if c != base]:
            reason = why_not(cand)
            if reason and cand != base:
                out.refused[cand.key] = reason
            out.candidates.append(cand)
    if len(out.candidates) > MAX_CANDIDATES:
        raise UserError(f"That grid holds {len(out.candidates):,} candidates; give fewer batch sizes or settings "
                        f"(at most {MAX_CANDIDATES}).")
    return out


def plan(config: RunConfig, devices: Sequence[str], *, batch_sizes: Sequence[int] | None = None,
         precisions: Sequence[str] | None = None, channels_last: str | None = None, compile: str | None = None,
         threads: Sequence[int] | None = None, train_samples: int | None = None, cores: int | None = None,
         tf32: Sequence[str] | None = None) -> Grid:
    """The grid the options describe, the defaults where they say nothing (the CLI's and the window's sheet alike):
    half, the setup's and double batch within the training samples; fp32, bf16 and fp16; channels_last both ways
    for image input; compile off; the CPU's default threads (and half the cores on four or more); on CUDA, fp32
    with TF32 off, in convolutions and everywhere."""
    image = "image" in input_kind(config)
    extra = [t for t in (threads or []) if t]
    return grid(config, devices,
                batch_sizes=list(batch_sizes or default_batch_sizes(config.batch, train_samples)),
                precisions=list(precisions or ("fp32", "bf16", "fp16")),
                channels_last=parse_choice(channels_last, "--channels-last", "both" if image else "off"),
                compiled=parse_choice(compile, "--compile", "off"),
                threads=list(dict.fromkeys([None, *extra])) if extra else default_threads(cores),
                why_not=why_not_here(config), tf32=list(tf32 or TF32))


def mlx_parity(runs: dict, g: Grid, device: str, prec: str) -> dict:
    """inspect's parity record ({"ok", "worst_rel_err"}) from the MLX runs of a device and precision: their own check
    of the twin's logits in that precision against PyTorch in float64 (run/mlx/parity.py)."""
    for cand in g.candidates:
        for r in runs.get(cand.key, []) if (cand.device, cand.precision) == (device, prec) else []:
            check = (r.summary.parity or {}).get("checks", {}).get(f"{prec} forward")
            if isinstance(check, dict):
                return {"ok": check["difference"] <= check["tolerance"], "worst_rel_err": check["difference"]}
    return {}


def why_not_here(config: RunConfig) -> Callable[[Candidate], str]:
    """What this installation says of a candidate: "" when it can run, else the engine's sentence (the same checks
    a run makes: the device's precisions, a GradScaler for fp16 training, the frozen app's compile, the input's
    layout). Imports torch (the device checks need it)."""
    import sys

    from ...basics.config import FROZEN_COMPILE_REASON
    from ...machine import devices, precision

    kind = input_kind(config)
    found: dict[str, devices.Device | str] = {}

    def device_of(name: str):
        if name not in found:
            try:
                found[name] = devices.resolve_device(name)
            except UserError as exc:
                found[name] = str(exc).rstrip(".")
        return found[name]

    def why(c: Candidate) -> str:
        if config.framework == "mlx":  # MLX's own devices; PyTorch-only settings (channels_last, TF32) refused
            from ...machine import mlx as mlx_machine

            try:
                c.config(config, 1, 0).validate()
            except UserError as exc:
                return str(exc).rstrip(".")
            if c.threads is not None:
                return "the CPU threads setting is PyTorch's (MLX's CPU backend keeps its own)"
            return mlx_machine.status(c.device.split(":")[0]).rstrip(".")
        dev = device_of(c.device)
        if isinstance(dev, str):
            return dev
        reason = precision.precision_unsupported_reason(dev, c.precision)
        if reason:
            return f"{c.precision} on {c.device}: {reason}"
        if (c.precision == "fp16" and config.mode == "train" and dev.kind != "cpu"
                and not precision.grad_scaler_supported(dev)):
            return (f"fp16 training on {c.device} needs a GradScaler against underflow, which this PyTorch does not "
                    "have there (MPS: PyTorch 2.8 or newer)")
        if c.compile and getattr(sys, "frozen", False):
            return FROZEN_COMPILE_REASON.rstrip(".")
        if c.channels_last and "image" not in kind:
            return (f"channels_last is a layout of image tensors; {config.model} gets {kind} here, so it changes "
                    "nothing")
        return ""
    return why


def first_wrong_layer(diagnosis: dict | None) -> str | None:
    """"features.3 (Conv2d)": the first layer a diagnosis found beyond tolerance (or not finite), None otherwise."""
    for d in (diagnosis or {}).get("devices") or []:
        found = d.get("layers") if isinstance(d, dict) else None
        row = (found or {}).get("first_wrong") or (found or {}).get("first_nonfinite")
        if isinstance(row, dict) and row.get("module"):
            return f"{row['module']} ({row.get('type') or 'layer'})"
    return None


def input_kind(config: RunConfig) -> str:
    """What the model gets from this dataset: synthetic data's sample (run.setup.synthetic_input), a named dataset's
    kind, a text dataset's token rows (basics.spec.is_text_dataset, as a run decides it), a folder's images; the
    model's own input kinds where that cannot be known here."""
    from ...basics.spec import is_text_dataset
    from ...data.datasets import list_datasets
    from ...run.setup import synthetic_input

    name = str(config.dataset).lower()
    try:
        if is_text_dataset(str(config.dataset)):
            return "tokens"
        if name == "synthetic":
            return synthetic_input(config).kind
        info = next((d for d in list_datasets() if d.name == name), None)
        return info.spec.kind if info is not None and info.spec is not None else "image"
    except UserError:
        from ...models import registry as models

        return models.get_model_info(config.model).input_kind


def tune(config: RunConfig, g: Grid, *, run_point: Callable[[RunConfig], RunResult | None],
         run_check: Callable[[RunConfig], dict | None], budget_s: float, steps: int = DEFAULT_STEPS,
         warmup: int = DEFAULT_WARMUP, should_stop: Callable[[], bool] | None = None,
         on_point: Callable[[Candidate, RunResult, int], None] | None = None, max_rounds: int = MAX_ROUNDS,
         run_layers: Callable[[RunConfig], dict | None] | None = None,
         before_checks: Callable[[], None] | None = None) -> dict:
    """The whole tune, the one path of both front ends: the rounds (run), then one parity check per device and
    reduced precision that ran (run_check(config): `inspect`'s result, None when it could not run), where one fails
    on an accelerator the first layer beyond tolerance (run_layers(config): `diagnose --layers`' result), then the
    report (report.analyse). `before_checks()`: called between the rounds and the checks (the front ends end their
    warm worker there)."""
    from .report import analyse

    stop = should_stop or (lambda: False)
    started = time.monotonic()
    checks = len({(c.device, c.precision) for c in g.candidates if c.precision != "fp32" and c.key not in g.refused})
    outcome = run(config, g, run_point=run_point, budget_s=budget_s, steps=steps, warmup=warmup,
                  should_stop=stop, on_point=on_point, reserve_points=checks, max_rounds=max_rounds)
    if before_checks is not None:
        before_checks()
    found_checks: dict[tuple[str, str], dict] = {}
    ran = [c for c in g.candidates if c.precision != "fp32" and any(
        r.status == "finished" for r in outcome["runs"].get(c.key, []))]
    for device, prec in dict.fromkeys((c.device, c.precision) for c in ran):
        if stop() or outcome["stopped"]:
            break
        if config.framework == "mlx":  # an MLX run checked its precision against PyTorch in float64 itself
            found_checks[(device, prec)] = mlx_parity(outcome["runs"], g, device, prec)
            continue
        found = run_check(replace(config, device=device, precision=prec, options=dict(config.options)))
        if isinstance(found, dict) and isinstance(found.get("parity"), dict):
            found_checks[(device, prec)] = dict(found["parity"])
    for (device, prec), parity in found_checks.items():
        if parity.get("ok") is False and device != "cpu" and run_layers is not None and not stop():
            layer = first_wrong_layer(run_layers(replace(config, device=device, precision=prec,
                                                         options=dict(config.options))))
            if layer:
                parity["first_wrong_layer"] = layer
    outcome["elapsed_s"] = time.monotonic() - started
    return analyse(config, g, outcome, found_checks, steps=steps, warmup=warmup, budget_s=budget_s)
