"""Measure your own training loop with MPS Studio's rules: a few lines in the script.

    import mpsstudio.track as mt

    device = mt.device()            # the device this run is for (MPS Studio's choice, or the best here)
    model.to(device)
    for x, y in loader:
        ...
        loss.backward()
        optimizer.step()
        mt.step(loss, batch_size=x.shape[0])
    mt.epoch(val_loss=..., val_accuracy=...)   # optional, after a validation

Under `mpsstudio run SCRIPT` or the window's Run Script…, the steps stream to the run in progress (live plots, the
history, comparisons). Run alone (`python SCRIPT`), the run is kept in the history when the script ends and its
summary printed. Each step keeps the loss on its device; the device is synchronized and the losses read only at the
end of a measurement window (~0.1 s of work on a CPU), warm-up steps are timed apart (MPSSTUDIO_WARMUP, default 10), and what
the script computes is not changed. On a GPU a window lasts at least 1 s (each synchronizes the GPU). A script run
alone keeps its run when it ends, is interrupted (Ctrl-C) or gets SIGTERM; os._exit() leaves nothing to keep it, and
its exit code is not judged (`mpsstudio run` judges it). No Qt is imported.
"""

from __future__ import annotations

import atexit
import math
import os
import sys

__all__ = ["device", "epoch", "step"]

_alone: dict = {"tracker": None, "failed": None}


def device():
    """The torch.device to train on: the one MPS Studio runs this script for, else the best available here (CUDA,
    then the Apple GPU where it works, then the CPU)."""
    import torch

    chosen = os.environ.get("MPSSTUDIO_TRACK_DEVICE")
    if chosen:
        return torch.device(chosen)
    if torch.cuda.is_available():
        return torch.device("cuda")
    try:
        if torch.backends.mps.is_available():
            torch.zeros(1, device="mps").add_(1).cpu()  # a virtual Mac says available and fails here
            return torch.device("mps")
    except Exception:  # not working: the CPU
        pass
    return torch.device("cpu")


def step(loss, batch_size: int | None = None) -> None:
    """One training step is done (call it after optimizer.step()): its loss (a tensor, kept on its device) and its
    samples. Without `batch_size`, the first dimension of the model's input when MPS Studio runs the script (alone,
    give it). A loss that is not one number, or a batch size that is not a whole number from 1, raises at once."""
    from .engine.run.script import tracker as tracked

    tracker, counter = tracked.ACTIVE["tracker"], tracked.ACTIVE["counter"]
    if counter is not None:
        counter.on_reported()
        if batch_size is None:
            batch_size = counter.batch
    loss, samples = _checked_loss(loss), _samples(batch_size)
    if tracker is None:
        tracker = _alone["tracker"] or _start_alone(loss)
    tracker.step(loss, samples)


def epoch(val_loss: float | None = None, val_accuracy: float | None = None) -> None:
    """The script validated after an epoch: its loss and accuracy (0 to 1) are kept with the run."""
    from .engine.run.script import tracker as tracked

    if val_loss is not None and not _is_number(val_loss):
        raise TypeError(f"mpsstudio.track.epoch: val_loss must be a number, not {_shown(val_loss)}.")
    if val_accuracy is not None and not (_is_number(val_accuracy) and 0 <= _float(val_accuracy) <= 1):
        raise ValueError(f"mpsstudio.track.epoch: val_accuracy is a share from 0 to 1 (0.93 for 93 %), not "
                         f"{_shown(val_accuracy)}.")
    if isinstance(val_loss, int) and not isinstance(val_loss, bool):
        val_loss = _float(val_loss)  # (10**400 is inf, as a float would be)
    tracker = tracked.ACTIVE["tracker"] or _alone["tracker"]
    if tracker is not None:
        tracker.epoch(val_loss, val_accuracy)


def _shown(value) -> str:
    return repr(value)[:40]


def _float(value) -> float:
    """A number as a float; an int past float's range as inf (10**400 raised OverflowError)."""
    try:
        return float(value)
    except OverflowError:
        return math.inf


def _is_number(value) -> bool:
    import torch

    if isinstance(value, torch.Tensor):
        return value.numel() == 1 and not value.dtype.is_complex
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _checked_loss(loss):
    """The step's loss: a tensor holding one number (kept on its device), or a Python number."""
    import torch

    from .engine.run.script.tracker import loss_problem

    if isinstance(loss, torch.Tensor):
        problem = loss_problem(loss)
        if problem:
            raise ValueError(f"mpsstudio.track.step: {problem}")
        if loss.numel() != 1:
            raise ValueError(f"mpsstudio.track.step: the loss must hold one number (the batch's mean loss), not a "
                             f"tensor of shape {tuple(loss.shape)}.")
        return loss
    if isinstance(loss, (int, float)) and not isinstance(loss, bool):
        try:
            value = float(loss)
        except OverflowError:  # an int past float's range (10**400)
            value = math.inf
        if not math.isfinite(value):
            raise ValueError(f"mpsstudio.track.step: the loss is {_shown(loss)}, not a finite number: the step went "
                             "wrong before it reached mt.step.")
        return torch.tensor(value)
    raise TypeError(f"mpsstudio.track.step: the loss must be a tensor or a number, not {_shown(loss)}.")


