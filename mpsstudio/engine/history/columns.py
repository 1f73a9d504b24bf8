"""The columns of a results table, defined once: the window's table, the CLI's tables and the CSV export
all take their keys, titles, explanations and raw values from here, so they cannot disagree.

A column's `value` is the raw number or text (None when missing); `format_value` turns it into what a person
reads. Speedups come from `compare.speedup_map`, passed in, because they depend on the other runs.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from ..analysis.energy import fmt_joules
from ..basics.formatting import (DASH, SPREAD_WORDS, fmt_bytes, fmt_count, fmt_duration, fmt_rate, fmt_spread,
                                  fmt_timestamp, is_finite, one_line, printable, spread_of)
from ..basics.results import RunResult
from ..analysis.scaling import device_label
from ..analysis.summary import epoch_seconds, memory_words

Speedups = dict[str, "float | None"]
MAX_CELL = 80  # characters of a text cell (a 5,000-character machine name from a file must not widen the table)


@dataclass(frozen=True)
class ResultColumn:
    key: str  # stable id; the CSV header
    title: str  # the header a person reads
    tooltip: str  # what the number is, in a sentence
    kind: str  # how it is formatted: text, count, rate, speedup, duration, loss, percent, bytes, joules, watts
    value: Callable[[RunResult, Speedups], object]

    @property
    def numeric(self) -> bool:
        return self.kind not in ("text", "time")


def _summary(key: str, scale: float = 1.0) -> Callable[[RunResult, Speedups], object]:
    def get(r: RunResult, _speedups: Speedups):
        v = getattr(r.summary, key)
        if not is_finite(v):
            return None
        return v * scale if scale != 1.0 else v
    return get


def _interval(r: RunResult, speedups: Speedups):
    """"3.0-3.4": the speedup's interval (bootstrap, or the range of a repeat's paired ratios)."""
    entry = getattr(speedups, "entries", {}).get(r.id)
    if entry is None or entry.low is None or entry.high is None or r.id in entry.round_speedups:
        return None
    return f"{entry.low:.2f}-{entry.high:.2f}"


def _stability(r: RunResult, _speedups: Speedups):
    return r.summary.stability


def _epoch_s(r: RunResult, _speedups: Speedups):
    """Measured seconds per epoch where whole epochs ran, else the estimate (see epoch_is_estimate)."""
    return epoch_seconds(r.summary)[0]


def epoch_is_estimate(r: RunResult) -> bool:
    value, measured = epoch_seconds(r.summary)
    return value is not None and not measured


def _memory_measure(r: RunResult, _speedups: Speedups):
    measure = r.summary.memory_measure
    if measure is None and r.summary.peak_memory:  # runs from before the field: what they measured
        measure = "process_rss" if r.config.device == "cpu" else "allocator"
    return measure


def _memory_measure_words(r: RunResult, speedups: Speedups):
    measure = _memory_measure(r, speedups)
    return memory_words(measure, r.config.device) if measure else None


def _energy_source(r: RunResult) -> str | None:
    source, measure = r.summary.energy_source, r.summary.energy_measure
    return f"{source} ({measure})" if source and measure else None


def energy_is_estimate(r: RunResult) -> bool:
    return r.summary.energy_measure == "estimated"


COLUMNS: tuple[ResultColumn, ...] = (
    ResultColumn("time", "Time", "When the run started (stored in UTC, shown in local time).", "time",
                 lambda r, s: r.created_at),
    ResultColumn("machine", "Machine", "The computer the run came from.", "text", lambda r, s: r.machine),
    ResultColumn("origin", "Origin", "local: run on this computer; imported: read from a file.", "text",
                 lambda r, s: r.origin),
    ResultColumn("device", "Device", "Where the model ran: cpu, mps (the Apple GPU) or cuda; \u00d7N: on N GPUs "
                 "(ranks) at once.", "text", lambda r, s: device_label(r)),
    ResultColumn("model", "Model", "The network that was trained (a script: its file name, then its folder).", "text",
                 lambda r, s: r.config.model_label),
    ResultColumn("dataset", "Dataset", "The data it was trained on.", "text", lambda r, s: r.config.dataset),
    ResultColumn("batch", "Batch", "Samples per training step.", "count", lambda r, s: r.config.batch_size),
    ResultColumn("precision", "Precision", "Number format of the computation: fp32, or fp16/bf16 autocast.", "text",
                 lambda r, s: r.config.precision),
    ResultColumn("samples_per_s", "Samples/s", "Measured: median throughput over the measurement windows "
                 "(samples per second); warm-up steps excluded.", "rate", _summary("samples_per_s")),
    ResultColumn("samples_per_s_spread", "±", f"Measured: how sure Samples/s is. {SPREAD_WORDS}.", "spread",
                 lambda r, s: spread_of(r.summary.samples_per_s, r.summary.samples_per_s_iqr)),
    ResultColumn("samples_per_s_iqr", "IQR", "Measured: interquartile range of the window throughputs "
                 "(samples per second): the spread of the middle half.", "rate", _summary("samples_per_s_iqr")),
    ResultColumn("stability", "Stability", "Measured: stable, or noisy (throughput spread beyond ±5 %, half the IQR "
                 "over the median; too few windows; or the machine was busy or throttled).", "text", _stability),
    ResultColumn("speedup_vs_cpu", "Speedup vs CPU", "Median throughput divided by that of the same machine's CPU "
                 "run of the same setup (a repeat: the median of the rounds' paired ratios).", "speedup",
                 lambda r, s: s.get(r.id)),
    ResultColumn("speedup_interval", "Speedup range", "95 % bootstrap interval of the speedup over the measurement "
                 "windows (a repeat: the range of the paired ratios, from 9 rounds their median's 95 % interval); "
                 "containing 1.00 means no clear difference.",
                 "text", _interval),
    ResultColumn("warmup_s", "Warm-up", "Measured: time of the warm-up steps (graph compilation, autotuning), "
                 "never counted in throughput.", "duration", _summary("warmup_s")),
    ResultColumn("s_per_epoch", "s/epoch", "Seconds per epoch: measured (median of the whole epochs after the "
                 "first, validation apart) where whole epochs ran, else estimated (training-set size / median "
                 "throughput), shown with \u2248.", "duration", _epoch_s),
    ResultColumn("final_loss", "Final loss", "Mean training loss of the last steps.", "loss",
                 _summary("final_loss")),
    ResultColumn("val_accuracy_percent", "Val. acc.", "Accuracy on the validation split after the last epoch (a "
                 "language model's on text: the share of next tokens its top choice gets right).",
                 "percent", _summary("val_accuracy", 100.0)),
    ResultColumn("val_perplexity", "Val. perplexity", "A language model's perplexity on the validation split of "
                 "its text after the last epoch: exp of the mean cross-entropy of each learnt next token (padding "
                 "and prompts excluded); 1 is perfect.", "loss", _summary("val_perplexity")),
    ResultColumn("peak_memory_bytes", "Peak memory", "Measured: on a GPU, the most bytes its library's allocator "
                 "held in arrays (PyTorch's on CUDA and MPS, MLX's for an MLX run); on the CPU, how much the run "
                 "process grew over its size before the run (shown with +). On an MPS whose torch keeps no peak, the "
                 "bytes in use at window ends, not a peak (shown with 'in use'). The Memory measure column says "
                 "which.", "bytes", _summary("peak_memory")),
    ResultColumn("memory_measure", "Memory measure", "Which figure Peak memory is: peak allocated by PyTorch, peak "
                 "by MLX, in use at window ends, or the CPU process's growth in resident memory.", "text",
                 _memory_measure_words),
    ResultColumn("j_per_sample", "J/sample", "Energy per sample of the device that ran the work (the GPU board on "
                 "CUDA, the Apple GPU on mps, the CPU package on cpu) over the measurement windows, warm-up apart: "
                 "measured by NVML or RAPL, estimated by macOS on Apple silicon (shown with \u2248). Empty when "
                 "nothing could measure it; the run's details say why.", "joules", _summary("j_per_sample")),
    ResultColumn("avg_power_w", "Power", "Average power (watts) of that device over the measurement windows: its "
                 "energy divided by their time; idle power included.", "watts", _summary("avg_power_w")),
    ResultColumn("energy_j", "Energy", "Joules of that device over all measurement windows.", "joules",
                 _summary("energy_j")),
    ResultColumn("idle_w", "Idle power", "Watts the same device drew doing nothing, read for about a second "
                 "before the measured phase (before the warm-up, the device synchronized and quiet; a script's run: "
                 "after its last step).", "watts",
                 _summary("idle_w")),
    ResultColumn("j_per_sample_above_idle", "J/sample above idle", "Energy per sample above the device's idle "
                 "power: what the work itself cost, without what the device draws doing nothing.", "joules",
                 _summary("j_per_sample_above_idle")),
    ResultColumn("utilization_percent", "Busy", "How busy the device was while measured: on a GPU the share of "
                 "time it ran work (NVML; the IORegistry's Device Utilization on a Mac), on the CPU the run "
                 "process's CPU time as a share of all cores.", "percent", _summary("utilization")),
    ResultColumn("energy_source", "Energy source", "What measured the energy, and whether it is measured or "
                 "estimated.", "text", lambda r, s: _energy_source(r)),
    ResultColumn("energy_reason", "Energy missing because", "Why the run has no energy figures.", "text",
                 lambda r, s: r.summary.energy_reason if r.summary.j_per_sample is None else None),
    ResultColumn("status", "Status", "finished, failed, cancelled or interrupted (MPS Studio ended during the run).", "text", lambda r, s: r.status),
    ResultColumn("error", "Error", "Why a failed run failed.", "text", lambda r, s: r.error),
    ResultColumn("note", "Note", "Your note on the run (the window's Details tab, or `mpsstudio history --note ID "
                 "TEXT`).", "text", lambda r, s: r.note or None),
    ResultColumn("id", "Run id", "The run's unique id.", "text", lambda r, s: r.id),
)
BY_KEY = {c.key: c for c in COLUMNS}

# Which columns each view shows, in order.
CSV_COLUMNS = tuple(c.key for c in COLUMNS)
CLI_BENCH_COLUMNS = ("device", "samples_per_s", "samples_per_s_spread", "stability", "speedup_vs_cpu",
                     "speedup_interval", "warmup_s", "s_per_epoch", "peak_memory_bytes", "final_loss",
                     "val_accuracy_percent", "j_per_sample", "avg_power_w", "utilization_percent", "status")
CLI_HISTORY_COLUMNS = ("time", "machine", "model", "dataset", "device", "batch", "precision", "samples_per_s",
                       "stability", "status", "id", "note")  # the id: what --note, --steps and --delete take
TABLE_COLUMNS = ("time", "machine", "device", "model", "dataset", "batch", "precision", "samples_per_s",
                 "speedup_vs_cpu", "warmup_s", "s_per_epoch", "final_loss", "val_accuracy_percent",
                 "peak_memory_bytes", "j_per_sample", "status")


def format_value(kind: str, value, dash: str = DASH, times: str = "\u00d7") -> str:
    """What a person reads for a raw column value."""
    if value is None or value == "":
        return dash if kind not in ("text", "time") else ""
    if kind == "text":
        return one_line(printable(value), MAX_CELL)
    if kind == "time":
        return fmt_timestamp(value)
    if not is_finite(value):
        return dash
    if kind == "spread":
        return fmt_spread(value, dash)
    if kind == "count":
        return fmt_count(value, dash)
    if kind == "rate":
        return fmt_rate(value, dash)
    if kind == "speedup":
        return f"{value:.2f}{times}"
    if kind == "duration":
        return fmt_duration(value, dash)
    if kind == "loss":
        return f"{value:.4f}" if abs(value) < 100 else f"{value:,.1f}"
    if kind == "percent":
        return f"{value:.1f} %"
    if kind == "bytes":
        return fmt_bytes(value, dash)
    if kind == "joules":
        return fmt_joules(value)
    if kind == "watts":
        return f"{value:,.1f} W" if value < 100 else f"{value:,.0f} W"
    raise ValueError(f"unknown column kind {kind!r}")


def cell_text(key: str, run: RunResult, speedups: Speedups, dash: str = DASH, times: str = "\u00d7") -> str:
    column = BY_KEY[key]
    value = column.value(run, speedups)
    text = format_value(column.kind, value, dash, times)
    if value is None or not text or text == dash:
        return text
    if key == "s_per_epoch" and epoch_is_estimate(run):
        return f"\u2248{text}" if times != "x" else f"~{text}"  # estimated, not measured
    if key == "peak_memory_bytes" and _memory_measure(run, speedups) == "rss_growth":
        return f"+{text}"  # the CPU process's growth, not an allocator's bytes
    if key == "peak_memory_bytes" and _memory_measure(run, speedups) == "in_use_at_window_ends":
        return f"{text} in use"  # not a peak: what the allocator held at window ends
    if key in ("j_per_sample", "avg_power_w", "energy_j", "idle_w", "j_per_sample_above_idle") \
            and energy_is_estimate(run):
        return f"\u2248{text}" if times != "x" else f"~{text}"  # macOS's model, not a meter
    if key == "speedup_interval":
        return f"{text}{times}"
    return text
