"""A comparison's verdict in words: one sentence per accelerator, with the measured reason when it is slower or
no faster than the CPU. Never a guess: every hint names the number that triggered it.

The window shows these sentences above the chart; the CLI prints them last.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from ..basics.config import precision_note
from ..basics.formatting import fmt_duration, fmt_ratio, is_finite, printable
from ..basics.frameworks import framework_words, mlx_device_words, quantize_words
from ..basics.results import RunResult
from ..basics.summary_fields import RunSummary
from .compare import Comparison, Entry, device_name, interval_name, short_machine
from .energy import fmt_joules
from .repeat import slow_mode
from .summary import epoch_seconds

LAUNCH_BOUND_STEP_MS = 2.0  # below this per step, per-operation launch cost dominates on a GPU
DATA_BOUND_FRACTION = 0.20  # data waiting above this share of step time
LOW_BUSY_PERCENT = 50.0  # a GPU busy less than this share of the measured time waits on the host or on data


def inspection_for(run, inspections: Sequence[dict] | None) -> dict | None:
    """The latest `mpsstudio inspect` result (oldest first in `inspections`) of this run's model, dataset,
    precision and TF32 setting on this run's device and machine; None when there is none."""
    if not inspections:
        return None
    cfg, env = run.config, run.env or {}
    for r in reversed(inspections):
        rc, renv = r.get("config") or {}, r.get("env") or {}
        if (r.get("device") == cfg.device and rc.get("model") == cfg.model and rc.get("dataset") == cfg.dataset
                and rc.get("precision") == cfg.precision and rc.get("tf32") == cfg.tf32
                and bool(rc.get("tf32_conv")) == cfg.tf32_conv
                and renv.get("machine_label") == env.get("machine_label")
                and renv.get("hostname") == env.get("hostname")):
            return r
    return None


def findings(inspection: dict | None) -> list[str]:
    """What an inspection of the run's setup found that bears on the verdict: a parity failure, CPU fallbacks."""
    if not inspection:
        return []
    out = []
    par = inspection.get("parity") or {}
    if par and par.get("ok") is False:
        worst = par.get("worst_rel_err")
        error = f"{worst:.1e}" if is_finite(worst) else "not finite"  # null in a file: an error that was not finite
        out.append(f"an inspection found its results differ from the float64 CPU reference beyond tolerance "
                   f"(relative error {error}, {par.get('precision')}): do not trust what it computes here")
    ops = inspection.get("fallback_ops") or []
    if ops:
        names = ", ".join(str(o.get("op")) for o in ops[:3]) + (", ..." if len(ops) > 3 else "")
        share = inspection.get("fallback_share")
        timing = f", {100 * share:.0f} % of the time spent in operations" if is_finite(share) else ""
        out.append(f"{len(ops)} operation{'s' if len(ops) != 1 else ''} ran on the CPU ({names}{timing}), each "
                   f"with a copy to the CPU and back, which explains part of its time")
    return out


def verdicts(c: Comparison, inspections: Sequence[dict] | None = None) -> list[str]:
    """The sentences of a comparison: one per device with a speedup, then the cross-machine ratios.
    `inspections`: stored `inspect` results, oldest first; each device's latest matching one adds its findings."""
    out = []
    for e in c.entries:
        if e.is_baseline:
            continue
        if e.speedup is not None:
            out.append(sentence(e, inspection_for(e.run, inspections)))
        elif e.device != "cpu":
            where = "this machine" if e.local else short_machine(e.machine)
            out.append(f"{device_name(e.device)} on {where} has no speedup: the comparison has no CPU run from "
                       "that machine to divide by (another machine's CPU would not be a fair baseline).")
    if c.repeat:  # between-process noise that decides something: runs that fell in two modes say so
        for e in c.entries:
            found = slow_mode([r.summary.rate for r in e.runs], f"rounds on {e.device}")
            if found:
                out.append(f"{found[0].upper()}{found[1:]}.")
    out += [f"Across machines, {x.label()}." for x in c.cross]
    out += [text for x in c.cross for text in [cross_energy_sentence(x)] if text]
    notes = {precision_note(e.run.config) for e in c.entries} - {""}
    return out + sorted(notes)


