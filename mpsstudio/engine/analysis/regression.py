"""A regression check for scripts (`mpsstudio bench --baseline RUN|FILE --fail-over 5%`): each device's new run
against the newest baseline run of the same work on the same kind of device; a regression is slower by more than
the threshold *and* an interval wholly below 1.0 (within the noise is never one). No torch here."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from ..basics.config import RunConfig
from ..basics.formatting import fmt_timestamp
from ..basics.results import RunResult
from .contrast import Versus, _setup_words, _usable, device_kind, ratio_words, versus

# What a regression check's baseline must share with a new run: the work itself (what differs beyond is named)
WORKLOAD = ("model", "dataset", "mode", "batch_size", "precision", "channels_last", "compile", "input_shape",
            "num_classes", "image_size", "accumulate", "resident", "tf32", "options", "gpus", "torchrun")

def workload(c: RunConfig, device_too: bool = True) -> tuple:
    """What a baseline must share with a new run: the work (WORKLOAD) and the kind of device."""
    key = tuple((name, repr(getattr(c, name))) for name in WORKLOAD)
    return (*key, device_kind(c.device)) if device_too else key


def baseline_for(baselines: Sequence[RunResult], config: RunConfig) -> RunResult | None:
    """The newest finished baseline run of the same work on the same kind of device, or None."""
    same = [r for r in baselines if _usable(r) and workload(r.config) == workload(config)]
    return max(same, key=lambda r: r.created_at) if same else None


def mismatch(baselines: Sequence[RunResult], configs: Sequence[RunConfig]) -> str:
    """"" when some config has a baseline, else the sentence saying why none does (bad input)."""
    usable = [r for r in baselines if _usable(r)]
    if not usable:
        return "The baseline holds no finished run with a throughput to compare with; choose another."
    if any(baseline_for(usable, c) is not None for c in configs):
        return ""
    b = max(usable, key=lambda r: r.created_at)
    if any(workload(b.config, False) == workload(c, False) for c in configs):
        return (f"The baseline ran on {b.config.device} and this bench on {', '.join(c.device for c in configs)}: "
                "choose a baseline of the same kind of device.")
    return (f"The baseline is another setup ({_setup_words(b.config)}) than this bench ({_setup_words(configs[0])}); "
            "give the same model, dataset, batch, precision and options, or another baseline.")


@dataclass
class Regression:
    """One device's new run against its baseline: slower beyond the threshold and the interval says so."""

    versus: Versus
    baseline: RunResult
    threshold: float  # 0.05 for 5 %

    @property
    def undecided(self) -> bool:
        """No interval on one side (too few measurement windows): the check cannot tell."""
        return self.versus.ratio is not None and (self.versus.low is None or self.versus.high is None)

    @property
    def regressed(self) -> bool:
        v = self.versus
        return (v.ratio is not None and v.high is not None and v.ratio < 1 - self.threshold and v.high < 1.0)

    def sentence(self) -> str:
        v, b = self.versus, self.baseline
        differs = ", ".join(d.words("other") for d in v.diffs) or "nothing MPS Studio records"
        head = (f"{v.run.config.device}: {ratio_words(v)} than the baseline (run {b.id[:8]}, "
                f"{fmt_timestamp(b.created_at)}); differs in {differs}")
        limit = f"{self.threshold * 100:g} %"
        if self.regressed:
            return f"{head}: slower by more than {limit} and beyond the noise: a regression."
        if v.ratio is None:
            return f"{head}: not compared."
        if self.undecided:
            return (f"{head}: the check cannot tell (fewer than two measurement windows on one side); give the bench "
                    "and the baseline more --steps.")
        if v.unclear():
            return f"{head}: within the noise, not a regression."
        if v.ratio < 1:
            return f"{head}: slower, but by less than {limit} (--fail-over): not a regression."
        return f"{head}: not slower."


def regressions(baselines: Sequence[RunResult], results: Sequence[RunResult], threshold: float) -> list[Regression]:
    """Each device's newest finished run against its baseline."""
    newest: dict[str, RunResult] = {}
    for r in sorted(results, key=lambda r: r.created_at):
        if _usable(r):
            newest[r.config.device] = r
    out = []
    for r in newest.values():
        base = baseline_for(baselines, r.config)
        if base is not None:
            out.append(Regression(versus(base, r), base, threshold))
    return out
