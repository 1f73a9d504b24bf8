"""Contrasts: runs compared by what differs between them, where compare.py compares devices.

A contrast has a baseline run (chosen, or the oldest) and, for each other run, the ratio of its throughput to the
baseline's with an interval, and every difference between the two that MPS Studio records: a setting of the run
(batch, precision, channels_last, compile, workers, ...), its device, or its environment (torch, macOS and its
build, the chip, the power source, the MPS variables, CUDA and its driver, ...). The verdict names what differs;
where more than one thing does, it says the cause cannot be told apart.

Three ways to get one:
- `by_setting`: runs of one setup on one device of one machine in one environment that differ in exactly one
  setting (SETTING_AXES): batch 64 against 128, fp32 against bf16.
- `by_environment`: runs of one setup (every setting equal) on one kind of device whose environments differ:
  torch 2.14.1 against 2.15.0, macOS 14.5 against 15.1, this Mac against a server.
- `of_runs`: any two or more runs the user chose.

Rules (docs/architecture.md, "Contrasts"): finished runs with a throughput only; one run per distinct value (the
newest stands for it); the interval is compare.py's bootstrap of the ratio of the two runs' median window
throughputs: window-to-window noise inside the two runs, not run-to-run variation (a repeat measures that). A ratio
whose interval contains 1.0 is "no clear difference". No torch here.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable, Sequence, Set as AbstractSet
from dataclasses import dataclass, field

from ..basics.config import RunConfig
from ..basics.formatting import fmt_rate, fmt_spread, fmt_timestamp, instant, is_finite, printable, spread_of
from ..basics.results import RunResult
from ..basics.formatting import Table
from .compare import run_rates, pair_seed, bootstrap_ratio, machine_id, short_machine
from .differences import (AXIS_LABELS, ENVIRONMENT, SETTING_AXES, Difference, axis_value, differences, shown,
                          without_finetune, without_quantize)
from .verdict import framework_sentence, times_text
from .scaling import device_label


@dataclass
class Versus:
    """One run against the baseline: the ratio of its throughput to the baseline's, the interval, what differs."""

    run: RunResult
    ratio: float | None
    low: float | None = None
    high: float | None = None
    diffs: list[Difference] = field(default_factory=list)

    def unclear(self) -> bool:
        """No interval, or one containing 1.0: no clear difference."""
        return self.low is None or self.high is None or self.low <= 1.0 <= self.high

    @property
    def noisy(self) -> bool:
        return self.run.summary.stability == "noisy"


@dataclass
class Contrast:
    """A baseline run and each other run against it. `kind`: "setting" (one axis: `axis`), "environment" or
    "selected" (runs a person chose)."""

    kind: str
    baseline: RunResult
    rows: list[Versus]
    axis: str = ""

    @property
    def runs(self) -> list[RunResult]:
        return [self.baseline, *(v.run for v in self.rows)]

    def title(self) -> str:
        c = self.baseline.config
        what = {"setting": f"{SETTING_AXES.get(self.axis, AXIS_LABELS.get(self.axis, self.axis))} compared",
                "environment": "environments compared", "selected": "selected runs compared"}[self.kind]
        differ = {d.key for v in self.rows for d in v.diffs if d.kind == "setting"}
        setup = setup_words(c, skip={self.axis} if self.kind == "setting" else differ)
        return printable(f"{setup} on {c.device}: {what}" if self.kind != "selected" else f"{setup}: {what}")

    def sentences(self, diagnoses: Sequence[dict] = ()) -> list[str]:
        """One verdict per run; `diagnoses` (stored diagnose results): where both runs have one, the phase that
        moved follows its verdict."""
        out = []
        for v in self.rows:
            out.append(verdict(self, v))
            moved = phase_moved(self.baseline, v.run, diagnoses)
            if moved:
                out.append(moved)
        return out


def usable(r: RunResult) -> bool:
    """A finished run with a throughput: what a contrast compares."""
    return usable_run(r)