def brief(sentences: Sequence[str]) -> tuple[str, list[str]]:
    """The verdict at a glance: its first sentence (the answer, its interval and epochs), and the rest (noise,
    energy, hints, findings, other devices) for a front end to fold. A verdict's entries may hold several
    sentences; they are split where a full stop ends one ("1.67x" and "0.08 s" stay whole)."""
    parts = [p for text in sentences for p in re.split(r"(?<=\.)\s+(?=[A-Z])", text) if p]
    return (parts[0], parts[1:]) if parts else ("", [])


def headline(c: Comparison) -> str:
    """The answer in one short line, read at a glance: "mps 1.21x faster [1.03x-1.31x]", "No clear difference: mps
    1.02x [0.95x-1.10x]", "mps 2.10x slower [...]" (the first device with a speedup; its 95 % interval, or the paired
    rounds' range); "" when no device has one."""
    e = next((e for e in c.entries if not e.is_baseline and e.speedup is not None), None)
    if e is None:
        return ""
    where = "" if e.local else f" on {short_machine(e.machine)}"
    known = e.low is not None and e.high is not None

    def rng(low, high) -> str:
        return f" [{_x(low)}-{_x(high)}]" if known else " (no interval)"
    speedup = e.speedup
    if speedup is None:  # (the entry was chosen for its speedup)
        return ""
    if e.unclear():
        return f"No clear difference: {e.device}{where} {_x(speedup)}{rng(e.low, e.high)}"
    if speedup >= 1.0:
        return f"{e.device}{where} {_x(speedup)} faster{rng(e.low, e.high)}"
    return f"{e.device}{where} {_x(1 / speedup)} slower" + (rng(1 / e.high, 1 / e.low) if e.low is not None and
                                                             e.high is not None else rng(0, 0))


def _what(e: Entry) -> str:
    cfg = e.run.config
    text = f"for {cfg.work_words} at {cfg.batch_words}"
    if cfg.precision not in ("fp32", None):
        text += f" in {cfg.precision}"
    if cfg.mode != "train":
        text += f" ({cfg.mode})"
    return text


def _interval(e: Entry) -> str:
    if e.low is None or e.high is None:
        return "no interval: too few measurement windows"
    rng = f"{_x(e.low)}-{_x(e.high)}"
    if e.method == "paired":
        return f"median of {len(e.round_speedups)} paired rounds, range {rng}"
    return rng


def _x(v: float) -> str:
    return f"{fmt_ratio(v, two_decimals_below=2)}x"


def _epochs(e: Entry) -> str:
    (a, a_measured), (b, b_measured) = epoch_seconds(e.run.summary), epoch_seconds(
        e.baseline.summary if e.baseline else None)
    if a is None or b is None:
        return ""
    if a_measured and b_measured:
        return f"{fmt_duration(a)} vs {fmt_duration(b)} per epoch (measured)"
    if not a_measured and not b_measured:
        return f"about {fmt_duration(a)} vs {fmt_duration(b)} per epoch (estimated from throughput)"
    return (f"{fmt_duration(a)} vs {fmt_duration(b)} per epoch ({'measured' if a_measured else 'estimated'} vs "
            f"{'measured' if b_measured else 'estimated'})")


def hints(e: Entry) -> list[str]:
    """Measured reasons an accelerator is slow, and warnings about the numbers themselves."""
    out = []
    s = e.run.summary
    slow = e.speedup is not None and (e.speedup < 1.0 or e.unclear())
    if slow and is_finite(s.step_ms) and s.step_ms < LAUNCH_BOUND_STEP_MS:
        out.append(f"each step takes {s.step_ms:.2f} ms on {e.device}, under {LAUNCH_BOUND_STEP_MS:g} ms: "
                   "per-operation launch cost dominates, try a larger batch or model")
    for run in (e.run, e.baseline):
        if run is None:
            continue
        wait = run.summary.data_wait_fraction
        if slow and is_finite(wait) and wait > DATA_BOUND_FRACTION:
            out.append(f"data waiting was {100 * wait:.0f} % of step time on {run.config.device}: "
                       "try resident data or more workers")
    busy = s.utilization
    if s.utilization_measure == "gpu_busy" and is_finite(busy) and busy < LOW_BUSY_PERCENT:
        out.append(f"the GPU was busy only {busy:.0f} % of the measured time: the run waits on the host (Python, "
                   "launches) or on data, so a larger batch, resident data or more workers would help")
    for run in (e.run, e.baseline):
        if run is not None and run.summary.stability == "noisy":
            reason = run.summary.stability_reason or "its throughput varied"
            out.append(f"the {run.config.device} run was noisy: {reason}")
    return out


