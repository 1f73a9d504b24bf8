"""A tune's result: every candidate on three axes (samples/s with its interval, peak memory, loss and parity against
fp32 and float64), the recommendation per device and its sentence (the package measures; no torch here).

Throughput: the median of the rounds' medians. Its interval, and that of the ratio to the user's current settings:
with two rounds or more, analysis/repeat.median_interval over the rounds (the ratio paired round by round, as a
repeat's: the range up to 8 rounds, the 95 % order-statistic interval of the median from 9); with one round, the
95 % bootstrap over measurement windows (compare.bootstrap_ratio). "Faster" only where the ratio's interval lies
above 1.
"""

from __future__ import annotations

import re
import statistics
from collections.abc import Sequence
from dataclasses import replace

from ...analysis.compare import bootstrap_ratio, short_machine
from ...analysis.repeat import how_said, median_interval
from ...basics.config import RunConfig
from ...basics.formatting import fmt_bytes, fmt_duration, fmt_rate, is_finite, plural
from ...basics.results import RunResult
from ..records.tune import TuneRow

NONFINITE_LOSS = re.compile(r"\bThe loss became (NaN|infinite)\b")
LOSS_DIVERGED = 0.5  # a final loss more than 50 % above fp32's at the same steps: the candidate diverged


def _rates(r: RunResult) -> list[float]:
    return [w.samples_per_s for w in (r.windows or []) if is_finite(w.samples_per_s)]


def _finished(results: Sequence[RunResult]) -> list[RunResult]:
    return [r for r in results if r.status == "finished" and is_finite(r.summary.samples_per_s)]


def _throughput(results: list[RunResult]) -> tuple[float | None, float | None, float | None, str]:
    meds = [r.summary.rate for r in results]
    if not meds:
        return None, None, None, ""
    if len(meds) >= 2:
        mid, low, high = median_interval(meds) or (None, None, None)
        return mid, low, high, how_said(len(meds))
    ci = bootstrap_ratio(_rates(results[0]), [1.0, 1.0])
    low, high = ci if ci else (None, None)
    return meds[0], low, high, "95 % bootstrap over measurement windows"


def paired_ratio(mine: list[RunResult], base: list[RunResult]) -> tuple[float | None, float | None, float | None]:
    """(ratio, low, high) of one candidate's samples/s to another's (finished runs, in round order): with two rounds
    or more the median of the ratios paired round by round and its interval (repeat.median_interval: their range up
    to 8 rounds), with one the 95 % bootstrap over windows."""
    if not mine or not base:
        return None, None, None
    if mine is base:
        return 1.0, 1.0, 1.0
    n = min(len(mine), len(base))
    if n >= 2:
        return median_interval([a.summary.rate / b.summary.rate for a, b in zip(mine[:n], base[:n])]) or \
            (None, None, None)
    speed = mine[0].summary.rate / base[0].summary.rate
    ci = bootstrap_ratio(_rates(mine[0]), _rates(base[0]))
    return (speed, *ci) if ci else (speed, None, None)


def _loss(results: list[RunResult]) -> float | None:
    losses = [r.summary.final_loss for r in results]
    finite = [v for v in losses if is_finite(v)]
    return statistics.median(finite) if finite else None


def _reference(c, by_key: dict, measured: dict[str, list[RunResult]]):
    """fp32 at the same batch on the same device, eager, NCHW, default threads where measured; else any fp32 there
    (`c`: a tune.Candidate; this module imports nothing of the package, which calls it)."""
    plain = replace(c, precision="fp32", channels_last=False, compile=False, threads=None)
    if plain.key in measured and _finished(measured[plain.key]):
        return plain
    return next((o for o in by_key.values() if o.device == c.device and o.precision == "fp32"
                 and o.batch_size == c.batch_size and _finished(measured.get(o.key, []))), None)


