"""How a run ends when it does not finish: the exceptions the run loop raises for itself, and one sentence for
whatever stopped it (the user, a NaN loss, unreadable data, out of memory, an operation MPS lacks, a model that
exits or interrupts the program)."""

from __future__ import annotations

import math
import re

import torch

from ..basics.config import RunConfig
from ..basics.errors import UserError
from ..basics.formatting import error_line, one_line


class Cancelled(Exception):
    """The user asked the run to stop."""


class NonFinite(Exception):
    """The loss became NaN or infinite at `step`."""

    def __init__(self, step: int, value: float, cause: str = ""):
        self.step, self.value, self.cause = step, value, cause  # cause: what the run could tell of why, or ""


class DataError(Exception):
    """Loading a batch failed (a corrupt file, a worker crash)."""


RESERVE_BYTES = 32 * 1024 * 1024
_reserve: bytearray | None = None


def keep_reserve() -> None:
    """Set memory aside for telling how a run ended (a run's process, before its job): a model that exhausted the
    memory and keeps what it took (a global list) would otherwise leave none to make and send its result, and its
    process could die with nothing said (an exit with code 1: seen once in eight suite runs here)."""
    global _reserve
    if _reserve is None:
        try:
            _reserve = bytearray(RESERVE_BYTES)
        except MemoryError:
            _reserve = None


def release_reserve() -> None:
    """Give the reserve back, when the memory ran out."""
    global _reserve
    _reserve = None


def outcome(exc: BaseException, config: RunConfig) -> tuple[str, str]:
    """(status, error) of a run that raised `exc` (not KeyboardInterrupt: the caller decides whose it was)."""
    if isinstance(exc, Cancelled):
        return "cancelled", ""
    if isinstance(exc, UserError):
        return "failed", str(exc)
    if isinstance(exc, NonFinite):
        kind = "NaN" if math.isnan(exc.value) else "infinite"
        if exc.step == 1:  # before any weight changed: not the learning rate's doing
            advice = "the model or its loss makes it before any learning (check the loss function and the inputs)"
        elif config.is_script:
            advice = "the script's own learning rate or loss is the place to look"
        else:
            advice = f"lower the learning rate (now {config.lr:g})"
        if config.precision not in ("fp32", None):
            advice += f" or use fp32 precision (this run used {config.precision})"
        cause = f" ({exc.cause})" if exc.cause else ""
        return "failed", f"The loss was {kind} at step 1{cause}; {advice}." if exc.step == 1 else \
            f"The loss became {kind} at step {exc.step}{cause}; {advice}."
    if isinstance(exc, DataError):
        cause = error_line(exc.__cause__ or exc, with_type=False)
        return "failed", f"Reading the training data failed ({cause}); check the dataset's files."
    if isinstance(exc, SystemExit):  # a model's code called sys.exit(): the run fails, the process goes on
        return "failed", (f"The model's code called sys.exit({exc.code!r}) during the run; "
                          "a model file must not exit the program.")
    if isinstance(exc, Exception):  # every other failure still ends as a recorded run with one sentence
        return "failed", explain_failure(exc, config)
    # GeneratorExit or a model's own BaseException subclass: never "finished"
    return "failed", (f"The model's code raised {one_line(type(exc).__name__, 80)}, which is meant to end a "
                      "program, during the run; raise an Exception instead.")


MODEL_INTERRUPT = ("The model's code raised KeyboardInterrupt during the run; a model file must not interrupt the "
                   "program.")


def explain_failure(exc: BaseException, config: RunConfig) -> str:
    """One sentence for an exception raised by PyTorch during a run."""
    msg = error_line(exc, with_type=False)
    lowered = msg.lower()
    if config.is_script and (isinstance(exc, MemoryError) or "out of memory" in lowered):
        return (f"The script ran out of memory on {config.device} ({config.batch_words}): {msg[:200]}; lower its "
                "batch size (its own setting), or check it for memory it keeps.")
    if isinstance(exc, MemoryError) and not isinstance(exc, torch.OutOfMemoryError):
        return (f"The run ran out of memory on {config.device} (Python could not allocate more at batch size "
                f"{config.batch_size}); try a smaller batch size, or check the model for memory it keeps.")
    if (isinstance(exc, torch.OutOfMemoryError) or "out of memory" in lowered
            or "can't allocate memory" in lowered or "cannot allocate memory" in lowered):
        if config.batch_size is None:
            return (f"The run ran out of memory on {config.device}; try a smaller batch size (the script's own "
                    "setting), or check it for memory it keeps.")
        smaller = max(1, config.batch_size // 2)
        return (f"Batch size {config.batch_size} ran out of memory on {config.device}; "
                f"try a batch size of {smaller} or less.")
    if isinstance(exc, NotImplementedError) and "MPS" in str(exc) and config.device == "mps":  # (a CPU error lists
        # every backend an operator has, MPS among them: not MPS's doing)
        op = re.search(r"operator '([^']+)'", str(exc))
        name = op.group(1) if op else "an operation"
        return (f"{name} is not supported on MPS by this PyTorch; turn on 'Run operations MPS lacks on the CPU' "
                f"(--mps-fallback) to run it there (slower), or pick another model.")
    return f"The run stopped with an error: {type(exc).__name__}: {msg}"
