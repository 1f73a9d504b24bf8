"""A tune's options, read as the CLI and the window's sheet give them: one sentence for each bad one."""

from __future__ import annotations

import math

from ...basics.config import MAX_BATCH, PRECISIONS
from ...basics.errors import UserError
from ...basics.formatting import whole_numbers

DEFAULT_BUDGET_MIN = 10.0
MAX_BUDGET_MIN = 24 * 60.0
MAX_ROUNDS = 7
DEFAULT_STEPS = 16  # measured steps a candidate a round: at least 8 windows (the run loop's rule)
DEFAULT_WARMUP = 3  # torch.compile compiles in the first steps: timed apart with the warm-up
BOTH = ("off", "on", "both")
TF32 = ("off", "conv", "all")  # CUDA's TF32: off, convolutions only (PyTorch's default), convolutions and matmuls


def parse_choice(value: str | None, what: str, default: str) -> list[bool]:
    """--channels-last / --compile: off, on or both -> [False], [True], [False, True]."""
    value = (value or default).strip().lower()
    if value not in BOTH:
        raise UserError(f"{what} takes off, on or both, not {value!r}.")
    return {"off": [False], "on": [True], "both": [False, True]}[value]


def parse_precisions(text: str | None) -> list[str] | None:
    if text is None:
        return None
    names = [p.strip().lower() for p in text.split(",") if p.strip()]
    bad = [p for p in names if p not in PRECISIONS]
    if bad or not names:
        said = ", ".join(repr(p) for p in bad) or "none was given"
        raise UserError(f"Precisions are fp32, fp16 and bf16, separated by commas; {said} "
                        f"{'is not one of them' if len(bad) == 1 else 'are not among them' if bad else ''}".rstrip() + ".")
    return list(dict.fromkeys(names))


def parse_threads(text: str | None) -> list[int] | None:
    """--threads-to-try "2,4" -> [2, 4]; None for the default; UserError for anything else."""
    if text is None:
        return None
    return whole_numbers(text, 1, 4096, "--threads-to-try takes thread counts from 1 to 4,096 separated by commas, "
                                        "e.g. 2,4")


def parse_rounds(rounds: int | None) -> int:
    rounds = MAX_ROUNDS if rounds is None else rounds
    if isinstance(rounds, bool) or not isinstance(rounds, int) or not 1 <= rounds <= 100:
        raise UserError(f"--rounds is a whole number from 1 to 100, not {rounds}.")
    return rounds


def parse_budget(minutes: float | None) -> float:
    """The budget in seconds (--budget is in minutes)."""
    minutes = DEFAULT_BUDGET_MIN if minutes is None else minutes
    if not (isinstance(minutes, (int, float)) and math.isfinite(minutes) and 0.1 <= minutes <= MAX_BUDGET_MIN):
        raise UserError(f"--budget is minutes, from 0.1 to {MAX_BUDGET_MIN:,.0f}, not {minutes}.")
    return float(minutes) * 60.0


def default_batch_sizes(batch: int, train_samples: int | None) -> list[int]:
    """Around the setup's batch: half, it and double, within the training samples (a run needs one whole batch)."""
    top = min(MAX_BATCH, train_samples) if train_samples else MAX_BATCH
    sizes = sorted({b for b in (max(1, batch // 2), batch, batch * 2) if b <= top})
    return sizes or [max(1, min(batch, top))]


def default_threads(cores: int | None) -> list[int | None]:
    """The CPU's thread counts worth trying: torch's default, and half the cores where there are four or more."""
    return [None] + ([cores // 2] if cores and cores >= 4 else [])


def parse_tf32(text: str | None) -> list[str] | None:
    """--tf32-to-try "off,conv,all" -> ["off", "conv", "all"]; None for the default (all three on CUDA)."""
    if text is None:
        return None
    names = [t.strip().lower() for t in text.split(",") if t.strip()]
    if not names or any(t not in TF32 for t in names):
        raise UserError("--tf32-to-try takes off, conv (convolutions only, PyTorch's default) and all (convolutions "
                        f"and matrix products), separated by commas, not {text[:40]!r}.")
    return list(dict.fromkeys(names))