def candidates(g, outcome: dict, checks: dict[tuple[str, str], dict]) -> list[dict]:
    """One row per candidate, its three axes, and whether it is usable (and why not)."""
    measured, dropped = outcome["runs"], outcome["dropped"]
    by_key = {c.key: c for c in g.candidates}
    rows = []
    for c in g.candidates:
        runs = measured.get(c.key, [])
        ok = _finished(runs)
        row = {"key": c.key, "label": c.label(), "device": c.device, "precision": c.precision,
               "channels_last": c.channels_last, "compile": c.compile, "batch_size": c.batch_size,
               "threads": c.threads, "tf32": c.tf32, "baseline": c == g.baselines.get(c.device), "rounds": len(ok),
               "round_samples_per_s": [r.summary.samples_per_s for r in ok],
               "run_ids": [r.id for r in runs], "reason": None}
        sps, low, high, how = _throughput(ok)
        base = g.baselines.get(c.device)
        speed, s_low, s_high = paired_ratio(ok, _finished(measured.get(base.key, []))) if base else (None, None, None)
        peaks = [v for r in ok if is_finite(v := r.summary.peak_memory)]
        warm = [v for r in ok if is_finite(v := r.summary.warmup_s)]
        row.update(samples_per_s=sps, samples_per_s_low=low, samples_per_s_high=high, interval=how or None,
                   samples_per_s_iqr=statistics.median([r.summary.samples_per_s_iqr or 0.0 for r in ok])
                   if ok else None,
                   speedup=speed, speedup_low=s_low, speedup_high=s_high,
                   peak_memory=max(peaks) if peaks else None, warmup_s=statistics.median(warm) if warm else None,
                   final_loss=_loss(ok), loss_vs_fp32=None, parity_ok=None, parity_worst=None)
        ref = _reference(c, by_key, measured)
        ref_loss = _loss(_finished(measured.get(ref.key, []))) if ref else None
        if is_finite(row["final_loss"]) and is_finite(ref_loss) and ref_loss:
            row["loss_vs_fp32"] = (row["final_loss"] - ref_loss) / abs(ref_loss)
        check = checks.get((c.device, c.precision))
        if check is not None and c.precision != "fp32":
            row["parity_ok"], row["parity_worst"] = check.get("ok"), check.get("worst_rel_err")
            row["first_wrong_layer"] = check.get("first_wrong_layer")
        row["status"], row["reason"] = _status(c, g, runs, ok, dropped, row, outcome)
        if row["status"] in NO_FIGURES:  # a round that failed: what the others measured is not compared
            row.update({k: None for k in FIGURES})
        rows.append(row)
    return rows


NO_FIGURES = ("failed", "refused", "not measured")  # statuses whose rows carry no throughput nor ratio
FIGURES = ("samples_per_s", "samples_per_s_low", "samples_per_s_high", "samples_per_s_iqr", "speedup", "speedup_low",
           "speedup_high", "round_samples_per_s")
TIE_SPAN = 0.05  # "apart by less than the noise" of the best: within this of its samples/s, and its interval says so


def contradiction(result: dict) -> tuple[str, str] | None:
    """(where, what) when a tune result's rows contradict one another or themselves (a file written by hand, or
    damaged): at most one current row per device (none where the current settings could not run there), no candidate twice, an interval's low not above its high, a measured row
    with its throughput, a row that failed or was not measured without one; None when they agree."""
    rows = result.get("candidates") or []
    seen: set = set()
    for i, row in enumerate(rows):
        where = f"candidates[{i}]"
        if row["key"] in seen:
            return where, f"repeats the candidate {row['key'][:60]!r}"
        seen.add(row["key"])
        for lo, hi in (("samples_per_s_low", "samples_per_s_high"), ("speedup_low", "speedup_high")):
            if is_finite(row.get(lo)) and is_finite(row.get(hi)) and row[lo] > row[hi]:
                return f"{where}.{lo}", f"is above its {hi} ({row[lo]:.4g} > {row[hi]:.4g})"
        if row["status"] == "measured" and not (is_finite(row.get("samples_per_s")) and row["samples_per_s"] > 0):
            return f"{where}.samples_per_s", "is missing from a measured candidate"
        if row["status"] in NO_FIGURES and any(row.get(k) not in (None, []) for k in FIGURES):
            return where, f"has a throughput or a ratio though it is {row['status']}"
    for device in dict.fromkeys(r["device"] for r in rows):
        current = sum(1 for r in rows if r["device"] == device and r["baseline"])
        if current > 1:
            return "candidates", f"mark {current} rows as the current settings on {device}, not one"
    return None


