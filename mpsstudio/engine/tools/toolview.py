"""Tables of the tools' results, in words and units, for every front end (the CLI prints them, the window shows
them): one place decides what a cell says, so the two never disagree."""

from __future__ import annotations

import math
from collections.abc import Sequence

from ..basics.config import RunConfig
from ..basics.formatting import (DASH, fmt_bytes, fmt_duration, fmt_err, fmt_rate, fmt_spread, instant, is_finite,
                                 plural, spread_of)
from ..basics.results import RunResult
from ..basics.formatting import SPREAD_WORDS, Chart, Table
from ..machine.probe import NOT_WORKING
from . import registry
from .records import MaxBatchResult, SweepResult
from .records.deploy import DeployResult, DeployRow
from .records.export import ExportResult, Output, Tensor
from .records.inspection import InspectResult, Parity
from .records.tune import TuneResult, TuneRow

TITLES = {name: title for name, title in registry.TITLES.items() if name in registry.STORED}


def _ms(v) -> str:
    return f"{v:,.2f}" if is_finite(v) else DASH


def _rel(v) -> str:
    """A parity error, which always exists: null in a file is one that was not finite (JSON has no infinity)."""
    return f"{v:.1e}" if is_finite(v) else "not finite"


def _iqr_percent(sps, iqr) -> str:
    """The one ± rule (basics/formatting.py): half the IQR over the median."""
    return fmt_spread(spread_of(sps, iqr))


def sweep_table(result: SweepResult | dict) -> Table:
    headers = ["device", "batch", "samples/s (median, measured)", "±", "step ms", "status"]
    rows = []
    for p in SweepResult.of(result).points:
        status = p.status or ""
        if p.stability == "noisy" and status == "finished":
            status = "noisy"
        if p.error:
            status = f"{status}: {p.error}"
        rows.append([p.device, f"{p.batch_size:,}", fmt_rate(p.samples_per_s),
                     _iqr_percent(p.samples_per_s, p.samples_per_s_iqr), _ms(p.step_ms), status])
    return Table(headers, rows, [False, True, True, True, True, False])


def max_batch_table(result: MaxBatchResult | dict) -> Table:
    r = MaxBatchResult.of(result)
    steps = r.probe_steps or 3
    tokens = r.axis == "seq_len"
    headers = [f"tokens a sequence (batch {r.at_batch or 1:,})" if tokens else "batch", "fits",
               f"{'tokens' if tokens else 'samples'}/s (measured, {steps} steps: rough)", "step ms", "memory",
               "why not"]
    rows = []
    for p in sorted(r.probes, key=lambda p: p.batch_size):
        memory = fmt_bytes(p.memory) if p.memory is not None else DASH
        rows.append([f"{p.batch_size:,}", "yes" if p.fits else "no", fmt_rate(p.samples_per_s), _ms(p.step_ms),
                     memory, p.reason or ""])
    return Table(headers, rows, [True, False, True, True, True, False])


def parity_table(result: InspectResult | dict, limit: int = 12) -> Table:
    """Loss, logits and the gradients (failures first, then the largest errors) against the float64 CPU reference,
    beside the CPU's own error in the same precision."""
    par = InspectResult.of(result).parity
    headers = ["tensor", "max relative error", "CPU's own error, same precision", "within tolerance"]
    numeric = [False, True, True, False]
    if not par:
        return Table(headers, [], numeric)

    def row(name, err, cpu_err, ok):
        return [name, _rel(err), fmt_err(cpu_err), "yes" if ok else "NO"]
    rows = [row("loss", par.loss_rel_err, par.loss_cpu_rel_err, par.loss_ok),
            row("logits", par.logits_max_rel_err, par.logits_cpu_rel_err, par.logits_ok)]
    grads = par.grads
    rows += [row(f"grad {g.name}", g.max_rel_err, g.cpu_rel_err, g.ok) for g in grads[:limit]]
    if len(grads) > limit:
        rows.append([f"... {len(grads) - limit} more gradients" + ("" if all(g.ok for g in grads[limit:])
                                                                    else ", some beyond tolerance"), "", "", ""])
    return Table(headers, rows, numeric)


