"""A diagnosis in words and tables, for every front end (the CLI prints them, the window shows them), re-derived
from its numbers on every read: a file cannot make its words disagree with them. No torch here."""

from __future__ import annotations

from ...analysis.bottleneck import PHASES, judged
from ...basics.formatting import DASH, fmt_beyond, fmt_bytes, fmt_spread, is_finite, spread_of
from ...basics.table import Table

PHASE_WORDS = {"data": "waiting for data", "copy": "copy to the device", "forward": "forward", "backward": "backward",
               "optimizer": "optimizer"}
PHASE_SUM_OFF = 0.15  # the synchronized phases should add to the step within this share
NOISY = 0.10  # the step's IQR / median above this: said, as a run's throughput would be (analysis/stability.py)


def rederived(result: dict) -> dict:
    """`result` with each device's bound, shares and sentence derived again from its figures, and the overall
    sentence from those."""
    devices = [d if "error" in d else judged(d) for d in result.get("devices") or []]
    out = {**result, "devices": devices}
    out["sentence"] = sentence(out)
    return out


def device_sentence(d: dict) -> str:
    """One device: its bound, then the first wrong layer or the parity, the memory, what MPS refuses."""
    if "error" in d:
        return f"{d.get('device')}: {d['error']}"
    parts = [f"{d['device']} is {d['bound']}-bound: {d['sentence'].split(': ', 1)[-1]}"]
    step, iqr = d.get("step_ms"), d.get("step_iqr_ms")
    if is_finite(step) and is_finite(iqr) and step > 0 and iqr / step > NOISY:
        parts.append(f"(Noisy: the step's time spread {fmt_beyond(iqr / 2 / step, NOISY / 2)} between groups of steps (half the "
                     f"IQR over the median, beyond {fmt_spread(NOISY / 2)}); other programs or heat were at work: "
                     "diagnose again on a quieter machine before acting on it.)")
    ratio = d.get("phase_sum_ratio")
    if is_finite(ratio) and abs(ratio - 1) > PHASE_SUM_OFF:
        parts.append(f"(The phases, each timed with {d['device']} synchronized, add to {ratio:.2f}x the step"
                     + (": synchronizing each phase takes away what the device overlaps in a run.)" if ratio > 1
                        else ": part of the step was not in any phase.)"))
    if d.get("op_timing_error"):
        parts.append(f"({d['op_timing_error'][0].upper()}{d['op_timing_error'][1:]}.)")
    elif d.get("op_clock") and d.get("kind") != "cpu":
        parts.append(f"(Its operations were timed by {d['op_clock']}.)")
    par, after = d.get("parity"), d.get("after")
    if par:
        if par.get("judged") == "finite only":
            parts.append(f"In {par.get('precision')} the CPU has no other arithmetic to be judged by: its difference "
                         f"from float64 ({_err(par['worst_rel_err'])} at most) is that precision's rounding, and only "
                         "NaN or Inf would count" + (", which it has none of." if par.get("ok") else
                                                      ", which it has."))
        elif par.get("ok"):
            parts.append(f"It matches the float64 CPU reference (largest relative error {_err(par['worst_rel_err'])}).")
        else:
            where, err = _failed(par)
            parts.append(f"It differs from the float64 CPU reference beyond tolerance: relative error {_err(err)} in "
                         f"{where} (tolerance {par['tolerance']:.0e}).")
    for key, when in (("layers", ""), ("after_layers", f" after {((after or {}).get('steps') or 0):,} training steps")):
        found = d.get(key) or {}
        if found.get("first_nonfinite"):
            row = found["first_nonfinite"]
            parts.append(f"The first module whose output holds NaN or Inf{when} is `{row['module']}` ({row['type']}).")
        elif found.get("first_wrong"):
            row = found["first_wrong"]
            parts.append(f"The first module beyond tolerance{when} is `{row['module']}` ({row['type']}): relative "
                         f"error {_err(row['max_rel_err'])} (tolerance {found['tolerance']:.0e}).")
        elif found.get("rows") and found.get("judged") == "finite only":
            parts.append(f"None of its {len(found['rows']):,} leaf-module calls{when} holds NaN or Inf.")
        elif found.get("rows"):
            failed = (par if key == "layers" else after) or {}
            parts.append(f"Each of its {len(found['rows']):,} leaf-module calls{when} agrees with the float64 CPU "
                         "reference" + (", so the difference arises outside them (the model's own code between "
                                        "modules) or in the backward pass." if failed.get("ok") is False else "."))
    if after and after.get("judged") == "finite only":
        parts.append(f"After {after['steps']:,} training steps it " + ("still holds no NaN or Inf." if after.get("ok")
                                                                        else "holds NaN or Inf."))
    elif after:
        if after.get("ok"):
            parts.append(f"After {after['steps']:,} training steps it " + ("still matches the reference." if (par or {})
                                                                            .get("ok", True) else "matches the reference."))
        else:
            where, err = _failed(after)
            parts.append(f"After {after['steps']:,} training steps it " + ("no longer matches" if (par or {}).get(
                "ok", True) else "still does not match") + f" the reference: relative error {_err(err)} in {where}.")
    refused = (d.get("preflight") or {}).get("refused") or []
    if refused and (d.get("preflight") or {}).get("cast"):
        parts.append(f"MPS has no float64 or complex128: an MPS run casts {', '.join(refused[:3])}, as chosen.")
    elif refused:
        parts.append(f"MPS would refuse {', '.join(refused[:3])} (no float64 or complex128): make them float32, or "
                     "cast them for MPS (--cast-float64).")
    note = (d.get("preflight") or {}).get("note")
    if note:
        parts.append(note)
    if d.get("parity_error"):
        parts.append(d["parity_error"][0].upper() + d["parity_error"][1:] + ".")
    return " ".join(parts)