def _samples(batch_size) -> int:
    """The step's samples: a whole number from 1 (a Python or numpy integer, or an integer tensor of one value)."""
    import operator

    if batch_size is None:
        raise ValueError("mpsstudio.track.step: give batch_size=n, the samples in this step (samples/s counts "
                         "them), e.g. mt.step(loss, batch_size=x.shape[0]).")
    try:
        n = operator.index(batch_size) if not isinstance(batch_size, bool) else None
    except TypeError:
        n = None
    from .engine.run.script.tracker import batch_problem

    problem = batch_problem(n if n is not None else batch_size)
    if problem or n is None:
        raise ValueError(f"mpsstudio.track.step: {problem}, not {_shown(batch_size)}.")
    return n


def _start_alone(loss):
    """The script runs by itself: its run is measured here and kept in the history when the script ends."""
    from .engine.basics.config import RunConfig
    from .engine.run.script.tracker import Tracker

    script = os.path.abspath(sys.argv[0]) if sys.argv and sys.argv[0] else "script.py"
    dev = getattr(loss, "device", None)
    cfg = RunConfig(model=script, dataset="script", device=_device_id(dev), steps=None, epochs=None,
                    warmup_steps=_warmup())
    tracker = _alone["tracker"] = Tracker(cfg, lambda event: None, how="mt.step")
    previous = sys.excepthook

    def excepthook(kind, value, tb):  # the script failed: its run says so, with what it measured
        from .engine.run.failures import outcome

        if not issubclass(kind, KeyboardInterrupt):
            _alone["failed"] = outcome(value, cfg)
        else:
            _alone["failed"] = ("cancelled", "Stopped with Ctrl-C; what was measured until then is kept.")
        previous(kind, value, tb)
    sys.excepthook = excepthook
    atexit.register(_finish_alone)
    _keep_on_sigterm()
    return tracker


def _keep_on_sigterm() -> None:
    """A script ended by SIGTERM (a scheduler, `kill`) keeps its run as cancelled, then ends as SIGTERM ends it;
    only where the script left SIGTERM to its default (its own handler stays its own)."""
    import signal
    import threading

    if threading.current_thread() is not threading.main_thread():
        return
    try:
        if signal.getsignal(signal.SIGTERM) is not signal.SIG_DFL:
            return

        def ended(signum, frame):
            _alone["failed"] = ("cancelled", "Ended by SIGTERM; what was measured until then is kept.")
            _finish_alone()
            signal.signal(signal.SIGTERM, signal.SIG_DFL)
            os.kill(os.getpid(), signal.SIGTERM)
        signal.signal(signal.SIGTERM, ended)
    except (ValueError, OSError, AttributeError):  # no signals here (a thread, an embedded interpreter)
        pass


def _device_id(dev) -> str:
    if dev is None:
        return "cpu"
    if dev.type == "cuda":
        return f"cuda:{dev.index}" if dev.index else "cuda"
    return dev.type if dev.type in ("cpu", "mps") else "cpu"


def _warmup() -> int:
    try:
        return max(0, min(10_000, int(os.environ.get("MPSSTUDIO_WARMUP", "10"))))
    except ValueError:
        return 10


def _finish_alone() -> None:
    """At the script's end: the run summarised, kept in the history, and said in one line."""
    from .engine.basics.errors import UserError
    from .engine.basics.formatting import fmt_rate
    from .engine.history.store import keep_run

    tracker = _alone["tracker"]
    if tracker is None or tracker.ended:
        return
    status, error = _alone["failed"] or ("finished", "")
    try:
        result = tracker.finish(status, error)
        said = keep_run(result)
    except (UserError, OSError) as exc:
        print(f"mpsstudio: the run could not be kept in the history: {exc}", file=sys.stderr)
        return
    except Exception as exc:  # never a traceback at the script's exit
        print(f"mpsstudio: the run could not be summarised ({type(exc).__name__}: {exc})", file=sys.stderr)
        return
    s = result.summary
    rate = s.samples_per_s
    spread = s.spread_percent
    shown = (f"{fmt_rate(rate)} samples/s (median of {len(result.windows)} windows, measured"
             + (f"; spread {spread:.0f} %" if spread is not None else "") + ")") if rate else "no measured window"
    print(f"mpsstudio: {os.path.basename(result.config.model)} on {result.config.device}: {shown}; "
          f"{result.status}; kept in the history as {result.id}" + (f" ({said})" if said else "") + ".",
          file=sys.stderr)
