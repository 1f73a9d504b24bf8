"""A run's summary from what it measured: one function for the run loop and for a run whose process died.

The run loop (trainer.py) calls it when a run ends in any way; a run rebuilt from its events (Recorder) is
summarised from what they carry: for a run whose process died or was ended before its Ended event
(process/runs.py), one whose front end was killed (process/journal.py), and a run on several GPUs whose rank 0 did
not end it (run/distributed.py).
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass

from . import energy, memory
from ..basics.config import RunConfig, precision_note
from ..basics.events import EpochEnd, Event, Started, Warmup, Window
from ..basics.formatting import is_finite
from ..basics.results import RunResult
from ..basics.summary_fields import RunSummary
from .stability import assess, spread

FINAL_LOSS_STEPS = 10
PERPLEXITY_LOSS_LIMIT = 41.0  # exp(41.4) is 1e18, past any figure a summary keeps: no perplexity said past it


def perplexity(loss: float | None) -> float | None:
    """A language model's perplexity from its mean next-token cross-entropy (nats): exp(loss); None past the limit."""
    if loss is None or not math.isfinite(loss) or loss > PERPLEXITY_LOSS_LIMIT:
        return None
    return math.exp(loss)


@dataclass
class RunFacts:
    """What a summary needs beyond the result's windows, losses and epochs."""

    batch_size: int | None  # None: a script run whose batch was never seen
    parameters: int = 0
    dataset: str = ""
    warmup_steps: int = 0  # 0 when warm-up did not finish
    warmup_s: float | None = None
    measured_wall_s: float = 0.0  # warm-up end to run end, validation excluded; 0 when unknown
    train_size: int = 0
    val: tuple[float | None, float | None] | None = None  # the last validation loss and accuracy
    peak_memory: int = 0
    memory_measure: str = "allocator"  # a key of MEMORY_MEASURES: what the device measured (Device.memory_measure)
    input_shapes: int | None = None  # distinct input shapes fed to the model (None: not counted)
    tokens_per_sample: float | None = None  # token input: a sample's real tokens (tokens/s beside samples/s)
    text: dict | None = None  # a text dataset's layout and token counts (data/token_rows.load_text)
    trainable_parameters: int | None = None  # the parameters that train (fewer with LoRA or a frozen body)
    seq_len: int | None = None  # token input: the positions of a sample (its real tokens may be fewer: padding)