def _status(c, g, runs, ok, dropped, row, outcome) -> tuple[str, str | None]:
    if c.key in g.refused:
        return "refused", g.refused[c.key]
    failed = [r for r in runs if r.status == "failed"]
    if failed:
        error = failed[-1].error or "the run failed"
        if NONFINITE_LOSS.search(error):  # the engine's own words (run/failures.py), not a substring of any error
            return "unusable", f"its loss was not finite: {error}"
        return "failed", error
    if not ok:
        if c.key in dropped:
            return "dropped", dropped[c.key]
        if any(r.status == "cancelled" for r in runs):
            return "not measured", "the tune was stopped while it ran (a partial run is not compared)"
        return "not measured", ("the budget ran out first" if outcome.get("out_of_budget") else
                                "the tune was stopped first" if outcome.get("stopped") else "not run")
    if row["final_loss"] is None:
        return "unusable", "its loss was not finite"
    if is_finite(row["loss_vs_fp32"]) and row["loss_vs_fp32"] > LOSS_DIVERGED:
        return "unusable", (f"it diverged: loss {row['final_loss']:.4g} after the same steps, "
                            f"{row['loss_vs_fp32']:+.0%} against fp32")
    if row["parity_ok"] is False and c.device != "cpu":  # on the CPU it is the precision's own rounding: the loss says
        worst = row["parity_worst"]
        layer = row.get("first_wrong_layer")
        return "unusable", ("one step does not match the CPU in float64" +
                            (f" (worst relative error {worst:.2g})" if is_finite(worst) else " (not finite)") +
                            (f"; the first layer beyond tolerance: {layer} (diagnose --layers)" if layer else ""))
    if c.key in dropped:
        return "dropped", dropped[c.key]
    return "measured", None


def recommend(rows: list[dict]) -> dict[str, str | None]:
    """Per device, among the usable candidates (their ratio to the current settings wholly above 1) the fastest and
    those the measurements cannot tell from it (`tied`), the one whose ratio's low end is highest: of settings
    equally fast within the noise, the one a user can count on (a steady figure before a jumpy one). None: nothing
    beats the current settings by more than the noise."""
    out: dict[str, str | None] = {}
    for device in dict.fromkeys(r["device"] for r in rows):
        _, usable = _usable(rows, device)
        if not usable:
            out[device] = None
            continue
        tie = [usable[0], *(r for r in tied(usable[0], usable))]
        out[device] = max(tie, key=lambda r: r["speedup_low"])["key"]
    return out


def contenders(rows: list[dict]) -> list[str]:
    """The candidates worth more rounds: on each device whose fastest usable candidate is tied with others (`tied`),
    the current settings, that candidate and those tied with it (all measured in each round, so their ratios stay
    paired); where it stands apart but its ratio's interval is wider than ±PRECISE of its ratio, the current
    settings and it; nothing of a device whose answer is sharp, or where nothing beats the current settings."""
    out: list[str] = []
    for device in dict.fromkeys(r["device"] for r in rows):
        base, usable = _usable(rows, device)
        if base is None or not usable:
            continue
        together = tied(usable[0], usable)
        if together:
            out += [base["key"], usable[0]["key"], *(r["key"] for r in together)]
        elif _wide(usable[0]):
            out += [base["key"], usable[0]["key"]]
    return out


PRECISE = 0.05  # a recommendation's interval within ±5 % of its ratio needs no more rounds


def _wide(row: dict) -> bool:
    mid = row["speedup"]
    return mid > 0 and max(row["speedup_high"] / mid - 1, 1 - row["speedup_low"] / mid) > PRECISE