def _energy_kind(summary: RunSummary) -> str:
    return "estimated" if summary.energy_measure == "estimated" else "measured"


def energy_sentence(e: Entry) -> str:
    """"It used 4.1x less energy per sample than the CPU (31.0 mJ vs 127 mJ per sample; GPU vs CPU, estimated)." when
    both runs measured energy; why not when only one did; "" when neither did."""
    if e.baseline is None:
        return ""
    a, b = e.run.summary, e.baseline.summary
    cpu = "the CPU" if e.local else "its CPU"
    ratio = e.energy_ratio
    if ratio is None:
        if e.j_per_sample is None and is_finite(b.j_per_sample):
            return (f"No energy comparison: the {e.device} run has no energy figure "
                    f"({a.energy_reason or 'not measured'}).")
        if e.j_per_sample is not None:
            return f"No energy comparison: the CPU run has no energy figure ({b.energy_reason or 'not measured'})."
        return ""
    kinds = {_energy_kind(a), _energy_kind(b)}
    how = kinds.pop() if len(kinds) == 1 else f"{_energy_kind(a)} vs {_energy_kind(b)}"
    parts = f"{str(a.energy_part or '').upper()} vs {str(b.energy_part or '').upper()}"
    figures = f"{fmt_joules(e.j_per_sample)} vs {fmt_joules(b.j_per_sample)} per sample; {parts}, {how}"
    above = _above_idle(a, b)
    if ratio >= 1:
        return f"It used {_x(ratio)} less energy per sample than {cpu} ({figures}{above})."
    return f"It used {_x(1 / ratio)} more energy per sample than {cpu} ({figures}{above})."


def _above_idle(a: RunSummary, b: RunSummary) -> str:
    """"; above idle: 12.0 mJ vs 95.1 mJ (7.9x less)" when both runs have a figure above their idle power."""
    x, y = a.j_per_sample_above_idle, b.j_per_sample_above_idle
    if not (is_finite(x) and is_finite(y) and x > 0 and y > 0):
        return ""
    return f"; above idle: {fmt_joules(x)} vs {fmt_joules(y)} ({_less_or_more(y / x)})"


def _less_or_more(ratio: float) -> str:
    return f"{_x(ratio)} less" if ratio >= 1 else f"{_x(1 / ratio)} more"


def cross_energy_sentence(x) -> str:
    """Energy of two accelerators on different machines (a Mac beside an imported CUDA server, say), when both
    measured it: each side's J/sample and watts, labelled whole device (idle included) and measured or estimated,
    and their ratio, also above idle where both have that; "" otherwise."""
    a, b = x.a.run.summary, x.b.run.summary
    if not all(is_finite(s.j_per_sample) and s.j_per_sample > 0 for s in (a, b)):
        return ""

    def side(e, s) -> str:
        watts = s.avg_power_w
        kind = "estimated by macOS" if s.energy_measure == "estimated" else "measured"
        power = f" at {watts:,.1f} W" if is_finite(watts) else ""
        return (f"{device_name(e.device)} on {short_machine(e.machine)} {fmt_joules(s.j_per_sample)}{power} "
                f"({str(s.energy_part or 'device').upper()}, whole device, idle included; {kind})")
    return (f"Energy per sample across machines: {side(x.a, a)} vs {side(x.b, b)}: {device_name(x.a.device)} used "
            f"{_less_or_more(b.j_per_sample / a.j_per_sample)}{_above_idle(a, b)} (different machines).")


