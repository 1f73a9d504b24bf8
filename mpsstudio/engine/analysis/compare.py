"""Comparisons: runs whose configs differ only by device, each device's speedup over its own machine's CPU,
with an interval, and the runs of a repeat (`--repeat N`) paired round by round.

Rules (docs/architecture.md, "Comparisons"):
- A group is every finished run of one config but the device, from any machine; the runs of one repeat set
  form a group of their own.
- Each machine's runs are divided by that machine's CPU run (never another machine's): a run from a machine
  without a CPU run in the group has no speedup. Ratios across machines are listed apart, labelled as such.
- One run per device and machine: the newest stands for it; the interval is a bootstrap (BOOTSTRAP_SAMPLES
  resamples, 95 %) of the ratio of the two runs' median window throughputs. It covers window-to-window noise
  inside these two runs, not run-to-run variation: a repeat measures that.
- A repeat set: each round's ratio against the CPU run of the same round (devices ran A B B A ... so drift hits
  both); the speedup is the median of those paired ratios, the interval their range (from 9 rounds the 95 %
  interval of the median from order statistics: repeat.median_interval).
- An interval that contains 1.0 is "no clear difference".
"""

from __future__ import annotations

import math
import statistics
import zlib
from collections.abc import Iterable
from dataclasses import dataclass, field

from ..basics.formatting import instant, is_finite, one_line, printable
from ..basics.results import RunResult
from .repeat import median_interval

BOOTSTRAP_SAMPLES = 2000
BOOTSTRAP_CELLS = 500_000  # resamples x windows kept under this: ~10-30 ms per comparison (docs/benchmarks.md)
CONFIDENCE = 0.95


@dataclass
class Entry:
    """One device of one machine in a comparison: its run (or the rounds of a repeat) and its speedup."""

    device: str
    machine: str
    runs: list[RunResult]  # oldest first; the newest stands for the entry
    local: bool = True
    baseline: RunResult | None = None  # this machine's CPU run (the newest; in a repeat, the last round's)
    speedup: float | None = None
    round_speedups: dict[str, float] = field(default_factory=dict)  # repeat: run id -> its round's ratio
    machine_id: str = ""  # label and host name (compare.machine_id); `machine` is what a person reads
    # The interval (low, high) and how it was made: "bootstrap" (over windows), "paired" (over repeat rounds),
    # "baseline", or "" (none). A bootstrap is computed when first asked for (`_pending`): a history of
    # thousands of comparisons opens without resampling the windows of comparisons nobody looks at.
    _low: float | None = field(default=None, repr=False)
    _high: float | None = field(default=None, repr=False)
    _method: str = field(default="", repr=False)
    _pending: tuple | None = field(default=None, repr=False, compare=False)

    def _resolve(self) -> None:
        if self._pending is not None:
            a, b, seed = self._pending
            self._pending = None
            interval = bootstrap_ratio(a, b, seed=seed)
            if interval is not None:
                self._low, self._high = interval
                self._method = "bootstrap"

    @property
    def low(self) -> float | None:
        self._resolve()
        return self._low

    @property
    def high(self) -> float | None:
        self._resolve()
        return self._high

    @property
    def method(self) -> str:
        self._resolve()
        return self._method

    @property
    def run(self) -> RunResult:
        return self.runs[-1]

    @property
    def samples_per_s(self) -> float | None:
        values = [v for v in (r.summary.samples_per_s for r in self.runs) if is_finite(v) and v > 0]
        return statistics.median(values) if values else None

    @property
    def j_per_sample(self) -> float | None:
        """Joules per sample of the entry's run (the newest round of a repeat), None when not measured."""
        v = self.run.summary.j_per_sample
        return v if is_finite(v) and v > 0 else None

    @property
    def energy_ratio(self) -> float | None:
        """How many times less energy per sample than this machine's CPU run used (CPU J/sample / this one's);
        None unless both were measured."""
        if self.baseline is None or self.j_per_sample is None:
            return None
        cpu = self.baseline.summary.j_per_sample
        return cpu / self.j_per_sample if is_finite(cpu) and cpu > 0 else None

    @property
    def noisy(self) -> bool:
        return any(r.summary.stability == "noisy" for r in self.runs)

    @property
    def is_baseline(self) -> bool:
        return self.method == "baseline"

    def unclear(self) -> bool:
        """The interval contains 1.0: no clear difference from the CPU."""
        return self.low is not None and self.high is not None and self.low <= 1.0 <= self.high