def summarise(result: RunResult, facts: RunFacts) -> None:
    """Set result.summary from result.windows / losses / epochs (also for failed and cancelled runs); a run that
    ended before its environment was read gets this machine's identity (environment.identity)."""
    if not result.env.get("machine_label"):
        from ..machine.environment import identity

        known = identity()
        if result.env:  # some of the run's environment was read: more than the machine's identity
            known.pop("identity_only")
        result.env = {**known, **result.env}
    rates = [w.samples_per_s for w in result.windows if w.samples_per_s is not None]  # (a live window has one)
    s = result.summary.as_dict()  # what the run wrote before (a script's batch source) stays
    s["parameters"] = facts.parameters
    s["dataset"] = facts.dataset
    s["precision_note"] = precision_note(result.config)
    s["warmup_steps"] = facts.warmup_steps if facts.warmup_s is not None else 0
    s["warmup_s"] = facts.warmup_s
    s["measured_steps"] = sum(w.steps or 0 for w in result.windows)
    measured_s = sum(w.seconds or 0.0 for w in result.windows)
    s["measured_s"] = measured_s
    s["windows"] = len(rates)
    if rates:
        q1, med, q3 = quartiles(rates)
        s["samples_per_s"] = med
        s["samples_per_s_q1"], s["samples_per_s_q3"] = q1, q3
        s["samples_per_s_iqr"] = q3 - q1
        s["step_ms"] = 1000 * facts.batch_size / med if facts.batch_size else None
        s["s_per_epoch_estimate"] = facts.train_size / med if facts.train_size else None
        wait = sum(w.data_wait_s or 0.0 for w in result.windows)
        s["data_wait_s"] = wait
        s["data_wait_fraction"] = wait / measured_s if measured_s > 0 else None
        if facts.measured_wall_s > 0 and facts.batch_size:
            s["wall_samples_per_s"] = s["measured_steps"] * facts.batch_size / facts.measured_wall_s
    else:
        s["samples_per_s"] = None
        s["samples_per_s_iqr"] = None
    if result.epochs:
        s["epoch_s"] = [e.seconds for e in result.epochs]
    s["s_per_epoch_measured"] = measured_epoch_s(s.get("epoch_s"))
    s["peak_memory"] = facts.peak_memory or None
    s["memory_measure"] = facts.memory_measure
    if facts.tokens_per_sample and s.get("samples_per_s"):
        s["tokens_per_s"] = s["samples_per_s"] * facts.tokens_per_sample
        s["tokens_per_sample"] = facts.tokens_per_sample
        s["tokens_per_step"] = facts.tokens_per_sample * (facts.batch_size or 0) or None  # every rank's (x axis)
        s["seq_len"] = facts.seq_len or round(facts.tokens_per_sample)
        s["tokens_measure"] = tokens_measure(facts)
    if facts.trainable_parameters is not None:
        s["trainable_parameters"] = facts.trainable_parameters
    s.update(memory.summary_fields(result.windows, device_kind(result.config.device), facts.input_shapes))
    tail = result.losses[-FINAL_LOSS_STEPS:]
    s["final_loss"] = statistics.fmean(tail) if tail and all(math.isfinite(v) for v in tail) else None
    s["val_loss"], s["val_accuracy"] = facts.val if facts.val else (None, None)
    if facts.text is not None:
        s["val_perplexity"] = perplexity(s["val_loss"])
        s["accuracy_measure"] = "next-token accuracy (the top choice, over learnt tokens)"
        s["text_layout"], s["training_tokens"] = facts.text.get("layout"), facts.text.get("training_tokens")
    s.update(energy.summary_fields(result.windows, result.env))
    summary = RunSummary.made(s)
    rel = spread(summary)
    stability, reason = assess(summary, result.env)
    result.summary = summary.replaced(spread_percent=100 * rel if rel is not None else None, stability=stability,
                                      stability_reason=reason)


def tokens_measure(facts: RunFacts) -> str:
    """What a run's tokens/s counts, said with it."""
    if facts.text is None:
        return f"every position of the {facts.seq_len or facts.tokens_per_sample:,.0f}-token sequences (synthetic)"
    if facts.text.get("layout") == "packed":
        return f"real tokens: packed, every position of the {facts.seq_len:,}-token sequences a token of the text"
    return (f"real tokens only: {facts.tokens_per_sample:,.1f} of the {facts.seq_len:,} positions a sequence on "
            "average, padding not counted")


def measured_epoch_s(epoch_s) -> float | None:
    """Seconds per epoch as measured: the median of the epochs after the first (the first also ran the warm-up
    steps), or the first when it is the only one; validation is never inside. None without whole epochs."""
    if not isinstance(epoch_s, list) or not epoch_s:
        return None
    values = epoch_s[1:] if len(epoch_s) > 1 else epoch_s
    return statistics.median(values)


def quartiles(values: list[float]) -> tuple[float, float, float]:
    if len(values) == 1:
        return values[0], values[0], values[0]
    q1, med, q3 = statistics.quantiles(values, n=4, method="inclusive")
    return q1, med, q3


def device_kind(device: str) -> str:
    """"cuda" of "cuda:1"; "cpu", "mps" as they are."""
    return str(device).split(":")[0]