def sentence(e: Entry, inspection: dict | None = None) -> str:
    """"Apple GPU (mps) is 3.2x faster than the CPU (3.0x-3.4x) for resnet18 on cifar10 at batch 128: 12.3 s vs
    39.4 s per epoch (measured)." plus hints."""
    name = device_name(e.device)
    where = "" if e.local else f"On {short_machine(e.machine)}, "
    cpu = "the CPU" if e.local else "its CPU"
    speedup = e.speedup
    if speedup is None:
        head = f"{name} {_what(e)}: no speedup over {cpu} was measured"
    elif e.unclear():
        head = f"No clear difference between {name} and {cpu} {_what(e)}: {_x(speedup)} ({_interval(e)})"
    elif speedup >= 1.0:
        head = f"{name} is {_x(speedup)} faster than {cpu} ({_interval(e)}) {_what(e)}"
    else:
        head = (f"{name} is {_x(1 / speedup)} slower than {cpu} ({_x(speedup)}; {_interval(e)}) "
                f"{_what(e)}")
    if where and head.startswith("No clear"):
        head = "n" + head[1:]
    head = where + head
    epochs = _epochs(e)
    text = f"{head}: {epochs}." if epochs else f"{head}."
    energy = energy_sentence(e)
    if energy:
        text += f" {energy}"
    text += "".join(f" {h[0].upper()}{h[1:]}." for h in [*hints(e), *findings(inspection)])
    return text[0].upper() + text[1:]


def _num(v):
    return v if is_finite(v) else None


def comparison_record(c: Comparison, inspections: Sequence[dict] | None = None) -> dict:
    """A comparison as JSON (`bench --json`, `history --json`, the window's export), its verdicts included."""
    cfg = c.config
    return {
        "model": cfg.model, "dataset": cfg.dataset, "batch_size": cfg.batch_size, "precision": cfg.precision,
        "mode": cfg.mode, "repeat": c.repeat,
        "baseline_run": c.baseline.id if c.baseline else None,
        "devices": [
            {"run": e.run.id, "runs": [r.id for r in e.runs], "device": e.device, "machine": e.machine,
             "samples_per_s": e.samples_per_s, "stability": "noisy" if e.noisy else "stable",
             "speedup_vs_cpu": e.speedup, "speedup_low": e.low, "speedup_high": e.high,
             "interval": interval_name(e.method), "no_clear_difference": e.unclear(),
             "baseline_run": e.baseline.id if e.baseline else None,
             "j_per_sample": e.j_per_sample, "avg_power_w": _num(e.run.summary.avg_power_w),
             "idle_w": _num(e.run.summary.idle_w),
             "j_per_sample_above_idle": _num(e.run.summary.j_per_sample_above_idle),
             "energy_measure": e.run.summary.energy_measure if e.j_per_sample is not None else None,
             "energy_reason": e.run.summary.energy_reason if e.j_per_sample is None else None,
             "energy_ratio_vs_cpu": None if e.is_baseline else e.energy_ratio,
             "utilization": _num(e.run.summary.utilization),
             "utilization_measure": e.run.summary.utilization_measure,
             "verdict": (sentence(e, inspection_for(e.run, inspections))
                         if not e.is_baseline and e.speedup is not None else None)}
            for e in c.entries
        ],
        "cross_machine": [{"a_run": x.a.run.id, "b_run": x.b.run.id, "ratio": x.ratio, "label": x.label(),
                           "energy": cross_energy_sentence(x) or None}
                          for x in c.cross],
        "verdict": " ".join(verdicts(c, inspections)) or None,
    }


# ---------------------------------------------------------------- PyTorch or MLX?
# An MLX run against the PyTorch run of the same setup on the same device of one machine (contrast.by_framework finds
# them: a contrast on the framework axis, the PyTorch run its baseline): MLX's throughput over PyTorch's with the
# contrast's interval, said as one sentence with the parity that let them be compared.


def _device_words(r: RunResult) -> str:
    d = r.config.device.split(":")[0]
    if r.config.framework == "mlx":
        return mlx_device_words(d).upper()
    return {"cpu": "CPU", "mps": "MPS", "cuda": "CUDA"}.get(d, d)


def machine_words(r: RunResult) -> str:
    """"Apple M3 Max", the CPU's name, or the machine's label."""
    env = r.env if isinstance(r.env, dict) else {}
    if r.config.device.split(":")[0] == "cuda" and isinstance(env.get("gpus"), list) and env["gpus"]:
        return printable(str(env["gpus"][0]))
    return printable(str(env.get("chip") or env.get("cpu") or short_machine(r.machine)))