def usable_run(r: RunResult) -> bool:
    return r.status == "finished" and is_finite(r.summary.samples_per_s) and r.summary.samples_per_s > 0


def versus(base: RunResult, other: RunResult) -> Versus:
    usable = usable_run(other) and usable_run(base)  # a failed or stopped run is never compared
    ratio = other.summary.rate / base.summary.rate if usable else None
    interval = bootstrap_ratio(run_rates(other), run_rates(base), seed=pair_seed(other.id, base.id)) if ratio else None
    low, high = interval if interval else (None, None)
    return Versus(other, ratio, low, high, differences(base, other))


def of_runs(runs: Sequence[RunResult], baseline: RunResult | None = None, kind: str = "selected",
            axis: str = "") -> Contrast:
    """The given runs against `baseline` (default: the oldest); a run without a throughput has no ratio."""
    ordered = sorted(runs, key=lambda r: instant(r.created_at))
    usable = [r for r in ordered if usable_run(r)]  # a failed run is never the baseline: nothing could be divided by it
    base = baseline if baseline is not None and usable_run(baseline) else (usable or ordered)[0]
    rows = [versus(base, r) for r in ordered if r.id != base.id]
    return Contrast(kind, base, rows, axis)


def _env_print(r: RunResult, *skip: str) -> tuple:
    return tuple(shown(read(r.env)) for key, _, read in ENVIRONMENT if key not in skip) + (machine_id(r),)


def _newest_per(runs: Iterable[RunResult], value: Callable[[RunResult], object]) -> list[RunResult]:
    by_value: dict = {}
    for r in sorted(runs, key=lambda r: instant(r.created_at)):
        by_value[repr(value(r))] = r
    return sorted(by_value.values(), key=lambda r: instant(r.created_at))


def _choose(runs: list[RunResult], baseline_id: str | None) -> RunResult | None:
    return next((r for r in runs if r.id == baseline_id), None)


def by_setting(results: Iterable[RunResult], baseline_id: str | None = None,
               containing: str | None = None) -> list[Contrast]:
    """Runs of one setup, device, machine and environment that differ in exactly one setting (SETTING_AXES);
    `containing`: only the groups holding that run (the window asks for the selected run's)."""
    usable = [r for r in results if usable_run(r)]
    keys = {r.id: r.config.comparison_key() for r in usable}  # once per run, not once per axis
    prints = {r.id: _env_print(r, "threads") for r in usable}
    full = {r.id: _env_print(r) for r in usable}
    # the framework axis: MLX's version and variables are one side's only
    beside = {r.id: _env_print(r, "mlx", "mlx_env") for r in usable}
    out = []
    for axis in (*SETTING_AXES, "finetune"):  # and a model folder's fine-tuning (its options), one setting
        groups: dict[tuple, list[RunResult]] = {}
        for r in usable:
            key = (tuple(kv for kv in keys[r.id] if kv[0] != axis) if axis != "finetune" else
                   without_finetune(keys[r.id], r))
            if axis == "framework":  # a quantized MLX side is its framework's side (quantize_words)
                key = without_quantize(key, r)
            # CPU threads as set show in the environment's thread count too: that one is the setting's to name
            env = prints[r.id] if axis == "threads" else beside[r.id] if axis == "framework" else full[r.id]
            groups.setdefault((key, r.config.device, env), []).append(r)
        for members in groups.values():
            runs = _newest_per(members, functools.partial(axis_value, axis=axis))
            if len(runs) >= 2 and (containing is None or any(r.id == containing for r in runs)):
                out.append(of_runs(runs, _choose(runs, baseline_id), "setting", axis))
    return out


def device_kind(device: str) -> str:
    return device.split(":")[0]


def flipped(base: RunResult, v: Versus) -> Versus:
    """`base` against `v.run`: the same two runs the other way round (the ratio and interval inverted)."""
    def inv(x):
        return 1 / x if x else None
    return Versus(base, inv(v.ratio), inv(v.high), inv(v.low), v.diffs)


