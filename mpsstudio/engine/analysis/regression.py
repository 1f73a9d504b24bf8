"""A regression check for scripts (`mpsstudio bench --baseline RUN|FILE --fail-over 5%`): each device's new runs
against the baseline's runs of the same work on the same kind of device; a regression is slower by more than the
threshold *and* an interval wholly below 1.0 (within the noise is never one).

The interval is the runs' own, between processes, as pyperf's: the windows of one process cannot see what differs
between two processes or two minutes (which core, the memory's layout, what else runs), so each run counts once, by
its median, and the ratio's interval comes from how those medians vary (`between`: a t interval of the difference of
log throughputs, the spread pooled over both sides). With a single run on each side the check cannot tell. A run the
stability check calls noisy never yields "a regression" nor "not slower": the check says it cannot tell, and why.
No torch here."""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass, field

from ..basics.config import RunConfig
from ..basics.formatting import fmt_timestamp, instant
from ..basics.results import RunResult
from .contrast import Versus, device_kind, setup_words, usable_run, versus
from .repeat import slow_mode

# What a regression check's baseline must share with a new run: the work itself (what differs beyond is named)
WORKLOAD = ("model", "dataset", "mode", "batch_size", "precision", "channels_last", "compile", "input_shape",
            "num_classes", "image_size", "accumulate", "resident", "tf32", "tf32_conv", "options", "gpus", "torchrun")

def workload(c: RunConfig, device_too: bool = True) -> tuple:
    """What a baseline must share with a new run: the work (WORKLOAD) and the kind of device. A model file or a
    script is its file name, a model folder its folder's (a baseline shared from another checkout, or written without
    paths by bench --json, names it so)."""
    def value(name: str):
        v = getattr(c, name)
        if name == "model" and isinstance(v, str) and (v.lower().endswith(".py") or "/" in v or "\\" in v):
            return v.replace("\\", "/").rstrip("/").rsplit("/", 1)[-1]  # a file's or a model folder's name
        return v
    key = tuple((name, repr(value(name))) for name in WORKLOAD)
    return (*key, device_kind(c.device)) if device_too else key


def baseline_for(baselines: Sequence[RunResult], config: RunConfig) -> RunResult | None:
    """The newest finished baseline run of the same work on the same kind of device, or None."""
    same = [r for r in baselines if usable_run(r) and workload(r.config) == workload(config)]
    return max(same, key=lambda r: instant(r.created_at)) if same else None


def mismatch(baselines: Sequence[RunResult], configs: Sequence[RunConfig]) -> str:
    """"" when some config has a baseline, else the sentence saying why none does (bad input)."""
    usable = [r for r in baselines if usable_run(r)]
    if not usable:
        return "The baseline holds no finished run with a throughput to compare with; choose another."
    if any(baseline_for(usable, c) is not None for c in configs):
        return ""
    b = max(usable, key=lambda r: instant(r.created_at))
    if any(workload(b.config, False) == workload(c, False) for c in configs):
        return (f"The baseline ran on {b.config.device} and this bench on {', '.join(c.device for c in configs)}: "
                "choose a baseline of the same kind of device.")
    return (f"The baseline is another setup ({setup_words(b.config)}) than this bench ({setup_words(configs[0])}); "
            "give the same model, dataset, batch, precision and options, or another baseline.")


# two-sided 95 % t quantiles by degrees of freedom (more: 1.96)
_T95 = {1: 12.71, 2: 4.30, 3: 3.18, 4: 2.78, 5: 2.57, 6: 2.45, 7: 2.36, 8: 2.31, 9: 2.26, 10: 2.23, 12: 2.18,
        15: 2.13, 20: 2.09, 30: 2.04}
DEFAULT_FAIL_OVER = 0.05  # --fail-over: a slowdown this large (and beyond the noise) is a regression
WIDE_INTERVAL = 4.0  # an interval between processes wider than this (high / low) says nothing: cannot tell
CANNOT_TELL = 3  # the exit code of a check that cannot tell (cli/common.EXIT_CANNOT_TELL says it the same)
DEFAULT_PROCESSES = 3  # new runs per device a regression check makes by default (`bench --baseline`, no --repeat)


