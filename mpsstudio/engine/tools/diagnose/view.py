"""A diagnosis in words and tables, for every front end (the CLI prints them, the window shows them), re-derived
from its numbers on every read: a file cannot make its words disagree with them. No torch here."""

from __future__ import annotations

from ...analysis.bottleneck import PHASES, judged
from ...basics.formatting import DASH, fmt_beyond, fmt_bytes, fmt_spread, is_finite, spread_of
from ...basics.formatting import Chart, Table
from ..records.diagnose import DeviceFailed, Diagnosed, Diagnosis, Layers
from ..records.inspection import Parity

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


def read(result: dict | Diagnosis) -> Diagnosis:
    """A checked diagnosis (registry.checked) as its typed record, each device judged again (`rederived`)."""
    return result if isinstance(result, Diagnosis) else Diagnosis.built(rederived(result))


def device_sentence(d: Diagnosed | DeviceFailed) -> str:
    """One device: its bound, then the first wrong layer or the parity, the memory, what MPS refuses."""
    if isinstance(d, DeviceFailed):
        return f"{d.device}: {d.error}"
    parts = [f"{d.device} is {d.bound}-bound: {d.sentence.split(': ', 1)[-1]}"]
    step, iqr = d.step_ms, d.step_iqr_ms
    if step > 0 and iqr / step > NOISY:
        parts.append(f"(Noisy: the step's time spread {fmt_beyond(iqr / 2 / step, NOISY / 2)} between groups of steps "
                     f"(half the IQR over the median, beyond {fmt_spread(NOISY / 2)}); other programs or heat were at "
                     "work: diagnose again on a quieter machine before acting on it.)")
    ratio = d.phase_sum_ratio
    if is_finite(ratio) and abs(ratio - 1) > PHASE_SUM_OFF:
        parts.append(f"(The phases, each timed with {d.device} synchronized, add to {ratio:.2f}x the step"
                     + (": synchronizing each phase takes away what the device overlaps in a run.)" if ratio > 1
                        else ": part of the step was not in any phase.)"))
    if d.op_timing_error:
        parts.append(f"({d.op_timing_error[0].upper()}{d.op_timing_error[1:]}.)")
    elif d.op_clock and d.kind != "cpu":
        parts.append(f"(Its operations were timed by {d.op_clock}.)")
    par, after = d.parity, d.after
    if par:
        if par.judged == "finite only":
            parts.append(f"In {par.precision} the CPU has no other arithmetic to be judged by: its difference "
                         f"from float64 ({_err(par.worst_rel_err)} at most) is that precision's rounding, and only "
                         "NaN or Inf would count" + (", which it has none of." if par.ok else ", which it has."))
        elif par.ok:
            parts.append(f"It matches the float64 CPU reference (largest relative error {_err(par.worst_rel_err)}).")
        else:
            where, err = _failed(par)
            parts.append(f"It differs from the float64 CPU reference beyond tolerance: relative error {_err(err)} in "
                         f"{where} (tolerance {par.tolerance:.0e}).")
    for found, failed, when in ((d.layers, par, ""),
                                (d.after_layers, after, f" after {(after.steps if after else 0):,} training steps")):
        if found is None:
            continue
        if found.first_nonfinite:
            row = found.first_nonfinite
            parts.append(f"The first module whose output holds NaN or Inf{when} is `{row.module}` ({row.type}).")
        elif found.first_wrong:
            row = found.first_wrong
            parts.append(f"The first module beyond tolerance{when} is `{row.module}` ({row.type}): relative "
                         f"error {_err(row.max_rel_err)} (tolerance {found.tolerance:.0e}).")
        elif found.rows and found.judged == "finite only":
            parts.append(f"None of its {len(found.rows):,} leaf-module calls{when} holds NaN or Inf.")
        elif found.rows:
            parts.append(f"Each of its {len(found.rows):,} leaf-module calls{when} agrees with the float64 CPU "
                         "reference" + (", so the difference arises outside them (the model's own code between "
                                        "modules) or in the backward pass." if failed and not failed.ok else "."))
    if after and after.judged == "finite only":
        parts.append(f"After {after.steps:,} training steps it " + ("still holds no NaN or Inf." if after.ok
                                                                     else "holds NaN or Inf."))
    elif after:
        before_ok = par.ok if par else True
        if after.ok:
            parts.append(f"After {after.steps:,} training steps it " + ("still matches the reference." if before_ok
                                                                         else "matches the reference."))
        else:
            where, err = _failed(after)
            parts.append(f"After {after.steps:,} training steps it " + ("no longer matches" if before_ok else
                                                                         "still does not match")
                         + f" the reference: relative error {_err(err)} in {where}.")
    refused = d.preflight.refused
    if refused and d.preflight.cast:
        parts.append(f"MPS has no float64 or complex128: an MPS run casts {', '.join(refused[:3])}, as chosen.")
    elif refused:
        parts.append(f"MPS would refuse {', '.join(refused[:3])} (no float64 or complex128): make them float32, or "
                     "cast them for MPS (--cast-float64).")
    if d.preflight.note:
        parts.append(d.preflight.note)
    if d.parity_error:
        parts.append(d.parity_error[0].upper() + d.parity_error[1:] + ".")
    return " ".join(parts)


