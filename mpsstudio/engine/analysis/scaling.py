"""Scaling: one setup on 1, 2, ... N GPUs of one machine (runs of `--gpus 1,2,4`), measured and said.

For each number of GPUs: the total throughput (median over its steady windows, the IQR beside it), per GPU,
the speedup over one GPU with the 95 % window-bootstrap interval every comparison uses, the scaling efficiency
(speedup / N, its interval the speedup's / N), every rank's peak memory, and the share of a step the gradient
all-reduce takes (ranks.py: spans with and without it under DDP's no_sync, alternated on the same ranks).
Runs of the same setup on other devices or machines (a Mac's MPS) stand beside it, each labelled with its machine.

Steady state: each number of GPUs is measured from the window its throughput settled at (stability.settled_from;
the windows before count as warm-up, and the table says from which step); one whose windows never settled (they
still rose or fell at its end), or whose steady windows spread beyond the noise limit, makes the verdict "too short
to tell", with the steps to ask for.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from ..basics.config import key_names
from ..basics.formatting import fmt_beyond, fmt_bytes, fmt_spread
from ..basics.frameworks import run_label
from ..basics.results import RunResult
from .compare import run_rates, pair_seed, bootstrap_ratio, short_machine
from .stability import SPREAD_LIMIT, drift, settled_from

CPU_RANKS = " CPU ranks share this CPU's cores: this tries the distributed path; it is no speedup to expect."
SUPERLINEAR = 1.05  # an efficiency whose interval lies above this: said to be suspect
LAUNCH_BOUND = 1.10  # a speedup whose interval lies below this: "a second GPU gains nothing"
SPREAD_KEYS = ("gpus", "torchrun")


def world_of(r: RunResult) -> int:
    """The ranks a run ran on in all (its GPUs, on every machine)."""
    world = r.summary.ranks_world
    if isinstance(world, int) and not isinstance(world, bool) and world >= 1:
        return world
    gpus = getattr(r.config, "gpus", 1)
    return gpus if isinstance(gpus, int) and not isinstance(gpus, bool) and gpus >= 1 else 1


def device_label(r: RunResult) -> str:
    """"cuda", or "cuda \u00d74" for a run on 4 GPUs (ranks in all); an MLX run "MLX \u00b7 gpu"."""
    n = world_of(r)
    device = run_label(r.config.framework, r.config.device, quantize=r.config.options.get("quantize"))
    return device if n == 1 else f"{device} \u00d7{n}"


def setup_key(r: RunResult) -> tuple:
    """The setup without how many GPUs ran it (what a scaling groups by)."""
    return tuple((name, repr(getattr(r.config, name))) for name in key_names() if name not in SPREAD_KEYS)


def _usable(r: RunResult) -> bool:
    return r.status == "finished" and bool(r.summary.samples_per_s) and len(run_rates(r)) >= 1


@dataclass
class Point:
    """One number of GPUs: its newest run and what was measured."""

    gpus: int
    run: RunResult
    speedup: float | None = None  # over one GPU
    low: float | None = None  # the speedup's 95 % interval
    high: float | None = None
    steady_from: int | None = 0  # the first steady window (stability.settled_from); None: never steady

    def __post_init__(self) -> None:
        rates = run_rates(self.run)
        self.steady_from = settled_from(rates, pair_seed(self.run.id)) if len(rates) >= 2 else 0

    @property
    def rates(self) -> list[float]:
        """The windows measured in steady state (all of them where the run never settled: said apart)."""
        rates = run_rates(self.run)
        return rates[self.steady_from:] if self.steady_from else rates

    @property
    def steady(self) -> bool:
        return self.steady_from is not None

    @property
    def settled_at_step(self) -> int | None:
        """The steps measured before the steady windows (None when they start the run)."""
        if not self.steady_from:
            return None
        return sum(w.steps or 0 for w in self.run.windows[:self.steady_from]) or None

    @property
    def samples_per_s(self) -> float:
        if self.steady_from:
            import statistics

            return float(statistics.median(self.rates))
        return self.run.summary.rate

    @property
    def per_gpu(self) -> float:
        return self.samples_per_s / self.gpus

    @property
    def iqr(self) -> tuple[float | None, float | None]:
        if self.steady_from:
            from .summary import quartiles

            q1, _, q3 = quartiles(self.rates)
            return q1, q3
        return self.run.summary.samples_per_s_q1, self.run.summary.samples_per_s_q3

    @property
    def spread(self) -> float | None:
        """The steady windows' IQR over their median (the one ± rule is half of it); None with too few windows."""
        rates = self.rates
        if len(rates) < 4:
            return None
        from .summary import quartiles

        q1, med, q3 = quartiles(rates)
        return (q3 - q1) / med if med > 0 else None

    @property
    def noisy(self) -> bool:
        """Steady windows spread beyond the noise limit (stability.SPREAD_LIMIT, as a run's noisy flag): a median
        of them is no steady figure to divide by another (the lent H200s: a 60-step 2-GPU run at ±18 % read 71 %
        efficiency where the bare loop's was 93 %)."""
        found = self.spread
        return found is not None and found > SPREAD_LIMIT

    @property
    def trusted(self) -> bool:
        return self.steady and not self.noisy

    def unsteady_words(self) -> str:
        """"its windows fell from 7,400 to 5,600 samples/s [...] and had not settled at its end" ("" when steady)."""
        if self.steady:
            found = self.spread
            return (f"its windows spread {fmt_beyond(found / 2, SPREAD_LIMIT / 2)} (half the IQR over the median, "
                    f"beyond the {fmt_spread(SPREAD_LIMIT / 2)} limit)" if self.noisy and found is not None else "")
        rates = run_rates(self.run)
        drifted = drift(rates, pair_seed(self.run.id))
        third = max(1, len(rates) // 3)
        import statistics

        first, last = statistics.median(rates[:third]), statistics.median(rates[-third:])
        how = "fell" if last < first else "rose"
        return (f"its windows {how} from {_num(first)} to {_num(last)} samples/s during the run"
                + (f" ({drifted[0]:.2f}x [{drifted[1]:.2f}-{drifted[2]:.2f}])" if drifted else "")
                + " and had not settled")

    def steps_to_ask(self) -> int:
        """An estimate of the measured steps a run would need to settle and then measure: two and a half times
        this run's, at least 100 more, in tens."""
        steps = self.run.summary.measured_steps or self.run.config.steps or 0
        steps = int(steps) if isinstance(steps, (int, float)) and not isinstance(steps, bool) else 0
        need = max(int(steps * 2.5), steps + 100)
        return -(-need // 10) * 10

    @property
    def efficiency(self) -> float | None:
        return self.speedup / self.gpus if self.speedup is not None else None

    @property
    def efficiency_interval(self) -> tuple[float, float] | None:
        return (self.low / self.gpus, self.high / self.gpus) if self.low is not None and self.high is not None else None

    @property
    def communication(self) -> dict | None:
        comm = self.run.summary.communication
        return comm if isinstance(comm, dict) and isinstance(comm.get("share"), (int, float)) else None

    @property
    def rank_memory(self) -> list[int]:
        ranks = self.run.summary.ranks
        if not isinstance(ranks, list):
            peak = self.run.summary.peak_memory
            return [int(peak)] if isinstance(peak, (int, float)) and peak > 0 else []
        return [int(r["peak_memory"]) for r in ranks if isinstance(r, dict) and
                isinstance(r.get("peak_memory"), (int, float)) and not isinstance(r.get("peak_memory"), bool)]


@dataclass
class Scaling:
    """One setup on one machine at several numbers of GPUs, and the same setup elsewhere beside it."""

    points: list[Point]
    beside: list[RunResult] = field(default_factory=list)  # other devices or machines, one GPU each

    @property
    def one(self) -> Point | None:
        return next((p for p in self.points if p.gpus == 1), None)

    @property
    def machine(self) -> str:
        return short_machine(self.points[0].run.machine)

    @property
    def runs(self) -> list[RunResult]:
        return [p.run for p in self.points]

    def title(self) -> str:
        c = self.points[0].run.config
        return (f"{c.work_words}, {c.batch_words} per {_gpu_word(self.points[0].run)}, {c.precision_words}"
                f"{', channels_last' if c.channels_last else ''} · {self.machine}")

    def verdict(self) -> str:
        """"4 GPUs train resnet50 3.71x [3.65-3.77] faster than one (93 % efficiency [91-94]); the all-reduce takes
        6 % of a step" — or that more GPUs gain nothing, or that no one-GPU run was measured."""
        top = self.points[-1]
        model, device = top.run.config.model, _gpu_word(top.run)
        if self.one is None or top.gpus == 1:
            return (f"{top.gpus} {device}s train {model} at {_rate(top.samples_per_s)}; run --gpus 1,{top.gpus} for "
                    "the speedup over one and the efficiency." if top.gpus > 1 else
                    f"1 {device} trains {model} at {_rate(top.samples_per_s)}.")
        comm = _comm_words(top)
        if top.speedup is None:
            return f"{top.gpus} {device}s: no throughput to compare."
        unsteady = [p for p in self.points if not p.trusted]
        if unsteady:
            p = unsteady[-1]
            return (f"Too short to tell the scaling: on {p.gpus} {device}{'s' if p.gpus > 1 else ''} "
                    f"{p.unsteady_words()} (its {p.run.summary.measured_steps or '?'} measured steps); run "
                    f"again with --steps {p.steps_to_ask():,} or more (an estimate). Measured as it was: "
                    f"{top.speedup:.2f}x one {device}, not a verdict." + (CPU_RANKS if device != "GPU" else ""))
        if top.high is not None and top.high < LAUNCH_BOUND:
            return (f"more {device}s gain nothing here: {top.gpus} train {model} {top.speedup:.2f}x "
                    f"[{top.low:.2f}-{top.high:.2f}] as fast as one{comm}; " +
                    ("the step is too short for the all-reduce to hide behind (launch- or communication-bound): try "
                     "a larger batch per GPU." if device == "GPU" else "CPU ranks share this CPU's cores: this tries "
                     "the distributed path; it is no speedup to expect."))
        interval = f" [{top.low:.2f}-{top.high:.2f}]" if top.low is not None else " (too few windows for an interval)"
        eff = top.efficiency_interval
        efficiency = top.speedup / top.gpus
        eff_words = (f"{100 * efficiency:.0f} % efficiency [{100 * eff[0]:.0f}-{100 * eff[1]:.0f}]" if eff else
                     f"{100 * efficiency:.0f} % efficiency")
        words = f"{top.gpus} {device}s train {model} {top.speedup:.2f}x{interval} faster than one ({eff_words}){comm}."
        settled = [p for p in self.points if p.settled_at_step]
        if settled:
            words += " Measured once steady: " + "; ".join(
                f"the first {p.settled_at_step:,} steps on {p.gpus} counted as warm-up" for p in settled) + "."
        if eff is not None and eff[0] > SUPERLINEAR:  # more than N times one: the one-GPU run is suspect first
            words += (f" More than {top.gpus} times one {device} is rare: check that the one-{device} run was not "
                      f"slowed by something else (its stability: {self.one.run.summary.stability or 'unknown'})"
                      " and repeat it (--repeat).")
        if device != "GPU":
            words += CPU_RANKS
        return words

    def table(self) -> tuple[list[str], list[list[str]]]:
        """The scaling as a table: one row per number of GPUs, then the runs beside it."""
        headers = ["GPUs", "samples/s (median, IQR)", "per GPU", "speedup vs 1 [95 % CI]", "efficiency [95 % CI]",
                   "all-reduce share of a step (median, range)", "peak memory per rank"]
        rows = []
        for p in self.points:
            q1, q3 = p.iqr
            iqr = f" [{_num(q1)}-{_num(q3)}]" if q1 is not None and q3 is not None else ""
            speed = ("—" if p.speedup is None else f"{p.speedup:.2f}x" +
                     (f" [{p.low:.2f}-{p.high:.2f}]" if p.low is not None else ""))
            eff = p.efficiency_interval
            efficiency = ("—" if p.efficiency is None else f"{100 * p.efficiency:.0f} %" +
                          (f" [{100 * eff[0]:.0f}-{100 * eff[1]:.0f}]" if eff else ""))
            comm = p.communication
            share = ("—" if comm is None else f"{100 * max(0.0, comm['share']):.0f} % "
                     f"[{100 * max(0.0, comm['low']):.0f}-{100 * max(0.0, comm['high']):.0f}]")
            memory = ", ".join(fmt_bytes(m) for m in p.rank_memory) or "—"
            settled = p.settled_at_step
            state = (" (not steady)" if not p.steady else " (too noisy)" if p.noisy else
                     f" (steady from step {settled:,})" if settled else "")
            rows.append([str(p.gpus), f"{_num(p.samples_per_s)}{iqr}{state}", _num(p.per_gpu), speed, efficiency,
                         share, memory])
        for r in self.beside:
            rows.append([f"{r.config.device} · {short_machine(r.machine)}", _num(r.summary.samples_per_s),
                         "—", "—", "—", "—", fmt_bytes(r.summary.peak_memory or 0)])
        return headers, rows

    def beside_sentences(self) -> list[str]:
        """Each run beside the scaling against this machine's one GPU: "Apple M3 Max mps: 412 samples/s, 0.10x one
        GPU here"."""
        one = self.one
        out = []
        for r in self.beside:
            rate = r.summary.rate
            against = f", {rate / one.samples_per_s:.2f}x one {_gpu_word(one.run)} here" if one else ""
            out.append(f"{short_machine(r.machine)} {r.config.device}: {_rate(rate)}{against} (measured on "
                       "another device, same setup).")
        return out


def scalings(results: Iterable[RunResult]) -> list[Scaling]:
    """Every setup run on more than one GPU count of one machine (or on several GPUs at all), newest run per count,
    with the same setup's one-device runs on other devices and machines beside it."""
    from .compare import machine_id

    usable = [r for r in results if _usable(r)]
    groups: dict[tuple, dict[int, RunResult]] = {}
    for r in usable:
        if r.config.device.startswith("mps"):
            continue
        by_n = groups.setdefault((setup_key(r), machine_id(r), r.config.device.split(":")[0]), {})
        n = world_of(r)
        if n not in by_n or (by_n[n].created_at or "") < (r.created_at or ""):
            by_n[n] = r
    out = []
    for (key, machine, kind), by_n in groups.items():
        if max(by_n) < 2:  # no run on several: no scaling
            continue
        points = [Point(n, by_n[n]) for n in sorted(by_n)]
        one = points[0] if points[0].gpus == 1 else None
        for p in points:
            if one is not None:
                p.speedup = p.samples_per_s / one.samples_per_s
                interval = (1.0, 1.0) if p is one else bootstrap_ratio(p.rates, one.rates,
                                                                         pair_seed(p.run.id, one.run.id))
                if interval is not None:
                    p.low, p.high = interval
        beside = [r for r in usable if setup_key(r) == key and world_of(r) == 1 and
                  (machine_id(r) != machine or r.config.device.split(":")[0] != kind)]
        newest: dict[tuple, RunResult] = {}
        for r in beside:
            k = (machine_id(r), r.config.device)
            if k not in newest or (newest[k].created_at or "") < (r.created_at or ""):
                newest[k] = r
        out.append(Scaling(points, sorted(newest.values(), key=lambda r: -r.summary.rate)))
    return out


def scaling_of(runs: Sequence[RunResult]) -> Scaling | None:
    """The scaling the runs belong to (the first found), None when they make none."""
    found = scalings(runs)
    return found[0] if found else None


def _comm_words(p: Point) -> str:
    comm = p.communication
    if comm is None:
        return ""
    share = max(0.0, comm["share"])
    return (f"; the all-reduce takes {100 * share:.0f} % of a step [{100 * max(0.0, comm['low']):.0f}-"
            f"{100 * max(0.0, comm['high']):.0f}]")


def _gpu_word(r: RunResult) -> str:
    return "GPU" if r.config.device.startswith("cuda") else "CPU rank"


def _rate(v: float) -> str:
    return f"{_num(v)} samples/s"


def _num(v) -> str:
    if v is None:
        return "—"
    v = float(v)
    return f"{v:,.0f}" if v >= 100 else f"{v:.3g}"