def by_framework(results: Iterable[RunResult], containing: str | None = None) -> list[tuple[Contrast, Versus]]:
    """PyTorch or MLX?: each MLX run against the PyTorch run of its setup, device, machine and environment (the newest
    of each), the PyTorch run the baseline; `containing`: only those holding that run."""
    out = []
    for c in by_setting(results, containing=containing):
        base = next((r for r in reversed(c.runs) if r.config.framework == "torch"), None)
        if c.axis != "framework" or base is None:
            continue
        ordered = of_runs(c.runs, base, "setting", "framework")
        out += [(ordered, v) for v in ordered.rows if v.run.config.framework == "mlx"]
    return out


def by_environment(results: Iterable[RunResult], baseline_id: str | None = None,
                   containing: str | None = None) -> list[Contrast]:
    """Runs of one setup on one kind of device whose environments differ (a machine is part of its environment);
    `containing`: only the group holding that run."""
    groups: dict[tuple, list[RunResult]] = {}
    for r in results:
        if usable_run(r):
            groups.setdefault((r.config.comparison_key(), device_kind(r.config.device)), []).append(r)
    out = []
    for members in groups.values():
        runs = _newest_per(members, _env_print)
        if len(runs) >= 2 and (containing is None or any(r.id == containing for r in runs)):
            out.append(of_runs(runs, _choose(runs, baseline_id), "environment"))
    return out


def contrasts(results: Sequence[RunResult], baseline_id: str | None = None,
              containing: str | None = None) -> list[Contrast]:
    """Every contrast in a history (or those holding run `containing`): environments first (the question after an
    update), then settings."""
    if containing is not None:  # only runs of its model and data on its kind of device can share a group with it
        target = next((r for r in results if r.id == containing), None)
        if target is None:
            return []
        c = target.config
        results = [r for r in results if r.config.model == c.model and r.config.dataset == c.dataset
                   and device_kind(r.config.device) == device_kind(c.device)]
    return [*by_environment(results, baseline_id, containing), *by_setting(results, baseline_id, containing)]


# ---------------------------------------------------------------- words



def setup_words(c: RunConfig, skip: AbstractSet[str] = frozenset()) -> str:
    """"resnet18 on cifar10, batch 64, bf16": what the runs share (`skip`: what differs between them)."""
    parts = []
    if "model" not in skip:
        parts.append(c.work_words if "dataset" not in skip else c.model)
    elif "dataset" not in skip:
        parts.append(f"data {c.dataset}")
    if "batch_size" not in skip:
        parts.append(c.batch_words)
    if "precision" not in skip:
        parts.append(c.precision_words)
    for name, word in (("channels_last", "channels_last"), ("compile", "torch.compile")):
        if getattr(c, name) and name not in skip:
            parts.append(word)
    if c.mode != "train" and "mode" not in skip:
        parts.append(c.mode)
    return ", ".join(printable(p) for p in parts) or "these setups"


def _percent(v: float) -> str:
    return f"{v:.1f}" if abs(v) < 10 else f"{v:.0f}" if abs(v) < 1e4 else f"{v:.3g}"


def ratio_words(v: Versus) -> str:
    """"12 % slower [9, 15]", "1.31x faster [1.25-1.36]" or "no clear difference (0.99x [0.95-1.03])"."""
    if v.ratio is None:
        return "not measured (the run has no throughput)"
    interval = f" [{times_text(v.low)}-{times_text(v.high)}]" if v.low is not None and v.high is not None else ""
    if v.low is None or v.high is None:
        return f"{times_text(v.ratio)}x, but how sure cannot be told (too few measurement windows for an interval)"
    if v.unclear():
        return f"no clear difference ({times_text(v.ratio)}x{interval})"
    if v.ratio < 0.5:  # "330x slower", never "100 % slower"
        return f"{times_text(1 / v.ratio)}x slower [{times_text(1 / v.high)}-{times_text(1 / v.low)}]"
    if v.ratio < 1:
        return f"{_percent((1 - v.ratio) * 100)} % slower [{_percent((1 - v.high) * 100)}, {_percent((1 - v.low) * 100)}]"
    if v.ratio < 2:
        return f"{_percent((v.ratio - 1) * 100)} % faster [{_percent((v.low - 1) * 100)}, {_percent((v.high - 1) * 100)}]"
    return f"{times_text(v.ratio)}x faster{interval}"