@dataclass
class CrossRatio:
    """Two accelerators on different machines: a/b throughput, never a speedup over a CPU."""

    a: Entry
    b: Entry
    ratio: float

    def label(self) -> str:
        return f"{describe_entry(self.a)} vs {describe_entry(self.b)}: {self.ratio:.2f}x (different machines)"


@dataclass
class Comparison:
    """One group: the same config but the device. `entries` hold one device of one machine each."""

    entries: list[Entry]
    repeat: dict | None = None  # {"set": id, "rounds": N} for the runs of one repeat
    cross: list[CrossRatio] = field(default_factory=list)

    @property
    def runs(self) -> list[RunResult]:
        """The run standing for each entry, in entry order."""
        return [e.run for e in self.entries]

    @property
    def all_runs(self) -> list[RunResult]:
        return [r for e in self.entries for r in e.runs]

    @property
    def config(self):
        return self.entries[0].run.config

    @property
    def baseline(self) -> RunResult | None:
        """The CPU run of the first machine (this one's when it has local runs)."""
        return next((e.baseline for e in self.entries if e.baseline is not None), None)

    @property
    def speedups(self) -> dict[str, float | None]:
        """Run id -> speedup vs its own machine's CPU (a repeat round: its round's ratio)."""
        out: dict[str, float | None] = {}
        for e in self.entries:
            for r in e.runs:
                out[r.id] = e.round_speedups.get(r.id, e.speedup)
        return out

    def entry_of(self, run: RunResult) -> Entry | None:
        return next((e for e in self.entries if any(r.id == run.id for r in e.runs)), None)

    def machines(self) -> list[str]:
        return list(dict.fromkeys(e.machine for e in self.entries))

    def paired_rounds(self) -> int:
        return max((len(e.round_speedups) for e in self.entries), default=0)

    def title(self, sep: str = ", ") -> str:
        """"resnet18 on cifar10, batch 128, fp32" (", inference" for inference runs)."""
        c = self.config
        parts = [c.work_words, c.batch_words, c.precision_words]
        if c.mode != "train":
            parts.append(c.mode)
        if self.repeat and self.paired_rounds() >= 2:
            parts.append(f"{self.paired_rounds()} rounds")
        return sep.join(parts)


def interval_name(method: str) -> str | None:
    return {"bootstrap": f"{CONFIDENCE:.0%} bootstrap over measurement windows",
            "paired": "range of the paired ratios of the repeat rounds (from 9 rounds: their median's 95 % "
                      "interval)"}.get(method)


DEVICE_NAMES = {"mps": "Apple GPU (mps)", "cpu": "the CPU"}


def device_name(device: str) -> str:
    """"Apple GPU (mps)", "CUDA GPU (cuda:0)", "the CPU"."""
    if device in DEVICE_NAMES:
        return DEVICE_NAMES[device]
    return f"CUDA GPU ({device})" if device.startswith("cuda") else device


def describe_entry(e: Entry) -> str:
    """"H100 80GB HBM3 on gpu-07 cuda" / "this machine's mps"."""
    if e.local:
        return f"this {'Mac' if e.run.env.get('chip') else 'machine'}'s {e.device}"
    return f"{short_machine(e.machine)} {e.device}"