def _usable(rows: list[dict], device: str) -> tuple[dict | None, list[dict]]:
    """The device's current settings (None unless exactly one row of them measured) and, fastest first, its
    candidates that beat them: measured, the ratio's interval wholly above 1, in agreement with their samples/s."""
    bases = [r for r in rows if r["device"] == device and r["baseline"] and is_finite(r.get("samples_per_s"))]
    if len(bases) != 1:  # no current settings measured (or a file that says otherwise): nothing to beat
        return None, []
    usable = [r for r in rows if r["device"] == device and r["status"] == "measured" and not r["baseline"]
              and is_finite(r.get("speedup_low")) and r["speedup_low"] > 1.0
              and is_finite(r.get("speedup")) and is_finite(r.get("speedup_high"))
              and is_finite(r.get("samples_per_s")) and _agrees(r, bases[0])]
    usable.sort(key=lambda r: r["samples_per_s"], reverse=True)
    return bases[0], usable


def rederived(result: dict) -> dict:
    """The recommendation and the sentence from the rows' numbers, on every read (a file cannot make them disagree)."""
    result["recommendation"] = recommend(result["candidates"])
    result["sentence"] = sentence(result)
    return result


def _agrees(row: dict, base: dict) -> bool:
    """Whether a row's ratio agrees with its own samples/s over the current settings' (a paired median differs from
    the ratio of medians by a little, never by its whole interval): a file cannot make "fastest" contradict the
    table."""
    ratio = row["samples_per_s"] / base["samples_per_s"] if base["samples_per_s"] else 0.0
    return row["speedup_low"] * 0.8 <= ratio <= row["speedup_high"] * 1.25 and \
        row["speedup_low"] <= row["speedup"] <= row["speedup_high"]


def tied(best: dict, rows) -> list[dict]:
    """The other usable candidates of the device that the measurements cannot tell from the best: their samples/s
    within TIE_SPAN of the best's, and the interval of their ratio to it, paired round by round (repeat.median_interval;
    with one round: their own intervals), reaching 1. "Fastest" is said of them together; never of one at half the best's speed however noisy."""
    out = []
    for r in rows:
        if r is best or r["device"] != best["device"] or r["status"] != "measured" or r["baseline"]:
            continue
        if not (is_finite(r.get("samples_per_s")) and r["samples_per_s"] >= (1 - TIE_SPAN) * best["samples_per_s"]):
            continue
        mine, theirs = _round_rates(r), _round_rates(best)
        n = min(len(mine), len(theirs))
        if n >= 2:
            reaches = (median_interval([a / b for a, b in zip(mine[:n], theirs[:n])]) or (0.0, 0.0, 0.0))[2] >= 1.0
        else:
            reaches = is_finite(r.get("samples_per_s_high")) and is_finite(best.get("samples_per_s_low")) and \
                r["samples_per_s_high"] >= best["samples_per_s_low"]
        if reaches:
            out.append(r)
    return out


def _round_rates(row: dict) -> list[float]:
    rates = row.get("round_samples_per_s")
    return [v for v in rates if is_finite(v) and v > 0] if isinstance(rates, list) else []


