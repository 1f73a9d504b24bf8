"""A run's energy and utilisation figures, derived from its window rows and env["energy"] (also for a run read
back from a file or the history), and how they are shown: J/sample, watts, their source and scope, or why none."""

from __future__ import annotations

from ..basics.formatting import DASH, is_finite, one_line, printable
from ..basics.results import WindowRow
from ..basics.summary_fields import RunSummary

PARTS = ("gpu", "cpu", "dram", "ane")  # as machine/energy/base.py: the parts a source may give
MEASURED, ESTIMATED = "measured", "estimated"


def _percent(v: float) -> float:
    return min(100.0, max(0.0, v))


IDLE_KEYS = ("idle_w", "idle_s", "idle_reason", "energy_above_idle_j", "power_above_idle_w", "j_per_sample_above_idle",
             "idle_when")
IDLE_WHEN = {"before": "before the measured phase", "after": "after the script's last step"}  # env["energy"]["idle_when"]
SUMMARY_KEYS = ("energy_j", "avg_power_w", "j_per_sample", "energy_parts", "energy_part", "energy_source",
                "energy_measure", "energy_scope", "energy_reason", "utilization", "utilization_measure",
                "utilization_reason", *IDLE_KEYS)
BEFORE = "not measured (recorded before MPS Studio measured energy)"
IDLE_BEFORE = "not measured (recorded before MPS Studio measured idle power)"
NOT_STARTED = "not measured (the run ended before its first step)"
MAX_WATTS = 1e5
MAX_TEXT = 300


def _text(value) -> str | None:
    """A description from env["energy"] (maybe from a file): one printable line, bounded; None when empty."""
    return one_line(printable(value), MAX_TEXT) if isinstance(value, str) and value.strip() else None


def summary_fields(windows: list[WindowRow], env: dict | None) -> dict:
    """The run's energy and utilisation figures from its window rows and env["energy"], for its summary.

    A window that closed an energy span carries the span's `energy_j`, `energy_s`, `energy_windows` (how many
    windows, itself included, the span covers), `energy_parts` and `utilization`. Energy: the spans' joules summed,
    over their seconds (W) and over their windows' samples (J/sample); None with `energy_reason` when no source
    measured it or any span lacks its reading (a run's energy is all of its spans or nothing). Windows after the
    last span (a run that failed or was stopped mid-span) are not covered. Utilisation: the spans' busy shares,
    weighted by their seconds (percent). Also the figures of a file: re-derived from its windows here.
    """
    out: dict = dict.fromkeys(SUMMARY_KEYS)
    info = (env or {}).get("energy")
    if not isinstance(info, dict):
        # an environment without energy: an older record; a failed run's machine identity alone: it never started
        out["energy_reason"] = out["utilization_reason"] = (BEFORE if env and not env.get("identity_only")
                                                            else NOT_STARTED)
        return out
    spans, bad = _spans(windows)
    part = info.get("part") if info.get("part") in PARTS else None
    source = _text(info.get("source"))
    measure = info.get("measure") if info.get("measure") in (MEASURED, ESTIMATED) else None
    if part and source and measure:
        out.update(energy_part=part, energy_source=source, energy_measure=measure, energy_scope=_text(info.get("scope")))
        if bad:
            out["energy_reason"] = bad
        else:
            _energy(out, spans, part)
            _above_idle(out, info, spans)
    else:
        out["energy_reason"] = _text(info.get("reason")) or "no energy counter readable here"
    if out["idle_w"] is None and out["idle_reason"] is None:
        out["idle_reason"] = out["energy_reason"] or "no energy counter readable here"
    busy = info.get("utilization") if info.get("utilization") in ("gpu_busy", "cpu_busy") else None
    weighted: list[tuple[float, float]] = [
        (u, t) for u, t in ((w.utilization, w.energy_s) for w, _ in spans)
        if is_finite(u) and 0 <= u <= 100 and is_finite(t) and t > 0]
    if busy and weighted and not bad:
        out["utilization"] = _percent(sum(u * t for u, t in weighted) / sum(t for _, t in weighted))
        out["utilization_measure"] = busy
    elif busy:
        out["utilization_reason"] = bad or "no energy span finished with a utilisation reading"
    else:
        out["utilization_reason"] = _text(info.get("utilization_reason")) or "no utilisation reading here"
    return out


def _spans(windows: list[WindowRow]) -> tuple[list[tuple[WindowRow, float]], str | None]:
    """(closing window, samples of its span's windows) per span; a reason instead when the spans do not fit."""
    spans: list[tuple[WindowRow, float]] = []
    pending: list[float] = []  # samples of the windows since the last span closed
    for w in windows:
        samples = w.samples
        pending.append(samples if is_finite(samples) and samples >= 0 else 0)
        n = w.energy_windows
        if n is None:
            continue
        if isinstance(n, bool) or not isinstance(n, int) or not 1 <= n <= len(pending):
            return [], "its energy spans do not match its measurement windows"
        spans.append((w, sum(pending[-n:])))
        pending = []
    return spans, None