def fallback_table(result: InspectResult | dict) -> Table:
    headers = ["operation on the CPU", "calls per step", "share of time in operations"]
    rows = [[o.op, f"{o.count:,}", f"{o.share:.0%}" if is_finite(o.share) else DASH]
            for o in InspectResult.of(result).fallback_ops]
    return Table(headers, rows, [False, True, True])


def deploy_table(result: DeployResult | dict) -> Table:
    """One line per model, place and batch size: latency (median and IQR, measured), samples/s, agreement."""
    headers = ["model", "where", "batch", "first call ms", "latency ms (median, measured)", "IQR ms", "samples/s",
               "max rel. err", "top-1", "energy mJ/sample", "note"]
    rows = []
    for r in DeployResult.of(result).rows:
        lat = _ms(r.latency_ms) + (" noisy" if r.stability == "noisy" else "")
        top1 = DASH if r.top1_agreement is None else f"{r.top1_agreement:.0%}"
        sps = DASH if r.samples_per_s is None else f"{r.samples_per_s:,.1f}"
        first = _ms(r.first_s * 1000) if is_finite(r.first_s) else DASH
        rows.append([r.model, r.label, str(r.batch_size), first, lat, _ms(r.latency_iqr_ms), sps,
                     fmt_err(r.max_rel_err), top1, energy_cell(r), r.reason or ""])
    return Table(headers, rows, [False, False, True, True, True, True, True, True, True, True, False])


def energy_cell(row: DeployRow) -> str:
    """"4.21 estimated (cpu 1.10, gpu 2.90, ane 0.21)": a deploy row's energy per sample, its parts, and whether
    it was measured or estimated; a dash for a row that did not run."""
    value = row.energy_mj_per_sample
    if not is_finite(value):
        return DASH
    parts = row.energy_parts_mj
    listed = ", ".join(f"{p} {v:.3g}" for p in ("cpu", "gpu", "ane", "dram") if is_finite(v := parts.get(p)))
    return f"{value:.3g} {row.energy_measure or ''}".rstrip() + (f" ({listed})" if listed else "")


def export_table(result: ExportResult | dict) -> Table:
    """What an export wrote and how it was checked, one line each."""
    r = ExportResult.of(result)
    check = r.check
    agrees = ("not checked here: " + str(check.reason)) if check.ok is None else (
        "agrees" if check.ok else f"does NOT agree: {check.reason}")
    inp, out = r.input or Tensor(), r.output or Output()
    rows = [["written to", str(r.path)], ["format", f"{r.format} ({r.precision})"],
            ["size", f"{r.bytes:,} bytes"],
            ["input", f"{inp.name} {inp.shape} {inp.dtype}"],
            ["output", f"{out.name} {out.shape}"],
            ["check against PyTorch", agrees], ["max relative error", fmt_err(check.max_rel_err)],
            ["top-1 agreement", DASH if check.top1_agreement is None else f"{check.top1_agreement:.0%}"],
            ["weights", str(r.weights_note)],
            ["classes", ", ".join(r.classes) or DASH]]
    if r.minimum_deployment_target:
        rows.insert(2, ["runs on", str(r.minimum_deployment_target)])
    packed = r.compression
    if packed is not None:
        rows.insert(3, ["compressed weights", f"{packed.method}: {packed.bytes:,} bytes against "
                                              f"{packed.uncompressed_bytes:,} uncompressed"])
    return Table(["what", "value"], rows, [False, False])


def safe_title(kind: str, result: dict, problem: str | None = None) -> str:
    """title(), or "Batch-size sweep: cannot be shown" for a stored row that does not pass its shape (or any title
    that fails): a list of results is never broken by one of them."""
    if not problem:
        try:
            return title(kind, result)
        except Exception:  # said in the list; the detail says why
            pass
    return f"{TITLES.get(kind, str(kind)[:40])}: cannot be shown"