def _where(r: RunResult) -> str:
    return f"{r.config.device} of {short_machine(r.machine)}"


def verdict(c: Contrast, v: Versus) -> str:
    """One sentence: the ratio with its interval, and what differs ("nothing else differs"; "the cause cannot be
    told apart" when more than one thing does)."""
    base = c.baseline
    if c.axis == "framework" and {base.config.framework, v.run.config.framework} == {"torch", "mlx"}:
        return framework_sentence(base, v) if base.config.framework == "torch" else framework_sentence(
            v.run, flipped(base, v))  # PyTorch is the baseline of "MLX trains ... faster than PyTorch"
    noisy = " (a noisy run: treat it with care)" if v.noisy or base.summary.stability == "noisy" else ""
    setting_keys = {d.key for d in v.diffs if d.kind == "setting"}
    setup = setup_words(base.config, skip=setting_keys)
    if v.ratio is None:
        return (f"Run {v.run.id[:8]} has no throughput to compare ({printable(v.run.status)}): it is not compared "
                f"with run {base.id[:8]}.")
    shaky = next((r for r in (v.run, base) if r.summary.stability == "noisy"), None)
    if shaky is not None and v.diffs and c.kind == "environment":  # the regression check's rule: never a verdict
        why = str(shaky.summary.stability_reason or "its windows vary beyond the limit").rstrip(".")
        named = ", ".join(dict.fromkeys(d.label for d in v.diffs if d.cause)) or "what differs"
        return (f"Run {v.run.id[:8]} against run {base.id[:8]} for {setup}: {ratio_words(v)}, but this cannot tell "
                f"whether {named} changed the speed: run {shaky.id[:8]} was noisy ({printable(why)}); measure both "
                "again on a quieter machine.")
    if not v.diffs:
        why = ("so this is run-to-run variation" if v.unclear() else
               "so the difference comes from something it does not record (other programs, heat, the code of a "
               "model file or script)")
        return f"A repeat of {setup} on {_where(base)}: {ratio_words(v)}; nothing MPS Studio records differs, {why}{noisy}."
    causes = [d for d in v.diffs if d.cause]
    along = "".join(f" ({d.label}: {d.other}; the baseline's: {d.base})" for d in v.diffs if not d.cause)
    if len(causes) == 1:
        d = causes[0]
        head = d.words("other")
        if v.ratio is None or v.unclear():
            return (f"{head} against {d.words('base')}: {ratio_words(v)} for {setup} on {_where(base)}; nothing else "
                    f"differs{along}{noisy}.")
        than = d.base if d.kind != "setting" or d.key == "precision" else d.words("base")
        return (f"{head} is {ratio_words(v)} than {than} for {setup} on {_where(base)}; nothing else "
                f"differs{along}{noisy}.")
    labels = list(dict.fromkeys(d.label for d in causes))
    named = ", ".join(labels[:-1]) + f" and {labels[-1]}" if len(labels) > 1 else labels[0]
    return (f"Run {v.run.id[:8]} against run {base.id[:8]}: {ratio_words(v)} for {setup}; these runs differ in {named}: "
            f"the cause cannot be told apart{noisy}.")


def headline(c: Contrast) -> str:
    """The first row's ratio in a few words, for above a chart: "torch 2.15.0: 12 % slower [9, 15]"."""
    if not c.rows:
        return "Nothing to compare"
    v = c.rows[0]
    causes = [d for d in v.diffs if d.cause]
    what = causes[0].words("other") if len(causes) == 1 else f"run {v.run.id[:8]}"
    return f"{what}: {ratio_words(v)}"