def _energy(out: dict, spans: list[tuple[WindowRow, float]], part: str) -> None:
    if not spans:
        out["energy_reason"] = "no energy span finished (the measured phase ended before the first reading)"
        return
    missing = sum(1 for w, _ in spans if not (is_finite(w.energy_j) and w.energy_j >= 0
                                              and is_finite(w.energy_s) and w.energy_s > 0))
    if missing:
        out["energy_reason"] = f"the energy counter could not be read in {missing} of {len(spans)} energy spans"
        return
    joules = sum(w.energy_j or 0.0 for w, _ in spans)
    seconds = sum(w.energy_s or 0.0 for w, _ in spans)
    samples = sum(n for _, n in spans)
    out["energy_j"] = joules
    out["avg_power_w"] = joules / seconds
    out["j_per_sample"] = joules / samples if samples > 0 else None
    parts = {}
    for name in PARTS:
        values = [w.energy_parts.get(name) if w.energy_parts is not None else None for w, _ in spans]
        found = [v for v in values if is_finite(v) and v >= 0]
        if len(found) == len(values):
            parts[name] = sum(found)
    parts[part] = joules
    out["energy_parts"] = {name: parts[name] for name in PARTS if name in parts}


def _above_idle(out: dict, info: dict, spans: list[tuple[WindowRow, float]]) -> None:
    """The device's idle power (read before the measured phase) and the run's energy above it: what the work
    itself cost, without the power the device draws doing nothing."""
    if "idle_w" not in info and "idle_reason" not in info:
        out["idle_reason"] = IDLE_BEFORE
        return
    watts, seconds = info.get("idle_w"), info.get("idle_s")
    if not (is_finite(watts) and 0 <= watts <= MAX_WATTS and is_finite(seconds) and seconds > 0):
        out["idle_reason"] = _text(info.get("idle_reason")) or "the idle power could not be read"
        return
    out["idle_w"], out["idle_s"] = float(watts), float(seconds)
    out["idle_when"] = info.get("idle_when") if info.get("idle_when") in IDLE_WHEN else "before"
    if out["energy_j"] is None:
        return
    span_s = sum(w.energy_s or 0.0 for w, _ in spans)
    samples = sum(n for _, n in spans)
    above = out["energy_j"] - watts * span_s
    if above < 0:
        out["idle_reason"] = (f"the run drew less than the idle reading before it ({out['avg_power_w']:,.1f} W vs "
                              f"{watts:,.1f} W idle), so there is no figure above idle")
        return
    out["energy_above_idle_j"] = above
    out["power_above_idle_w"] = above / span_s
    out["j_per_sample_above_idle"] = above / samples if samples > 0 else None


def describe(summary: RunSummary) -> str:
    """"0.130 J/sample · 559 W (GPU, measured)" or the reason energy is missing, for a tooltip or a report."""
    jps = summary.j_per_sample
    if not is_finite(jps):
        return f"Energy: {summary.energy_reason or 'not measured'}."
    watts = summary.avg_power_w
    power = f" at {watts:,.1f} W" if is_finite(watts) else ""
    how = "estimated by macOS with" if summary.energy_measure == ESTIMATED else "measured by"
    return (f"Energy: {fmt_joules(jps)} per sample{power}, {how} the {summary.energy_source} "
            f"({summary.energy_scope or 'the device'}). {describe_idle(summary)}")


def describe_idle(summary: RunSummary) -> str:
    """"Idle: 92.0 W (read for 1.0 s before the measured phase); above idle 0.041 J per sample at 467 W." or why
    there is no such figure."""
    idle = summary.idle_w
    if not is_finite(idle):
        return f"Idle power: {summary.idle_reason or 'not measured'}."
    when = IDLE_WHEN.get(str(summary.idle_when), IDLE_WHEN["before"])
    text = f"Idle: {idle:,.1f} W (read for {summary.idle_s or 0:.1f} s {when})"
    above = summary.j_per_sample_above_idle
    if is_finite(above):
        return text + f"; above idle {fmt_joules(above)} per sample at {summary.power_above_idle_w:,.1f} W."
    return text + (f"; {summary.idle_reason}." if summary.idle_reason else ".")


def fmt_joules(v) -> str:
    """"0.130 J", "12.4 mJ", "1.23 kJ": three significant figures."""
    if not is_finite(v):
        return DASH
    if v == 0:
        return "0 J"
    for scale, unit in ((1e3, "kJ"), (1.0, "J"), (1e-3, "mJ"), (1e-6, "\u00b5J")):
        if abs(v) >= scale:
            break
    x = v / scale
    digits = 0 if abs(x) >= 100 else 1 if abs(x) >= 10 else 2
    return f"{x:,.{digits}f} {unit}"


def notes(runs) -> list[str]:
    """What the energy columns of these runs are, or why they are empty: one line per source or reason, naming the
    devices ("Energy of cpu: not measured (no energy counter readable on this Linux VM ...).")."""
    seen: dict[str, list[str]] = {}
    for r in runs:
        s = r.summary
        if is_finite(s.j_per_sample):
            how = "estimated by macOS" if s.energy_measure == ESTIMATED else "measured"
            text = f"{how} with the {s.energy_source}: {s.energy_scope or 'the device'}"
        else:
            reason = str(s.energy_reason or "no reading")
            text = reason if reason.startswith("not measured") else f"not measured: {reason}"
        seen.setdefault(text, []).append(str(r.config.device))
    lines = [f"Energy of {', '.join(dict.fromkeys(devices))}: {text}." for text, devices in seen.items()]
    return lines + [f"{r.config.device}: {describe_idle(r.summary)}" for r in runs
                    if is_finite(r.summary.j_per_sample)]