def title(kind: str, result: dict) -> str:
    """"Batch-size sweep: resnet18 on cifar10, cpu and mps" and the like (a row's `subject` where it has one)."""
    tool = registry.TOOLS.get(kind)
    if tool is not None and tool.subject:
        return f"{tool.title}: {tool.call('subject', result)}"
    if kind == "deploy-bench":
        return f"{TITLES.get(kind, kind)}: {', '.join(DeployResult.of(result).models)}"
    if kind == "export":
        exported = ExportResult.of(result)
        return f"{TITLES[kind]}: {'?' if exported.model is None else exported.model} as {exported.format}"
    if kind == "diagnose":
        from .diagnose.view import read as read_diagnosis, title as diagnose_title

        return diagnose_title(read_diagnosis(result))
    cfg = result.get("config") or {}
    what = f"{cfg.get('model', '?')} on {cfg.get('dataset', '?')}"
    if kind == "sweep":
        devices = list(dict.fromkeys(p.device for p in SweepResult.of(result).points))
        return f"{TITLES[kind]}: {what}, {' and '.join(devices) or 'no device'}"
    if kind == "tune":
        devices = list(dict.fromkeys(c.device for c in TuneResult.of(result).candidates))
        return f"{TITLES[kind]}: {what}, {' and '.join(devices) or 'no device'}"
    precision = f", {cfg.get('precision')}" if kind == "inspect" and cfg.get("precision") else ""
    if precision and cfg.get("tf32") is True:
        precision += " with TF32"
    return f"{TITLES.get(kind, kind)}: {what} on {result.get('device', '?')}{precision}"


def inspect_sentence(result: InspectResult | dict) -> str:
    """What inspect found, in words: parity first (wrong results matter most), then fallbacks, then the probe."""
    r = InspectResult.of(result)
    device = r.device or "?"
    parts = []
    if not r.probe.ok:
        parts.append(f"{device} is {NOT_WORKING}: {r.probe.detail}.")
    par = r.parity
    if par:
        what = f"{par.precision}, tolerance {par.tolerance:.0e}"
        if par.ok:
            parts.append(f"{device} matches the float64 CPU reference ({what}, or {par.cpu_factor:g}x "
                         f"the CPU's own error in {_cpu_precision(par)}): largest relative error "
                         f"{_rel(par.worst_rel_err)}.")
        else:
            advice = ("TF32 rounds matmul inputs to 10 bits; turn it off where these values matter"
                      if par.precision == "tf32" else "its results here are not to be trusted")
            parts.append(f"{device} differs from the float64 CPU reference beyond tolerance ({what}, or "
                         f"{par.cpu_factor:g}x the CPU's own error in {_cpu_precision(par)}): relative "
                         f"error {_rel(_bad_error(par))} in {_worst_name(par)}; {advice}.")
    ops = r.fallback_ops
    if ops:
        names = ", ".join(o.op for o in ops[:3]) + (", ..." if len(ops) > 3 else "")
        share = r.fallback_share
        timing = f" ({share:.0%} of the time spent in operations)" if share is not None else ""
        parts.append(f"{plural(len(ops), 'operation')} ran on the CPU{timing}: {names}; each copies its tensors "
                     f"to the CPU and back, which slows every step.")
    elif r.fallback_applies:
        parts.append(f"Every operation of a training step ran on {device} (no CPU fallback).")
    if r.stopped:
        parts.append("Stopped before every check ran.")
    if not par:
        parts += [n for n in r.notes if n.startswith("Parity")]
    return " ".join(parts) or f"Nothing was checked on {device}."


def _cpu_precision(par: Parity) -> str:
    return par.cpu_precision or ("fp32" if par.precision == "tf32" else par.precision)


def _bad_error(par: Parity) -> float | None:
    if not par.loss_ok:
        return par.loss_rel_err
    if not par.logits_ok:
        return par.logits_max_rel_err
    bad = next((g for g in par.grads if not g.ok), None)
    return bad.max_rel_err if bad else par.worst_rel_err


def _worst_name(par: Parity) -> str:
    """The tensor to name: the first beyond tolerance (parity_of sorts failures first), else the largest error."""
    if not par.loss_ok:
        return "the loss"
    if not par.logits_ok:
        return "the logits"
    bad = next((g for g in par.grads if not g.ok), None)
    if bad is not None:
        return f"the gradient of {bad.name}"
    worst = par.worst_rel_err
    if par.loss_rel_err == worst:
        return "the loss"
    if par.logits_max_rel_err == worst:
        return "the logits"
    return f"the gradient of {par.grads[0].name}" if par.grads else "the gradients"


