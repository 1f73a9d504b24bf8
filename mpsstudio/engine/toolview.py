"""Tables of the tools' results, in words and units, for every front end (the CLI prints them, the window shows
them): one place decides what a cell says, so the two never disagree."""

from __future__ import annotations

from .formatting import DASH, fmt_bytes, fmt_rate, is_finite

TITLES = {"sweep": "Batch-size sweep", "max-batch": "Largest batch", "inspect": "Inspection"}


def _ms(v) -> str:
    return f"{v:,.2f}" if is_finite(v) else DASH


def _err(v) -> str:
    if v is None:
        return DASH
    return f"{v:.1e}" if is_finite(v) else "not finite"


def _iqr_percent(sps, iqr) -> str:
    if not (is_finite(sps) and is_finite(iqr)) or sps <= 0:
        return DASH
    return f"±{50 * iqr / sps:.0f} %"


def sweep_table(result: dict) -> tuple[list[str], list[list[str]], list[bool]]:
    headers = ["device", "batch", "samples/s (median, measured)", "spread (±IQR/2)", "step ms", "status"]
    rows = []
    for p in result.get("points", []):
        status = p.get("status") or ""
        if p.get("stability") == "noisy" and status == "finished":
            status = "noisy"
        if p.get("error"):
            status = f"{status}: {p['error']}"
        rows.append([p["device"], f"{p['batch_size']:,}", fmt_rate(p.get("samples_per_s")),
                     _iqr_percent(p.get("samples_per_s"), p.get("samples_per_s_iqr")), _ms(p.get("step_ms")),
                     status])
    return headers, rows, [False, True, True, True, True, False]


def max_batch_table(result: dict) -> tuple[list[str], list[list[str]], list[bool]]:
    headers = ["batch", "fits", "samples/s (measured)", "step ms", "memory", "why not"]
    rows = []
    for p in sorted(result.get("probes", []), key=lambda p: p["batch_size"]):
        memory = fmt_bytes(p.get("memory")) if p.get("memory") is not None else DASH
        rows.append([f"{p['batch_size']:,}", "yes" if p["fits"] else "no", fmt_rate(p.get("samples_per_s")),
                     _ms(p.get("step_ms")), memory, p.get("reason") or ""])
    return headers, rows, [True, False, True, True, True, False]


def parity_table(result: dict, limit: int = 12) -> tuple[list[str], list[list[str]], list[bool]]:
    """Loss, logits and the gradients (failures first, then the largest errors) against the float64 CPU reference,
    beside the CPU's own error in the same precision."""
    par = result.get("parity") or {}
    headers = ["tensor", "max relative error", "CPU's own error, same precision", "within tolerance"]
    numeric = [False, True, True, False]
    if not par:
        return headers, [], numeric

    def row(name, err, cpu_err, ok):
        return [name, _err(err), _err(cpu_err), "yes" if ok else "NO"]
    rows = [row("loss", par.get("loss_rel_err"), par.get("loss_cpu_rel_err"), par.get("loss_ok", True)),
            row("logits", par.get("logits_max_rel_err"), par.get("logits_cpu_rel_err"), par.get("logits_ok", True))]
    grads = par.get("grads") or []
    rows += [row(f"grad {g['name']}", g.get("max_rel_err"), g.get("cpu_rel_err"), g.get("ok", True))
             for g in grads[:limit]]
    if len(grads) > limit:
        rows.append([f"... {len(grads) - limit} more gradients" + ("" if all(g.get("ok", True) for g in grads[limit:])
                                                                    else ", some beyond tolerance"), "", "", ""])
    return headers, rows, numeric


def fallback_table(result: dict) -> tuple[list[str], list[list[str]], list[bool]]:
    headers = ["operation on the CPU", "calls per step", "share of time in operations"]
    rows = [[o["op"], f"{o['count']:,}", f"{o['share']:.0%}" if is_finite(o.get("share")) else DASH]
            for o in result.get("fallback_ops") or []]
    return headers, rows, [False, True, True]


def title(kind: str, result: dict) -> str:
    """"Batch-size sweep: resnet18 on cifar10, cpu and mps" and the like."""
    cfg = result.get("config") or {}
    what = f"{cfg.get('model', '?')} on {cfg.get('dataset', '?')}"
    if kind == "sweep":
        devices = list(dict.fromkeys(p["device"] for p in result.get("points", [])))
        return f"{TITLES[kind]}: {what}, {' and '.join(devices) or 'no device'}"
    precision = f", {cfg.get('precision')}" if kind == "inspect" and cfg.get("precision") else ""
    return f"{TITLES.get(kind, kind)}: {what} on {result.get('device', '?')}{precision}"
