"""Formatting one run into the results table's cells and tooltips; nothing is computed here."""

from __future__ import annotations

from ...engine.analysis import energy
from ...engine.analysis.compare import Comparison
from ...engine.basics.config import precision_note
from ...engine.basics.formatting import (SPREAD_WORDS, fmt_count, fmt_duration, fmt_rate, fmt_ratio, is_finite,
                                         local_time, plural)
from ...engine.basics.results import RunResult
from ...engine.history.columns import BY_KEY, TABLE_COLUMNS, cell_text
from .table_columns import STATE_GLYPHS, STATE_WORDS, Cell, fmt_time, sort_number


def run_cells(r: RunResult, comparison: Comparison | None, letter: str,
              speedups: dict[str, float | None]) -> list[Cell]:
    """One run as the table's cells: each column's text (the engine's value, formatted the engine's way), its sort
    key and its tooltip; `comparison` and `letter`: the comparison it is in; `speedups`: run id -> its speedup."""
    s = r.summary
    cells = {}
    for key in TABLE_COLUMNS:  # the engine's value, formatted the engine's way, sorted by the raw number
        column = BY_KEY[key]
        value = column.value(r, speedups)
        sort = sort_number(value) if column.numeric else str(value).lower()
        cells[key] = Cell(cell_text(key, r, speedups), sort)
    dt = local_time(r.created_at)
    cells["time"] = Cell(fmt_time(r.created_at), dt.timestamp() if dt else 0.0,
                         f"{dt:%A %d %B %Y, %H:%M:%S}" if dt else r.created_at)
    machine = r.machine + (" (imported)" if r.origin == "imported" else "")
    cells["machine"] = Cell(machine, machine.lower(), _machine_tooltip(r))
    cells["device"].tooltip = str(r.env.get("device_name") or "")
    cells["model"].tooltip = _model_tooltip(r)
    cells["dataset"].tooltip = str(s.dataset or "")
    cells["precision"].tooltip = _settings_tooltip(r)
    spread = cell_text("samples_per_s_spread", r, speedups)  # the one ± rule (columns.py)
    if is_finite(BY_KEY["samples_per_s_spread"].value(r, speedups)):
        cells["samples_per_s"].text += f" {spread}"
    if s.stability == "noisy":
        cells["samples_per_s"].text = "\u26a0\ufe0e " + cells["samples_per_s"].text
    cells["samples_per_s"].tooltip = _rate_tooltip(r)
    cells["speedup_vs_cpu"].tooltip = _speedup_tooltip(r, comparison, letter)
    entry = comparison.entry_of(r) if comparison else None
    if (entry is not None and not entry.is_baseline and entry.low is not None and entry.high is not None
            and r.id not in entry.round_speedups):
        cells["speedup_vs_cpu"].text += f" ({fmt_ratio(entry.low)}\u2013{fmt_ratio(entry.high)})"
    if s.warmup_steps:
        cells["warmup_s"].tooltip = plural(int(s.warmup_steps), "warm-up step")
    cells["s_per_epoch"].tooltip = _epoch_tooltip(r)
    cells["j_per_sample"].tooltip = _energy_tooltip(r)
    if r.status in ("cancelled", "interrupted"):
        cells["status"].tooltip = "Stopped before the end; its numbers cover the steps done."
    noisy = r.status == "finished" and s.stability == "noisy"
    state_tip = STATE_WORDS.get(r.status, r.status) + (f"; noisy: {s.stability_reason}" if noisy else "")
    if r.status == "failed" and r.error:
        state_tip += f": {r.error}"
    state = Cell("\u26a0\ufe0e" if noisy else STATE_GLYPHS.get(r.status, "?"), r.status, state_tip)
    badge = Cell(letter, letter or "~",
                 f"Comparison {letter}: {comparison.title()} on {plural(len(comparison.runs), 'device')}."
                 if comparison else "Not compared: no finished run of the same setup on another device.")
    note = Cell(r.note.replace("\n", " "), r.note.lower(), r.note)
    return [state, badge, *(cells[k] for k in TABLE_COLUMNS), note]