# ---------------------------------------------------------------- what a tool will do (the window's tool sheets)
# The estimate is deliberately plain: a point's steps at an earlier run's samples/s (taken as the same at every batch
# size: larger batches usually run faster per sample, so it leans long), plus a run process's start per point
# (launch.PROCESS_S); without an earlier run of the setup there is no figure, only the counts.

def reference_rate(config: RunConfig, device: str, runs: Sequence[RunResult]) -> float | None:
    """samples/s of the newest finished run of the same model, dataset, precision and mode on `device`."""
    same = [r for r in runs if r.status == "finished" and r.config.device == device and r.config.model == config.model
            and r.config.dataset == config.dataset and r.config.precision == config.precision
            and r.config.mode == config.mode and (r.summary.samples_per_s or 0) > 0]
    if not same:
        return None
    return max(same, key=lambda r: instant(r.created_at)).summary.rate


def sweep_line(config: RunConfig, devices: Sequence[str], sizes: Sequence[int], steps: int, warmup: int,
               runs: Sequence[RunResult]) -> str:
    """"18 runs (9 batch sizes × 2 devices) of 3 warm-up + 24 measured steps; about 2 min (estimated from your
    last runs of this setup)"."""
    points = len(sizes) * len(devices)
    text = (f"{plural(points, 'run')} ({plural(len(sizes), 'batch size')} × {plural(len(devices), 'device')}) of "
            f"{warmup:,} warm-up + {steps:,} measured steps")
    found = {d: reference_rate(config, d, runs) for d in devices}
    rates = {d: r for d, r in found.items() if r is not None}
    if len(rates) < len(found):
        return text + "; how long: unknown until the first point (no earlier run of this setup on every device)"
    from .launch import PROCESS_S

    seconds = sum(PROCESS_S + (steps + warmup) * b / rates[d] for b in sizes for d in devices)
    return text + f"; about {fmt_duration(seconds)} (estimated from your last runs of this setup; could be 2-3× off)"


def max_batch_line(cap: int, cap_source: str, axis: str = "batch", at: int = 1) -> str:
    """"up to 34 probes (doubling to 65,536, then bisecting), each 1 + 3 training steps"; `axis` "seq_len": the
    probes are sequence lengths at the batch `at`, up to the positions the model takes."""
    doubling = int(math.log2(max(1, cap))) + 1
    capped = f"; the largest tried: {cap:,} ({cap_source})" if cap_source else ""
    what = ("" if axis == "batch" else
            f" of the sequence length at batch {at:,} (up to the positions the model takes and {cap:,})")
    return (f"up to {doubling + doubling:,} probes{what} (doubling from 1, then bisecting), each one untimed and 3 "
            f"timed training steps{capped}")


TUNE_LEGEND = ("interval: samples/s over the rounds (their range up to 8, from 9 the 95 % interval of the median), "
               "or the 95 % bootstrap over measurement windows after one round; vs current: samples/s over your "
               "current settings', its interval over the paired rounds (one round: 95 % bootstrap); loss vs fp32: after the same steps from the same seed; parity: "
               "one step against the CPU in float64 (on the CPU, the precision's worst relative rounding error).")
TUNE_ORDER = {"measured": 0, "dropped": 1, "unusable": 2, "failed": 3, "not measured": 4, "refused": 5}


def tune_rows(result: TuneResult | dict) -> list[TuneRow]:
    """A tune's candidates as the table lists them: per device, the measured by samples/s (fastest first), then the
    dropped, the unusable, the failed, the unmeasured and the refused."""
    return sorted(TuneResult.of(result).candidates, key=lambda r: (
        r.device, TUNE_ORDER.get(r.status, 9), -(r.samples_per_s or 0.0)))