def _t95(df: int) -> float:
    return next((t for d, t in sorted(_T95.items()) if df <= d), 1.96)


def between(new: Sequence[float], base: Sequence[float]) -> tuple[float, float, float] | None:
    """(ratio, low, high) of the new runs' throughput over the baseline's, each run counted once by its median: the
    ratio of geometric means with a 95 % t interval whose spread is pooled over both sides' runs; None with fewer
    than three runs in all or a single run on each side (no spread to judge by)."""
    new, base = [v for v in new if v > 0], [v for v in base if v > 0]
    if not new or not base or len(new) + len(base) < 3:
        return None
    a, b = [math.log(v) for v in new], [math.log(v) for v in base]
    sides = [s for s in (a, b) if len(s) > 1]
    df = sum(len(s) - 1 for s in sides)
    if df < 1:
        return None
    pooled = math.sqrt(sum(sum((x - statistics.fmean(s)) ** 2 for x in s) for s in sides) / df)
    diff = statistics.fmean(a) - statistics.fmean(b)
    half = _t95(df) * pooled * math.sqrt(1 / len(a) + 1 / len(b))
    return math.exp(diff), math.exp(diff - half), math.exp(diff + half)


@dataclass
class Regression:
    """One device's new runs against its baseline's: slower beyond the threshold and the interval says so."""

    versus: Versus  # the newest new run against the newest baseline run (their windows, their differences)
    baseline: RunResult
    threshold: float  # 0.05 for 5 %
    runs: list[RunResult] = field(default_factory=list)  # every new run of this device (one a process)
    bases: list[RunResult] = field(default_factory=list)  # every baseline run of the same work

    @property
    def processes(self) -> tuple[float, float, float] | None:
        """The ratio with its interval between processes (`between`), or None."""
        return between([r.summary.rate for r in self.runs],
                       [r.summary.rate for r in self.bases])

    @property
    def noisy(self) -> str:
        """Why runs of either side are not to be trusted, naming each ("" when none is noisy)."""
        said = []
        for side, runs in (("new", self.runs), ("baseline", self.bases)):
            noisy = [r for r in runs if r.summary.stability == "noisy"]
            if noisy:
                reason = str(noisy[0].summary.stability_reason or "its windows vary beyond the limit").rstrip(".")
                ids = ", ".join(r.id[:8] for r in noisy)
                said.append(f"the {side} run{'s' if len(noisy) > 1 else ''} {ids} {'were' if len(noisy) > 1 else 'was'} "
                            f"noisy ({reason}{'; and others' if len(noisy) > 1 else ''})")
        return " and ".join(said)

    @property
    def disturbed(self) -> str:
        """What disturbed the machine during a run of either side (other programs' load, a throttled or low-power
        Mac: stability.host_causes), "" when nothing did: then no verdict is given, whatever was measured."""
        from .stability import host_causes

        for side, runs in (("new", self.runs), ("baseline", self.bases)):
            for r in runs:
                causes = host_causes(r.env if isinstance(r.env, dict) else {})
                if causes:
                    return f"the {side} run {r.id[:8]} was disturbed ({causes[0]})"
        return ""

    @property
    def too_wide(self) -> bool:
        """An interval between processes spanning more than WIDE_INTERVAL times: it says nothing either way."""
        _, low, high = self._interval()
        return low is not None and high is not None and low > 0 and high / low > WIDE_INTERVAL

    def _interval(self) -> tuple[float | None, float | None, float | None]:
        found = self.processes
        if found is not None:
            return found
        v = self.versus
        return v.ratio, None, None  # one run a side: the windows of one process cannot say run-to-run noise

    @property
    def clear_regression(self) -> bool:
        """The whole interval between processes below 1 - threshold: slower beyond the threshold however noisy the
        runs' own windows were (their noise is in the spread between processes already)."""
        ratio, low, high = self._interval()
        return ratio is not None and high is not None and high < 1 - self.threshold

    @property
    def undecided(self) -> bool:
        """The check cannot tell: a disturbed machine, an interval too wide to say anything, no interval between
        processes (one run a side), or noisy runs whose interval does not clear the threshold."""
        ratio, low, high = self._interval()
        if ratio is None:
            return False
        if self.disturbed or low is None or high is None or self.too_wide:
            return True
        return bool(self.noisy) and not self.clear_regression

    @property
    def regressed(self) -> bool:
        ratio, low, high = self._interval()
        return (not self.undecided and ratio is not None and high is not None and ratio < 1 - self.threshold
                and high < 1.0)

    def sentence(self) -> str:
        """What was measured against the baseline and the verdict; where the check cannot tell, why and what to run;
        then either side's runs that fell in two modes (analysis/repeat.split)."""
        device = self.versus.run.config.device
        modes = [slow_mode([r.summary.rate for r in runs], f"{side} runs on {device}")
                 for side, runs in (("new", self.runs), ("baseline", self.bases))]
        return self._verdict() + "".join(f" {m[0].upper()}{m[1:]}." for m in modes if m)

    def _verdict(self) -> str:
        v, b = self.versus, self.baseline
        differs = ", ".join(d.words("other") for d in v.diffs)
        ratio, low, high = self._interval()
        device = v.run.config.device
        if ratio is None:
            return f"{device}: not compared (no throughput on one side)."
        if low is not None and high is not None:
            spread = ("its spread measured between the new side's processes (the baseline has one run)"
                      if len(self.bases) == 1 else "the spread between processes, pooled over both sides")
            where = (f"{len(self.runs)} new run{'s' if len(self.runs) != 1 else ''} against {len(self.bases)} "
                     f"baseline run{'s' if len(self.bases) != 1 else ''}; 95 % interval from {spread}")
            words = f"{ratio:.2f}x the baseline's throughput [{low:.2f}x-{high:.2f}x]"
        else:
            where = f"one run a side: baseline {b.id[:8]} of {fmt_timestamp(b.created_at)}"
            words = f"{ratio:.2f}x the baseline's throughput"
        head = (f"{device}: measured {words} ({where})" + (f"; the runs differ in {differs}" if differs else ""))
        limit = f"{self.threshold * 100:g} %"
        again = " Record the baseline again too." if "the baseline run" in self.noisy + self.disturbed else ""
        if self.disturbed:
            return (f"{head}. The check cannot tell: {self.disturbed}. Run it again on a quiet machine (exit "
                    f"{CANNOT_TELL}).{again}")
        if self.too_wide and low is not None and high is not None:
            return (f"{head}. The check cannot tell: the interval spans {low:.2f}x to {high:.2f}x, too wide to say "
                    f"anything (the processes' throughputs vary that much). Measure more processes (--repeat 5) on a "
                    f"quieter machine (exit {CANNOT_TELL}).")
        if self.noisy and not self.clear_regression:
            return (f"{head}. The check cannot tell: {self.noisy}. Run it again on a quieter machine (exit "
                    f"{CANNOT_TELL}).{again}")
        if low is None or high is None:
            return (f"{head}. The check cannot tell from one run a side: a single process cannot show how much runs "
                    f"vary. Measure in several processes (--repeat {DEFAULT_PROCESSES}, the default with --baseline) "
                    f"or give the baseline several runs (exit {CANNOT_TELL}).")
        if self.regressed:
            return (f"{head}: slower by more than {limit} and beyond the noise between processes: a regression" +
                    (f" (though {self.noisy})." if self.noisy else "."))
        if low <= 1.0 <= high:
            return f"{head}: within the noise, not a regression."
        if ratio < 1:
            return f"{head}: slower, but by less than {limit} (--fail-over): not a regression."
        return f"{head}: not slower."


def regressions(baselines: Sequence[RunResult], results: Sequence[RunResult], threshold: float) -> list[Regression]:
    """Each device's finished runs (one a process) against its baseline's runs of the same work."""
    by_device: dict[str, list[RunResult]] = {}
    for r in sorted(results, key=lambda r: instant(r.created_at)):
        if usable_run(r):
            by_device.setdefault(r.config.device, []).append(r)
    out = []
    for runs in by_device.values():
        r = runs[-1]
        base = baseline_for(baselines, r.config)
        if base is not None:
            bases = [b for b in baselines if usable_run(b) and workload(b.config) == workload(r.config)]
            out.append(Regression(versus(base, r), base, threshold, runs, bases))
    return out