def short_machine(label: str) -> str:
    """"NVIDIA H100 80GB HBM3 on gpu-07" -> "H100 80GB HBM3 on gpu-07"; "Apple M2 Pro, macOS 14.5" -> "Apple M2 Pro"."""
    label = label.removeprefix("NVIDIA ")
    if ", macOS" in label:
        label = label.split(", macOS")[0]
    return one_line(printable(label), 60)


def speedup(run: RunResult, baseline: RunResult | None) -> float | None:
    """run throughput / CPU throughput; None when either is missing."""
    if baseline is None:
        return None
    a, b = run.summary.samples_per_s, baseline.summary.samples_per_s
    if not is_finite(a) or not is_finite(b) or a <= 0 or b <= 0:
        return None
    return a / b


def machine_id(r: RunResult) -> str:
    """Which computer a run came from: its label and its host name (two Macs of one model share a label)."""
    host = r.env.get("hostname")
    return f"{r.machine}\n{host if isinstance(host, str) else ''}"


def _round_of(r: RunResult) -> int:
    """The round of a run of a sound repeat set (0 for any other run)."""
    return int((_repeat_of(r) or {}).get("round", 0))


def _repeat_of(r: RunResult) -> dict | None:
    """The run's repeat tag when it is a sound one (round 1..rounds, rounds 2..MAX_ROUNDS), else None."""
    from .repeat import MAX_ROUNDS

    rep = r.env.get("repeat")
    if not isinstance(rep, dict) or not isinstance(rep.get("set"), str) or not rep["set"]:
        return None
    k, n = rep.get("round"), rep.get("rounds")
    if not isinstance(k, int) or not isinstance(n, int) or isinstance(k, bool) or isinstance(n, bool) or \
            not (2 <= n <= MAX_ROUNDS and 1 <= k <= n):
        return None
    return rep


def compare(results: list[RunResult]) -> list[Comparison]:
    """Group finished runs by config-without-device (and repeat set); groups need two or more entries."""
    groups: dict[tuple, dict[tuple, list[RunResult]]] = {}
    for r in sorted(results, key=lambda r: instant(r.created_at)):
        if r.status != "finished" or not is_finite(r.summary.samples_per_s) or r.summary.samples_per_s <= 0:
            continue
        rep = _repeat_of(r)
        key = (r.config.comparison_key(), rep["set"] if rep else None)
        groups.setdefault(key, {}).setdefault((r.config.device, machine_id(r)), []).append(r)
    out = []
    for (_, repeat_set), members in groups.items():
        if len(members) < 2:
            continue
        labels: dict[str, set] = {}
        for _, mid in members:
            labels.setdefault(mid.split("\n")[0], set()).add(mid)
        entries = []
        for (device, mid), runs in members.items():
            if repeat_set is None:
                runs = runs[-1:]  # the newest stands for its device
            else:  # one run per round (the newest), in round order
                runs = sorted({_round_of(r): r for r in runs}.values(), key=_round_of)
            label, host = mid.split("\n", 1)
            if len(labels[label]) > 1:  # two computers with one label: the host name tells them apart
                label = f"{label} ({host or 'unknown host'})"
            local = any(r.origin == "local" for r in runs)
            entries.append(Entry(device, label, runs, local=local, machine_id=mid))
        home = next((e.machine_id for e in entries if e.local), entries[0].machine_id)
        order = {m: i for i, m in enumerate(dict.fromkeys([home, *sorted(e.machine_id for e in entries)]))}
        entries.sort(key=lambda e: (order[e.machine_id], e.device != "cpu", e.device))
        rounds = max(len(e.runs) for e in entries)
        comparison = Comparison(entries, {"set": repeat_set, "rounds": rounds} if repeat_set else None)
        _fill_speedups(comparison)
        comparison.cross = _cross_ratios(entries)
        out.append(comparison)
    return out