def sentence(result: dict) -> str:
    rows = {r["key"]: r for r in result["candidates"]}
    machine = short_machine((result.get("env") or {}).get("machine_label") or "") or "this machine"
    model = (result.get("config") or {}).get("model", "the model")
    parts = []
    for device, key in (result.get("recommendation") or {}).items():
        base = next((r for r in rows.values() if r["device"] == device and r["baseline"]), None)
        if base is None or not is_finite(base.get("samples_per_s")):
            why = ((base or {}).get("reason") or "no run").rstrip(".")
            parts.append(f"On {device}, your current settings did not run ({why}), so nothing is compared with them.")
            continue
        if key is None:
            parts.append(f"On {device}, no setting beats your current one ({base['label']}, "
                         f"{fmt_rate(base['samples_per_s'])} samples/s) by more than the noise.")
            continue
        best = rows.get(key)
        if best is None:
            continue
        together = tied(best, rows.values())
        how = (f"with {best['label']}: " if not together else
               f"with {best['label']} or {' or '.join(r['label'] for r in together)} (apart by less than the noise): "
               f"{best['label']} is ")
        text = (f"On {machine}, {model} trains fastest on {device} {how}"
                f"{best['speedup']:.2f}x [{best['speedup_low']:.2f}x-{best['speedup_high']:.2f}x] your "
                f"{base['label']}")
        if best.get("peak_memory") and base.get("peak_memory"):
            change = best["peak_memory"] / base["peak_memory"] - 1
            text += (f", {abs(change):.0%} {'less' if change < 0 else 'more'} memory "
                     f"({fmt_bytes(best['peak_memory'])})")
        if is_finite(best.get("loss_vs_fp32")) and best["precision"] != "fp32":
            moved = abs(best["loss_vs_fp32"])
            n = (result.get("steps") or 0) + (result.get("warmup") or 0)
            text += f", loss within {moved:.1%} of fp32's after the same {n} steps"
        if best["compile"] and is_finite(best.get("warmup_s")):
            text += f"; it compiles for {fmt_duration(best['warmup_s'])} at each start"
            if device == "mps":
                text += " (PyTorch calls torch.compile on MPS a prototype)"
        parts.append(text + ".")
    notes = []
    if result.get("dropped_count"):
        notes.append(f"{plural(result['dropped_count'], 'candidate')} dropped once their rounds showed them clearly "
                     "behind (each says when).")
    if result.get("leader_rounds"):
        notes.append(f"The fastest and your current settings had {plural(result['leader_rounds'], 'more round')} "
                     "than the rest, to tell the fastest apart (the noise tied them) or to narrow its interval "
                     f"(wider than ±{PRECISE:.0%}).")
    if result.get("stopped"):
        notes.append("The tune was stopped before every candidate had its rounds: what it measured is above.")
    elif result.get("out_of_budget"):
        notes.append("The budget ran out before every candidate had its rounds: a longer --budget measures more.")
    refused = sum(1 for r in rows.values() if r["status"] == "refused")
    if refused:
        notes.append(f"{plural(refused, 'setting')} cannot run here (each says why).")
    return " ".join(parts + notes) or "Nothing was measured."


def analyse(config: RunConfig, g, outcome: dict, checks: dict, *, steps: int, warmup: int,
            budget_s: float) -> dict:
    rows = candidates(g, outcome, checks)
    envs = [r.env for runs in outcome["runs"].values() for r in runs if r.env]
    result = {"tool": "tune", "config": config.to_dict(), "env": envs[0] if envs else {},
              "devices": list(g.baselines), "candidates": rows, "recommendation": recommend(rows),
              "rounds": outcome["rounds"], "steps": steps, "warmup": warmup, "budget_s": budget_s,
              "elapsed_s": outcome["elapsed_s"], "out_of_budget": bool(outcome.get("out_of_budget")),
              "stopped": bool(outcome.get("stopped")),
              "dropped_count": sum(1 for r in rows if r["status"] == "dropped"),
              "leader_rounds": outcome.get("leader_rounds") or 0, "notes": []}
    result["sentence"] = sentence(result)
    return result


def apply_to(config: RunConfig, row: TuneRow | dict) -> RunConfig:
    """The setup with a candidate's settings (what Apply puts into the setup panel)."""
    row = TuneRow.of(row)
    tf32 = row.tf32
    return replace(config, precision=row.precision, channels_last=row.channels_last,
                   compile=row.compile, batch_size=row.batch_size,
                   threads=row.threads if row.device == "cpu" else config.threads,
                   tf32=tf32 == "all" if tf32 else config.tf32, tf32_conv=tf32 == "conv" if tf32 else config.tf32_conv,
                   options=dict(config.options))


def rederived_checked(result: dict) -> dict:
    """A read tune result: ShapeError where its rows contradict one another, else `rederived`."""
    from ...basics.shape import ShapeError

    found = contradiction(result)
    if found:
        raise ShapeError(*found)
    return rederived(result)