def _energy_tooltip(r: RunResult) -> str:
    """What the J/sample figure is (source, power, busy share), or why the cell is empty."""
    s = r.summary
    lines = [energy.describe(s)]
    if is_finite(s.energy_j):
        lines.append(f"{energy.fmt_joules(s.energy_j)} over the measurement windows.")
    if is_finite(s.utilization):
        what = "GPU busy" if s.utilization_measure == "gpu_busy" else "CPU busy (share of all cores)"
        lines.append(f"{what}: {s.utilization:.0f} % of the measured time.")
    return "\n".join(lines)

def _speedup_tooltip(r: RunResult, comparison: Comparison | None, letter: str) -> str:
    if comparison is None:
        return "Run the same setup on the CPU and another device to get a speedup."
    entry = comparison.entry_of(r)
    if entry is None or entry.baseline is None:
        return (f"Comparison {letter} has no CPU run from {r.machine} to divide by (another machine's CPU "
                "would not be a fair baseline).")
    if entry.is_baseline:
        return f"The CPU baseline of comparison {letter} on {r.machine}."
    text = (f"{fmt_rate(r.summary.samples_per_s)} / "
            f"{fmt_rate(entry.baseline.summary.samples_per_s)} samples/s on the same machine's CPU.")
    if entry.low is not None and entry.high is not None:
        how = "95 % interval" if entry.method == "bootstrap" else "range of the paired rounds"
        text += f"\n{how}: {entry.low:.2f}\u2013{entry.high:.2f}\u00d7"
        if entry.unclear():
            text += " (contains 1.00: no clear difference)"
    return text

def _machine_tooltip(r: RunResult) -> str:
    env = r.env
    parts = [r.machine]
    for key, label in (("os", "OS"), ("python", "Python"), ("torch", "PyTorch"), ("threads", "CPU threads")):
        if env.get(key) not in (None, ""):
            parts.append(f"{label} {env[key]}")
    if r.origin == "imported":
        parts.append("imported from a file")
    return " \u00b7 ".join(str(p) for p in parts)

def _model_tooltip(r: RunResult) -> str:
    params = r.summary.parameters
    return f"{fmt_count(params)} parameters" if is_finite(params) else ""

def _settings_tooltip(r: RunResult) -> str:
    cfg = r.config
    length = f"{plural(cfg.steps, 'step')}" if cfg.steps else f"{plural(cfg.epochs or 0, 'epoch')}"
    flags = [name for name, on in (("channels-last", cfg.channels_last), ("torch.compile", cfg.compile),
                                   ("TF32", cfg.tf32), ("TF32 in convolutions", cfg.tf32_conv and not cfg.tf32),
                                   ("data on the device", cfg.resident)) if on]
    if cfg.is_script:  # what the script used, read from it (run/script/settings.py)
        words = r.summary.script_settings_words
        text = "; ".join(str(w) for w in words) if isinstance(words, list) and words else "settings not known"
        return f"The script's own: {text}."
    text = f"{cfg.precision}, {cfg.optimizer} lr {cfg.lr:g}, {length}, {cfg.mode}"
    text += f"; {', '.join(flags)}" if flags else ""
    return text + (f".\n{precision_note(cfg)}" if precision_note(cfg) else "")

def _rate_tooltip(r: RunResult) -> str:
    s = r.summary
    if not is_finite(s.samples_per_s):
        return "No measurement window finished."
    q1, q3 = s.samples_per_s_q1, s.samples_per_s_q3
    windows = s.windows
    text = "Median"
    if is_finite(windows):
        text += f" of {plural(int(windows), 'window')}"
    if is_finite(q1) and is_finite(q3):
        text += f"; middle half between {fmt_rate(q1)} and {fmt_rate(q3)} samples/s.\n{SPREAD_WORDS}"
    text += "."
    if s.stability == "noisy":
        text += f"\nNoisy: {s.stability_reason}. Treat this number with care."
    elif s.stability == "stable":
        text += "\nStable: window throughputs within ±5 % (half the IQR over the median), the machine was quiet."
    return text

def _epoch_tooltip(r: RunResult) -> str:
    text = BY_KEY["s_per_epoch"].tooltip
    measured = [e for e in (r.summary.epoch_s or []) if is_finite(e)]
    if measured:
        text += " Measured epochs: " + ", ".join(fmt_duration(e) for e in measured) + "."
    return text