# What a run's memory figure is (summary.memory_measure, said wherever the figure is shown): the device says which
# (Device.memory_measure). "allocator" is what runs recorded before the peak was told from the in-use figure: CUDA's
# was its allocator's peak, MPS's and MLX's the bytes in use at window ends.
MEMORY_MEASURES = {
    "rss_growth": "growth of the run process's resident memory (CPU)",
    "peak_allocated": "peak allocated by PyTorch",
    "mlx_peak": "peak by MLX",
    "in_use_at_window_ends": "in use at window ends, not a peak (this torch keeps no MPS peak)",
    "allocator": "the GPU allocator's bytes",
    "process_rss": "the run process's resident memory (CPU)",
}


def memory_measure(device: str, env: dict | None = None) -> str:
    """What a run's memory figure is: what its run's environment recorded (env["memory_measure"], the device's own
    word), else by the device's kind as runs before it measured: the CPU process's growth in resident size over its
    level before the run ("rss_growth"), or the GPU allocator's bytes ("allocator")."""
    recorded = env.get("memory_measure") if isinstance(env, dict) else None
    if isinstance(recorded, str) and recorded in MEMORY_MEASURES:
        return recorded
    return "rss_growth" if device == "cpu" else "allocator"


def memory_words(measure: str | None, device: str = "") -> str:
    """The words of a memory measure ("peak allocated by PyTorch"); runs from before the field by their device."""
    if measure == "allocator" and device.startswith("cuda"):
        return MEMORY_MEASURES["peak_allocated"]
    return MEMORY_MEASURES.get(measure or "", "memory")


def epoch_seconds(summary: RunSummary | None) -> tuple[float | None, bool]:
    """(seconds per epoch, measured?): measured where whole epochs ran, else the estimate (also from runs
    written before the two were told apart); (None, False) without a summary."""
    if summary is None:
        return None, False
    measured = summary.s_per_epoch_measured
    if measured is None:
        measured = measured_epoch_s(summary.epoch_s)
    if is_finite(measured):
        return measured, True
    for value in (summary.s_per_epoch_estimate, summary.s_per_epoch):
        if is_finite(value):
            return value, False
    return None, False


class Recorder:
    """Rebuilds a run from its events, for a child that died or was ended before its Ended event."""

    def __init__(self, cfg: RunConfig):
        self.result = RunResult(config=cfg)
        self.facts = RunFacts(batch_size=cfg.batch_size, memory_measure=memory_measure(cfg.device))

    def add(self, event: Event) -> None:
        r, f = self.result, self.facts
        if isinstance(event, Started):
            r.id, r.env = event.run_id, event.env
            f.memory_measure = memory_measure(r.config.device, event.env)
            if r.config.is_script:  # a script's batch and windows are what its first step said (run/tracked.py)
                for key in ("batch_size", "window_s"):
                    value = event.config.get(key)
                    if isinstance(value, (int, float)) and not isinstance(value, bool) and value > 0:
                        r.config = r.config.changed(**{key: value})
                f.batch_size = r.config.batch_size
            f.parameters, f.dataset, f.train_size = event.parameters, event.dataset, event.train_size
            f.warmup_steps = event.warmup_steps
            ranks = event.env.get("ranks") if isinstance(event.env, dict) else None
            world = ranks.get("world") if isinstance(ranks, dict) else None
            if isinstance(world, int) and not isinstance(world, bool) and 1 < world <= 100_000 and f.batch_size:
                f.batch_size, f.train_size = f.batch_size * world, f.train_size * world  # every rank's samples
        elif isinstance(event, Warmup):
            r.losses.extend(event.losses)
            f.warmup_s = event.seconds
        elif isinstance(event, Window):
            r.losses.extend(event.losses)
            r.windows.append(event.record())
            detail = event.memory_detail
            peak = detail.get("peak", detail.get("peak_allocated", 0)) or 0
            f.peak_memory = int(max(f.peak_memory, event.memory, peak if is_finite(peak) else 0))
        elif isinstance(event, EpochEnd):
            r.epochs.append(event.record())
            if event.val_loss is not None and event.val_accuracy is not None:
                f.val = (event.val_loss, event.val_accuracy)

    def finish(self, status: str, error: str) -> RunResult:
        r = self.result
        r.status, r.error = status, error
        summarise(r, self.facts)
        return r