def _fill_speedups(c: Comparison) -> None:
    cpus = {e.machine_id: e for e in c.entries if e.device == "cpu"}
    for e in c.entries:
        cpu = cpus.get(e.machine_id)
        if cpu is None:
            continue
        e.baseline = cpu.run
        if e is cpu:
            e.speedup, e._method = 1.0, "baseline"
            continue
        if c.repeat and len(e.runs) > 1:
            by_round = {_round_of(r): r for r in cpu.runs}
            for r in e.runs:
                ratio = speedup(r, by_round.get(_round_of(r)))
                if ratio is not None:
                    e.round_speedups[r.id] = ratio
            ratios = list(e.round_speedups.values())
            if len(ratios) >= 2:
                e.speedup, e._low, e._high = median_interval(ratios) or (None, None, None)
                e._method = "paired"
                continue
            e.round_speedups = {}  # fewer than two paired rounds: a single pair, with its window bootstrap
        e.speedup = speedup(e.run, cpu.run)
        if e.speedup is not None:  # resampled when first asked for (Entry.low, .high, .method)
            e._pending = (run_rates(e.run), run_rates(cpu.run), pair_seed(e.run.id, cpu.run.id))


def _cross_ratios(entries: list[Entry]) -> list[CrossRatio]:
    """Each accelerator of another machine against each accelerator of the first machine."""
    accel = [e for e in entries if e.device != "cpu" and e.samples_per_s]
    if not accel:
        return []
    home = entries[0].machine_id
    mine = [e for e in accel if e.machine_id == home]
    return [CrossRatio(o, m, (o.samples_per_s or 0.0) / (m.samples_per_s or 1.0))  # (both chosen for their figure)
            for o in accel if o.machine_id != home for m in mine]


def run_rates(run: RunResult) -> list[float]:
    if run.window_rates is not None:
        return list(run.window_rates)
    return [w.samples_per_s for w in run.windows if is_finite(w.samples_per_s) and w.samples_per_s > 0]


def pair_seed(*ids: str) -> int:
    return zlib.crc32("/".join(ids).encode())


_CACHE: dict[tuple, tuple[float, float] | None] = {}


def bootstrap_ratio(a: list[float], b: list[float], seed: int = 0) -> tuple[float, float] | None:
    """95 % percentile-bootstrap interval of median(a) / median(b); None with fewer than 2 values on a side.

    Deterministic for a seed, and cached: tables redraw often."""
    if len(a) < 2 or len(b) < 2:
        return None
    key = (seed, len(a), len(b), a[0], b[0], a[-1], b[-1])
    if key in _CACHE:
        return _CACHE[key]
    import numpy as np

    rng = np.random.default_rng(abs(int(seed)))
    n = max(200, min(BOOTSTRAP_SAMPLES, BOOTSTRAP_CELLS // max(len(a), len(b))))
    xa, xb = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    ma = np.median(xa[rng.integers(0, len(xa), (n, len(xa)))], axis=1)
    mb = np.median(xb[rng.integers(0, len(xb), (n, len(xb)))], axis=1)
    ratios = ma / mb
    tail = (1 - CONFIDENCE) / 2
    low, high = (float(v) for v in np.quantile(ratios, [tail, 1 - tail]))
    result = (low, high) if math.isfinite(low) and math.isfinite(high) else None
    if len(_CACHE) > 10_000:
        _CACHE.clear()
    _CACHE[key] = result
    return result


class SpeedupMap(dict):
    """Run id -> speedup vs its own machine's CPU; `entries` maps run id -> its Entry (interval, stability)."""

    def __init__(self, comparisons: Iterable[Comparison] = ()):
        comparisons = list(comparisons)
        super().__init__((run_id, value) for c in comparisons for run_id, value in c.speedups.items())
        self.entries: dict[str, Entry] = {r.id: e for c in comparisons for e in c.entries for r in e.runs}


def speedup_map(comparisons: Iterable[Comparison]) -> SpeedupMap:
    """Run id -> speedup vs its own machine's CPU, over all the given comparisons (with each run's entry)."""
    return SpeedupMap(comparisons)
