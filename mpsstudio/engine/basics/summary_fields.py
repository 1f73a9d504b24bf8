"""The fields a run's summary may hold, and what each must be when a run is read back (analysis/runcheck.py): measured
quantities, losses, shares, texts, and what a script's run read from the script. No torch here."""

from __future__ import annotations

import math
from typing import TypeGuard

from .shape import ANY_FINITE  # a loss that diverges passes 1e18 long before it becomes inf or NaN

MAX_NUMBER = 1e18  # no measured quantity (time, rate, bytes, joules) comes near this; losses may (see LOSSES)

# Summary fields that are measured quantities: a finite number >= 0, or null.
NON_NEGATIVE = ("parameters", "warmup_steps", "warmup_s", "measured_steps", "measured_s", "windows",
                 "samples_per_s", "samples_per_s_q1", "samples_per_s_q3", "samples_per_s_iqr", "step_ms",
                 "s_per_epoch", "s_per_epoch_estimate", "s_per_epoch_measured", "spread_percent", "data_wait_s",
                 "wall_samples_per_s", "peak_memory", "best_epoch", "stopped_early_epoch", "tokens_per_sample",
                 "tokens_per_s")
LOSSES = ("final_loss", "val_loss", "best_value")  # any finite number, or null: a diverging run's last losses are huge
FRACTIONS = ("data_wait_fraction", "val_accuracy")  # 0..1


class FieldError(Exception):
    """A field that is wrong: `field` names it (config.batch_size), `why` says what it should be."""

    def __init__(self, field: str, why: str):
        super().__init__(f"{field}: {why}")
        self.field, self.why = field, why


def finite(v: object) -> TypeGuard[float]:
    """Any finite JSON number (a loss; ints of any size compare exactly, without overflowing a float)."""
    return not isinstance(v, bool) and isinstance(v, (int, float)) and -ANY_FINITE <= v <= ANY_FINITE


def number(v: object) -> TypeGuard[float]:
    """A measured quantity's number: finite and at most MAX_NUMBER in size."""
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        return False
    if isinstance(v, int):
        return abs(v) <= MAX_NUMBER
    return math.isfinite(v) and abs(v) <= MAX_NUMBER


def check_summary(summary: dict) -> dict:
    """The summary as read back, each field of the kind it must be; FieldError names the first that is not."""
    for key in NON_NEGATIVE:
        v = summary.get(key)
        if v is not None and not (number(v) and v >= 0):
            raise FieldError(f"summary.{key}", "a finite number of at least 0, or null, expected")
    for key in ("best_epoch", "stopped_early_epoch", "windows", "measured_steps", "warmup_steps"):  # counts
        v = summary.get(key)
        if v is not None and v != int(v):
            raise FieldError(f"summary.{key}", "a whole number, or null, expected")
    for key in LOSSES:
        v = summary.get(key)
        if v is not None and not finite(v):
            raise FieldError(f"summary.{key}", "a finite number, or null, expected")
    for key in FRACTIONS:
        v = summary.get(key)
        if v is not None and not (number(v) and 0 <= v <= 1):
            raise FieldError(f"summary.{key}", "a number from 0 to 1, or null, expected")
    epochs = summary.get("epoch_s")
    if epochs is not None and not (isinstance(epochs, list) and all(number(e) and e >= 0 for e in epochs)):
        raise FieldError("summary.epoch_s", "a list of seconds expected")
    for key in ("dataset", "stability_reason", "memory_measure", "monitor", "stopped_early_reason", "saved_model",
                "saved_model_error", "precision_note", "leftover_processes",
                "output_note", "batch_from", "trained_on", "idle_when", "tracked"):
        value = summary.get(key)
        if value is not None and not isinstance(value, str):
            raise FieldError(f"summary.{key}", "text expected")
    words = summary.get("script_settings_words")  # what a script used (run/script/settings.py)
    if words is not None and not (isinstance(words, list) and len(words) <= 40
                                  and all(isinstance(w, str) and len(w) <= 200 for w in words)):
        raise FieldError("summary.script_settings_words", "a list of at most 40 short texts expected")
    found = summary.get("script_settings")
    if found is not None and not (isinstance(found, dict) and len(found) <= 40 and all(
            isinstance(k, str) and (v is None or isinstance(v, (str, bool)) or finite(v)) for k, v in found.items())):
        raise FieldError("summary.script_settings", "an object of texts, numbers and true/false expected")
    return summary