TABLE_HEADERS = ["run", "time", "machine", "device", "differs from the baseline", "samples/s", "\u00b1",
                 "vs baseline [95 % interval]", "stability"]
TABLE_NUMERIC = [False, False, False, False, False, True, True, True, False]
LEGEND = ("samples/s: measured, the median of the run's windows; \u00b1: half their IQR over the median; vs "
          "baseline: this run's samples/s over the baseline's, with a 95 % bootstrap interval over measurement "
          "windows (window-to-window noise inside the two runs, not run-to-run variation)")


def _spread(r: RunResult) -> str:
    s = r.summary
    return fmt_spread(spread_of(s.samples_per_s, s.samples_per_s_iqr))


def _row(r: RunResult, differs: str, ratio: str) -> list[str]:
    return [r.id[:8], fmt_timestamp(r.created_at), short_machine(r.machine), printable(device_label(r)), differs,
            fmt_rate(r.summary.samples_per_s), _spread(r), ratio, str(r.summary.stability or "")]


def ratio_cell(v: Versus) -> str:
    """"0.88x [0.86-0.90]" (the interval when there is one)."""
    if v.ratio is None:
        return "\u2014"
    interval = f" [{times_text(v.low)}-{times_text(v.high)}]" if v.low is not None and v.high is not None else ""
    return f"{times_text(v.ratio)}x{interval}"


def table(c: Contrast) -> Table:
    """The contrast as rows (the baseline first): the same cells in the CLI, the window and reports."""
    rows = [_row(c.baseline, "baseline", "1.00x")]
    for v in c.rows:
        differs = ", ".join(d.words("other") for d in v.diffs) or "nothing recorded"
        rows.append(_row(v.run, differs, ratio_cell(v)))
    return Table(list(TABLE_HEADERS), rows, list(TABLE_NUMERIC))


# ---------------------------------------------------------------- the phase that moved (diagnose results)

_DIAGNOSIS_MATCH = ("model", "dataset", "batch_size", "precision", "channels_last", "compile", "mode", "image_size")
_PHASE_WORDS = {"data": "waiting for data", "copy": "the copy to the device", "forward": "the forward pass",
                "backward": "the backward pass", "optimizer": "the optimizer step"}


def diagnosis_of(run: RunResult, diagnoses: Sequence[dict]) -> dict | None:
    """The newest diagnosis of this run's work on its kind of device in its environment (torch, machine): its
    device's entry, or None."""
    found = None
    for d in diagnoses:
        cfg, env = d.get("config"), d.get("env")
        if not isinstance(cfg, dict) or not isinstance(env, dict):
            continue
        if any(cfg.get(k) != getattr(run.config, k, None) for k in _DIAGNOSIS_MATCH):
            continue
        if env.get("torch") != run.env.get("torch") or env.get("hostname") != run.env.get("hostname"):
            continue
        for dev in d.get("devices") or []:
            if isinstance(dev, dict) and dev.get("kind") == device_kind(run.config.device) and "error" not in dev:
                found = dev
    return found


def phase_moved(base: RunResult, other: RunResult, diagnoses: Sequence[dict]) -> str:
    """"The backward pass moved most: 3.41 → 4.12 ms per step (diagnose, measured)." where both runs have a
    diagnosis; "" otherwise."""
    if not diagnoses:
        return ""
    a, b = diagnosis_of(base, diagnoses), diagnosis_of(other, diagnoses)
    if a is None or b is None or a is b:
        return ""
    from .bottleneck import PHASES

    moves = [(abs(b[f"{p}_ms"] - a[f"{p}_ms"]), p) for p in PHASES
             if is_finite(a.get(f"{p}_ms")) and is_finite(b.get(f"{p}_ms"))]
    if not moves:
        return ""
    _, phase = max(moves)
    x, y = a[f"{phase}_ms"], b[f"{phase}_ms"]
    return (f"Of the step's phases, {_PHASE_WORDS[phase]} moved most: {x:,.2f} \u2192 {y:,.2f} ms per step "
            f"(the two runs' diagnoses, measured).")