def parity_words(r: RunResult) -> str:
    """"parity passed", "parity passed before quantizing to 4 bits (not PyTorch's arithmetic after)", or what the MLX
    run recorded of it."""
    found = r.summary.parity
    if not isinstance(found, dict):
        return "parity not recorded"
    if found.get("passed") is not True:
        return "parity failed"
    q = found.get("quantized")
    if isinstance(q, dict) and q.get("bits") in (4, 8):
        return f"parity passed before quantizing to {q['bits']} bits (not PyTorch's arithmetic after)"
    return "parity passed"


# memory measures that are peaks of the same kind on both sides (a CPU process's growth on both; an allocator's peak
# on each GPU): only these are compared in the framework sentence
_PEAKS = {"rss_growth": "rss_growth", "peak_allocated": "peak", "mlx_peak": "peak"}


def memory_words(base: RunResult, other: RunResult) -> str:
    """", with 31 % less peak memory (growth of the run process's resident memory, one reading each)" where both
    runs measured a peak of one kind; ", memory not compared (PyTorch's is in use at window ends, not a peak)" where
    one is not a peak; "" where a run has no memory figure."""
    from .summary import memory_words as measure_words

    a, b = base.summary, other.summary
    if not (is_finite(a.peak_memory) and is_finite(b.peak_memory) and a.peak_memory > 0 and b.peak_memory > 0):
        return ""
    kinds = _PEAKS.get(a.memory_measure or ""), _PEAKS.get(b.memory_measure or "")
    if None in kinds or kinds[0] != kinds[1]:
        odd = base if kinds[0] is None else other
        return (f", memory not compared ({framework_words(odd.config.framework)}'s is "
                f"{measure_words(odd.summary.memory_measure, odd.config.device)})")
    change = b.peak_memory / a.peak_memory - 1
    if abs(change) < 0.005:
        amount = "the same peak memory"
    else:
        amount = f"{abs(change):.0%} {'less' if change < 0 else 'more'} peak memory"
    how = "the run process's resident memory grown" if kinds[0] == "rss_growth" else "each framework's allocator"
    return f", with {amount} ({how}; one reading each)"


def framework_sentence(base: RunResult, v) -> str:
    """"MLX (GPU) trains resnet18 1.31x [1.22-1.40] faster than PyTorch (MPS) on Apple M3 Max at batch 64, fp32;
    parity passed." or "No clear difference: ..."; how sure, the same ± rule as every comparison. `v`: the MLX run's
    contrast.Versus against the PyTorch run `base`."""
    c = base.config
    work = f"{printable(c.model)}"
    setup = f"at {c.batch_words}, {c.precision_words}" + (", compiled (torch.compile / mx.compile)" if c.compile else "")
    mlx = f"{framework_words('mlx')} ({_device_words(v.run)}){quantize_words(v.run.config)}"
    torch = f"{framework_words('torch')} ({_device_words(base)})"
    where = machine_words(base)
    trains = "trains" if c.mode == "train" else "runs inference of"
    noisy = " (a noisy run: treat it with care)" if v.noisy or base.summary.stability == "noisy" else ""
    tail = f"{memory_words(base, v.run)}; {parity_words(v.run)}{noisy}."
    if v.ratio is None:
        return f"{mlx} and {torch} are not compared for {work} on {where}: a run has no throughput{tail}"
    if v.low is None or v.high is None:
        return (f"{mlx} {trains} {work} at {times_text(v.ratio)}x the speed of {torch} on {where} {setup}, but how sure "
                f"cannot be told (too few measurement windows for an interval){tail}")
    if v.unclear():
        return (f"No clear difference: {mlx} {trains} {work} at {times_text(v.ratio)}x [{times_text(v.low)}-"
                f"{times_text(v.high)}] the speed of {torch} on {where} {setup}{tail}")
    if v.ratio >= 1:
        return (f"{mlx} {trains} {work} {times_text(v.ratio)}x [{times_text(v.low)}-{times_text(v.high)}] faster than "
                f"{torch} on {where} {setup}{tail}")
    return (f"{mlx} {trains} {work} {times_text(1 / v.ratio)}x [{times_text(1 / v.high)}-{times_text(1 / v.low)}] slower "
            f"than {torch} on {where} {setup}{tail}")


def times_text(v: float) -> str:
    """A ratio's digits: two decimals in the range a measurement gives, three significant digits beyond (an
    imported file's 1e-300 samples/s must not print 300 digits); contrast.py's too."""
    return f"{v:.2f}" if 0.1 <= abs(v) < 1e4 else f"{v:.3g}"