def _failed(par: dict) -> tuple[str, float | None]:
    """(what differs, its error): the first tensor beyond tolerance (parity_of sorts failures first)."""
    if not par.get("loss_ok", True):
        return "the loss", par.get("loss_rel_err")
    if not par.get("logits_ok", True):
        return "the logits", par.get("logits_max_rel_err")
    bad = next((g for g in par.get("grads") or [] if not g.get("ok", True)), None)
    if bad is not None:
        return f"the gradient of {bad['name']}", bad.get("max_rel_err")
    return "its outputs", par.get("worst_rel_err")


def sentence(result: dict) -> str:
    said = [device_sentence(d) for d in result.get("devices") or []]
    if result.get("stopped"):
        said.append("Stopped before every device was diagnosed.")
    return " ".join(said) or "Nothing was diagnosed."


def _err(v) -> str:
    return f"{v:.1e}" if is_finite(v) else "not finite"


def _ms(v) -> str:
    return f"{v:,.3f}" if is_finite(v) and v < 1 else f"{v:,.2f}" if is_finite(v) else DASH


def anatomy_table(result: dict) -> Table:
    """One line per device: the step and its phases (ms, median; measured), operations, launch cost, waits, bound."""
    headers = ["device", "bound", "step ms (median, no sync)", "±", *(f"{PHASE_WORDS[p]} ms" for p in PHASES),
               "phases ÷ step", "device ms (estimated)", "ops / step", "host µs / op", "waits / step", "CPU fallback"]
    rows = []
    for d in result.get("devices") or []:
        if "error" in d:
            rows.append([d.get("device", "?"), "not run", *[""] * (len(headers) - 3), d["error"]])
            continue
        launch = (f"{d['launch_us']:,.1f} ({d.get('launch_measure', '')})" if is_finite(d.get("launch_us"))
                  else DASH)
        waits = (f"{d['sync_count']:,}" + (f" ({_ms(d.get('sync_wait_ms'))} ms)" if d.get("sync_count") else "")
                 if d.get("sync_count") is not None else DASH)
        share = d.get("fallback_share")
        rows.append([d["device"], d.get("bound", "?"), _ms(d.get("step_ms")),
                     fmt_spread(spread_of(d.get("step_ms"), d.get("step_iqr_ms"))),  # the one ± rule
                     *(_ms(d.get(f"{p}_ms")) for p in PHASES),
                     f"{d['phase_sum_ratio']:.2f}" if is_finite(d.get("phase_sum_ratio")) else DASH,
                     _ms(d.get("device_ms")), f"{d['ops']:,}" if d.get("ops") is not None else DASH, launch, waits,
                     f"{share:.0%}" if is_finite(share) else ("none" if d.get("kind") == "mps" else "n/a")])
    numeric = [False, False, *[True] * (len(headers) - 3), False]
    return Table(headers, rows, numeric)


def layers_table(found: dict, limit: int = 60) -> Table:
    """The leaf modules in call order (the first beyond tolerance marked), up to `limit` lines around it."""
    headers = ["module", "type", "max relative error", "CPU's own error, same precision", "within tolerance",
               "input range"]
    rows_in = found.get("rows") or []
    first = found.get("first_wrong") or found.get("first_nonfinite")
    at = next((i for i, r in enumerate(rows_in) if first and r["module"] == first["module"]), 0)
    start = max(0, min(at - limit // 2, len(rows_in) - limit))
    rows = []
    for r in rows_in[start:start + limit]:
        ok = "yes" if r.get("ok") else "NO"
        if not r.get("finite", True):
            ok += " (NaN/Inf)"
        span = r.get("input_range")
        rows.append([("▶ " if first and r["module"] == first["module"] else "") + r["module"], r.get("type", ""),
                     _err(r.get("max_rel_err")), _err(r["cpu_rel_err"]) if r.get("cpu_rel_err") is not None else DASH,
                     ok, f"{span[0]:.3g} to {span[1]:.3g}" if span else DASH])
    return Table(headers, rows, [False, False, True, True, False, False])


def memory_cells(d: dict) -> str:
    """"tensors 12.0 MiB · driver 96.0 MiB · process 1.2 GiB" after the diagnostic steps."""
    m = d.get("memory") or {}
    names = (("current_allocated", "tensors"), ("driver_allocated", "driver"), ("allocated", "tensors"),
             ("reserved", "reserved"), ("process", "process"), ("swap_used", "swap (machine)"))
    return " · ".join(f"{word} {fmt_bytes(m[key]) if m[key] > 0 else '0 B'}" for key, word in names
                      if is_finite(m.get(key))) or DASH


def title(result: dict) -> str:
    cfg = result.get("config") or {}
    where = ", ".join(d.get("device", "?") for d in result.get("devices") or []) or "no device"
    return f"Diagnosis: {cfg.get('model', '?')} on {cfg.get('dataset', '?')} at batch {cfg.get('batch_size', '?')}, {where}"