def _failed(par: Parity) -> tuple[str, float | None]:
    """(what differs, its error): the first tensor beyond tolerance (parity_of sorts failures first)."""
    if not par.loss_ok:
        return "the loss", par.loss_rel_err
    if not par.logits_ok:
        return "the logits", par.logits_max_rel_err
    bad = next((g for g in par.grads if not g.ok), None)
    if bad is not None:
        return f"the gradient of {bad.name}", bad.max_rel_err
    return "its outputs", par.worst_rel_err


def sentence(result: dict) -> str:
    """The diagnosis in words: each device's sentence (from a dict with judged devices, as `rederived` makes)."""
    diagnosis = Diagnosis.built({**result, "sentence": ""})
    said = [device_sentence(d) for d in diagnosis.devices]
    if diagnosis.stopped:
        said.append("Stopped before every device was diagnosed.")
    return " ".join(said) or "Nothing was diagnosed."


def _err(v) -> str:
    return f"{v:.1e}" if is_finite(v) else "not finite"


def _ms(v) -> str:
    return f"{v:,.3f}" if is_finite(v) and v < 1 else f"{v:,.2f}" if is_finite(v) else DASH


def anatomy_table(result: Diagnosis) -> Table:
    """One line per device: the step and its phases (ms, median; measured), operations, launch cost, waits, bound."""
    headers = ["device", "bound", "step ms (median, no sync)", "±", *(f"{PHASE_WORDS[p]} ms" for p in PHASES),
               "phases ÷ step", "device ms (estimated)", "ops / step", "host µs / op", "waits / step", "CPU fallback"]
    rows = []
    for d in result.devices:
        if isinstance(d, DeviceFailed):
            rows.append([d.device, "not run", *[""] * (len(headers) - 3), d.error])
            continue
        launch = f"{d.launch_us:,.1f} ({d.launch_measure or ''})" if is_finite(d.launch_us) else DASH
        waits = (f"{d.sync_count:,}" + (f" ({_ms(d.sync_wait_ms)} ms)" if d.sync_count else "")
                 if d.sync_count is not None else DASH)
        share = d.fallback_share
        rows.append([d.device, d.bound, _ms(d.step_ms),
                     fmt_spread(spread_of(d.step_ms, d.step_iqr_ms)),  # the one ± rule
                     *(_ms(d.phase_ms(p)) for p in PHASES),
                     f"{d.phase_sum_ratio:.2f}" if is_finite(d.phase_sum_ratio) else DASH,
                     _ms(d.device_ms), f"{d.ops:,}" if d.ops is not None else DASH, launch, waits,
                     f"{share:.0%}" if is_finite(share) else ("none" if d.kind == "mps" else "n/a")])
    numeric = [False, False, *[True] * (len(headers) - 3), False]
    return Table(headers, rows, numeric)


def layers_table(found: Layers, limit: int = 60) -> Table:
    """The leaf modules in call order (the first beyond tolerance marked), up to `limit` lines around it."""
    headers = ["module", "type", "max relative error", "CPU's own error, same precision", "within tolerance",
               "input range"]
    first = found.first
    at = next((i for i, r in enumerate(found.rows) if first and r.module == first.module), 0)
    start = max(0, min(at - limit // 2, len(found.rows) - limit))
    rows = []
    for r in found.rows[start:start + limit]:
        ok = "yes" if r.ok else "NO"
        if not r.finite:
            ok += " (NaN/Inf)"
        span = r.input_range
        rows.append([("▶ " if first and r.module == first.module else "") + r.module, r.type,
                     _err(r.max_rel_err), _err(r.cpu_rel_err) if r.cpu_rel_err is not None else DASH,
                     ok, f"{span[0]:.3g} to {span[1]:.3g}" if span else DASH])
    return Table(headers, rows, [False, False, True, True, False, False])


def memory_cells(d: Diagnosed) -> str:
    """"tensors 12.0 MiB · driver 96.0 MiB · process 1.2 GiB" after the diagnostic steps."""
    m = d.memory
    names = (("current_allocated", "tensors"), ("driver_allocated", "driver"), ("allocated", "tensors"),
             ("reserved", "reserved"), ("process", "process"), ("swap_used", "swap (machine)"))
    return " · ".join(f"{word} {fmt_bytes(m[key]) if m[key] > 0 else '0 B'}" for key, word in names
                      if is_finite(m.get(key))) or DASH


def title(result: Diagnosis) -> str:
    cfg = result.config
    where = ", ".join(d.device for d in result.devices) or "no device"
    return f"Diagnosis: {cfg.get('model', '?')} on {cfg.get('dataset', '?')} at batch {cfg.get('batch_size', '?')}, {where}"


def section(result: dict) -> tuple[list[Table], Chart | None]:
    """A diagnosis's section of a report (its row's `section`): the anatomy, each device's layers, and the first
    device's phases as a chart."""
    diagnosis = read(result)
    tables = [anatomy_table(diagnosis).with_legend("Milliseconds per step: medians, each phase timed with the device "
                                                   "synchronized (measured).")]
    ran = [d for d in diagnosis.devices if isinstance(d, Diagnosed)]
    for d in ran:
        for found in (d.layers, d.after_layers):
            if found is not None and found.rows:
                tables.append(layers_table(found))
    if not ran:
        return tables, None
    first = ran[0]
    return tables, Chart([PHASE_WORDS[p] for p in PHASE_WORDS], [first.phase_ms(p) for p in PHASE_WORDS],
                         f"ms per step on {first.device} (median, measured)")