def tune_table(result: TuneResult | dict) -> Table:
    headers = ["device", "settings", "samples/s (measured)", "interval", "vs current", "peak memory", "warm-up",
               "loss vs fp32", "parity", "status"]
    tuned = TuneResult.of(result)
    chosen = set(tuned.recommendation.values())
    rows = []
    for r in tune_rows(tuned):
        low, high = r.samples_per_s_low, r.samples_per_s_high
        interval = f"{fmt_rate(low)}-{fmt_rate(high)}" if is_finite(low) and is_finite(high) else DASH
        speed = r.speedup
        vs = DASH if not is_finite(speed) else ("current" if r.baseline else f"{speed:.2f}x")
        if is_finite(speed) and not r.baseline and is_finite(r.speedup_low) and is_finite(r.speedup_high):
            vs += f" [{r.speedup_low:.2f}-{r.speedup_high:.2f}]"
        loss = r.loss_vs_fp32
        # on the CPU, a reduced precision's error against float64 is its own rounding: the figure, not a verdict
        parity = DASH if r.parity_ok is None else "ok" if r.parity_ok else (
            f"{fmt_err(r.parity_worst)} (rounding)" if r.device == "cpu" else "WRONG")
        status = ("recommended" if r.key in chosen else r.status) + (f": {r.reason}" if r.reason else "")
        rows.append([r.device, r.label + (" (current)" if r.baseline else ""), fmt_rate(r.samples_per_s),
                     interval, vs, fmt_bytes(r.peak_memory), fmt_duration(r.warmup_s),
                     (f"{loss:+.1%}" if abs(loss) >= 0.0005 else "0.0%") if is_finite(loss) else DASH, parity,
                     status])
    return Table(headers, rows, [False, False, True, True, True, True, True, True, False, False])


def inspect_rederived(result: dict) -> dict:
    """A read inspection's sentence from its numbers (a file cannot make them disagree)."""
    result["sentence"] = inspect_sentence(result)
    return result


# -- a result's section of a report (its row's `section` in registry.TABLE): its tables with their legends, a chart
Section = tuple[list[Table], Chart | None]


def sweep_section(result: dict) -> Section:
    points = [p for p in SweepResult.of(result).points if is_finite(p.samples_per_s)]
    return ([sweep_table(result).with_legend(f"{SPREAD_WORDS}. Step ms and samples/s are measured.")],
            Chart([f"{p.device} batch {p.batch_size:,}" for p in points], [p.samples_per_s for p in points],
                  "samples/s (median, measured)", notes=["noisy" if p.stability == "noisy" else "" for p in points]))


def max_batch_section(result: dict) -> Section:
    r = MaxBatchResult.of(result)
    probes = sorted(r.probes, key=lambda p: p.batch_size)
    tokens = r.axis == "seq_len"
    return ([max_batch_table(result)],
            Chart([f"{p.batch_size:,} tokens" if tokens else f"batch {p.batch_size:,}" for p in probes],
                  [p.samples_per_s for p in probes],
                  f"{'tokens' if tokens else 'samples'}/s of each probe (measured over a few steps: rough)",
                  notes=["" if p.fits else "does not fit" for p in probes]))


def tune_section(result: dict) -> Section:
    rows = [r for r in tune_rows(result) if is_finite(r.samples_per_s)]
    return ([tune_table(result).with_legend(TUNE_LEGEND)],
            Chart([f"{r.device}: {r.label}" for r in rows], [r.samples_per_s for r in rows], "samples/s (measured)",
                  [r.samples_per_s_low for r in rows], [r.samples_per_s_high for r in rows],
                  notes=[r.status if r.status != "measured" else "" for r in rows]))


def inspect_section(result: dict) -> Section:
    inspected, tables = InspectResult.of(result), []
    par = inspected.parity
    if par:
        tables.append(parity_table(inspected, limit=50).with_legend(
            f"Parity with the CPU in float64 ({par.precision}; relative error = max|device - reference| / "
            f"max|reference|; one batch of {par.batch_size or '?'})."))
    if inspected.fallback_ops:
        tables.append(fallback_table(inspected).with_legend("Operations that ran on the CPU during one training step, "
                                                            "each timed with the device synchronized around it."))
    return tables, None


def deploy_section(result: dict) -> Section:
    return [deploy_table(result).with_legend("Latency and throughput measured; energy where a meter was read.")], None


def export_section(result: dict) -> Section:
    return [export_table(result)], None
