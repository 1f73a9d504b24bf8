"""Runs in run processes: each config in a fresh process (or the spare), its events forwarded as they come, Stop
and time limits honoured, and a run rebuilt from its events when its process died or was ended."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence

from ..analysis.summary import RunFacts, memory_measure, summarise
from ..basics.config import RunConfig
from ..basics.errors import UserError
from ..basics.events import Ended, EpochEnd, Event, Started, Warmup, Window
from ..basics.formatting import fmt_duration, one_line
from ..basics.results import RunResult
from . import handles
from .handles import POLL_S, RunProcess, log_output
from .messages import Garbled, checked_event
from .spare import Spare

STOP_GRACE_S = 3.0  # after Stop: time a run has to end by itself before its process is ended


def run_isolated(configs: Sequence[RunConfig], *, on_event: Callable[[Event], None] | None = None,
                 should_stop: Callable[[], bool] | None = None,
                 progress: Callable[[str, float], None] | None = None, spare: Spare | None = None,
                 timeout_s: float | None = None, grace_s: Callable[[], float] | float = STOP_GRACE_S,
                 repeat: Sequence[dict | None] | None = None,
                 save_models: Sequence[str | None] | None = None) -> list[RunResult]:
    """Run each config in turn, each in a fresh process; returns the results of the runs that started.

    Raises UserError when the first run's process finds the setup cannot run at all (nothing is recorded);
    KeyboardInterrupt after keeping the interrupted run as cancelled (an Ended event carries it).
    `grace_s` may be a callable, read when Stop is seen (a closing window allows less time than Stop).
    `repeat[i]` (repeat.interleave) is recorded as env["repeat"] of run i before its Ended event goes out.
    `save_models[i]`: where run i, if it finishes training, writes its trained model (models/saved.py).
    """
    forward = on_event or (lambda event: None)
    stop = should_stop or (lambda: False)
    results: list[RunResult] = []
    for i, cfg in enumerate(configs, start=1):
        if stop():
            break
        tag = repeat[i - 1] if repeat is not None and i <= len(repeat) else None

        def emit(event, tag=tag):
            if tag is not None and isinstance(event, Ended):
                event.result.env["repeat"] = dict(tag)
            forward(event)
        proc = (spare.take(cfg.mps_fallback, cfg.device) if spare else None) or handles.new_process(
            mps_fallback=cfg.mps_fallback)
        save = save_models[i - 1] if save_models is not None and i <= len(save_models) else None
        job = _RunJob(proc, cfg, (i, len(configs)), emit, stop, progress, timeout_s, grace_s, save)
        try:
            result = job.run()
        finally:
            proc.end(wait_s=2.0)
            proc.discard_output()
        if result is None:  # rejected before the run started
            if not results:
                raise UserError(job.rejected)
            result = job.recorder.finish("failed", job.rejected)
            emit(Ended(result))
        results.append(result)
    return results


def run_point(config: RunConfig, **kwargs) -> RunResult:
    """One config in its own process (run_isolated's keywords); a config refused before it started comes back as a
    failed run holding the sentence, so a series of runs (a sweep) can go on and show why."""
    try:
        results = run_isolated([config], **kwargs)
    except UserError as exc:
        return RunResult(config=config, status="failed", error=str(exc))
    return results[0] if results else RunResult(config=config, status="cancelled")


class _RunJob:
    def __init__(self, proc, cfg, position, emit, stop, progress, timeout_s, grace_s, save_model=None):
        self.proc, self.cfg, self.position, self.save_model = proc, cfg, position, save_model
        self.emit, self.stop, self.progress = emit, stop, progress or (lambda message, fraction: None)
        self.timeout_s, self.grace_s = timeout_s, grace_s
        self.recorder = _Recorder(cfg)
        self.rejected = ""
        self.timed_out = False
        self.garbled = ""
        self.prepared = False

    def _timeout_sentence(self) -> str:
        return (f"The run did not end within the time limit of {fmt_duration(self.timeout_s)}, so it was stopped; "
                f"what it measured until then is kept.")

    def run(self) -> RunResult | None:
        """The run's result (from the child, or rebuilt from its events); None when the child rejected it."""
        proc = self.proc
        started = time.monotonic()
        stop_at: float | None = None
        why = ""
        proc.send(("run", self.cfg.to_dict(), self.position, self.save_model))
        try:
            while True:
                try:
                    message = proc.receive(POLL_S)
                    ended = self._handle(message) if message is not None else None
                except EOFError:
                    why = "died"
                    break
                except Garbled as exc:
                    why, self.garbled = "garbled", str(exc)
                    break
                if message is not None:
                    if ended is not None or message[0] == "rejected":
                        return ended
                    if message[0] == "done":  # finished without an Ended event: cannot happen, but say so
                        why = "died"
                        break
                now = time.monotonic()  # also between messages: a flood of them must not hide Stop
                if stop_at is None and self.stop():
                    proc.send(("stop",))
                    grace = self.grace_s() if callable(self.grace_s) else self.grace_s
                    stop_at = now + grace
                if stop_at is not None and now >= stop_at:
                    why = "stopped"
                    break
                if self.timeout_s is not None and now - started > self.timeout_s and stop_at is None:
                    proc.send(("stop",))
                    stop_at, self.timed_out = now + min(STOP_GRACE_S, self.timeout_s), True
        except KeyboardInterrupt as exc:  # Ctrl-C in the CLI, or SIGTERM / SIGHUP (Terminated, with its reason):
            proc.end()  # keep the run so far as cancelled, then go on up
            self.emit(Ended(self.recorder.finish("cancelled", getattr(exc, "reason", ""))))
            raise
        proc.end()
        if why == "garbled":
            result = self.recorder.finish("failed", f"The run's process sent {self.garbled} instead of its "
                                          "measurements, so it was ended (a model that writes to file "
                                          "descriptors it inherited can do this); what it measured until then "
                                          "is kept.")
        elif self.timed_out:
            result = self.recorder.finish("failed", self._timeout_sentence())
        elif why == "stopped" or (why == "died" and stop_at is not None):
            result = self.recorder.finish("cancelled", "")
        else:
            result = self.recorder.finish("failed", proc.death_sentence())
            _log_child_output(proc, result)
        self.emit(Ended(result))
        return result

    def _handle(self, message: tuple) -> RunResult | None:
        kind = message[0]
        try:
            if kind == "event":
                event = checked_event(message[1])
                if isinstance(event, Ended) and self.timed_out and event.result.status == "cancelled":
                    event.result.status, event.result.error = "failed", self._timeout_sentence()  # it stopped
                self.recorder.add(event)
                self.emit(event)
                if isinstance(event, Ended):
                    return event.result
            elif kind == "progress":
                self.progress(one_line(str(message[1]), 200), float(message[2]))
            elif kind == "prepared":  # from here on the model's code runs: a "rejection" would be forged
                self.prepared = True
            elif kind == "rejected":
                if self.prepared:
                    raise ValueError("a rejection after the setup checks had passed")
                self.rejected = one_line(str(message[1]), 2000)
        except (IndexError, TypeError, ValueError, UserError) as exc:
            raise Garbled(f"a malformed '{kind}' message ({one_line(str(exc), 200)})") from None
        return None



class _Recorder:
    """Rebuilds a run from its events, for a child that died or was ended before its Ended event."""

    def __init__(self, cfg: RunConfig):
        self.result = RunResult(config=cfg)
        self.facts = RunFacts(batch_size=cfg.batch_size, memory_measure=memory_measure(cfg.device))

    def add(self, event: Event) -> None:
        r, f = self.result, self.facts
        if isinstance(event, Started):
            r.id, r.env = event.run_id, event.env
            f.parameters, f.dataset, f.train_size = event.parameters, event.dataset, event.train_size
            f.warmup_steps = event.warmup_steps
        elif isinstance(event, Warmup):
            r.losses.extend(event.losses)
            f.warmup_s = event.seconds
        elif isinstance(event, Window):
            r.losses.extend(event.losses)
            r.windows.append(event.record())
            f.peak_memory = max(f.peak_memory, event.memory, event.memory_detail.get("peak_allocated", 0) or 0)
        elif isinstance(event, EpochEnd):
            r.epochs.append({"epoch": event.epoch, "seconds": event.seconds, "val_loss": event.val_loss,
                             "val_accuracy": event.val_accuracy,
                             **({"step": event.step} if isinstance(event.step, int) else {})})
            if event.val_loss is not None and event.val_accuracy is not None:
                f.val = (event.val_loss, event.val_accuracy)

    def finish(self, status: str, error: str) -> RunResult:
        r = self.result
        r.status, r.error = status, error
        summarise(r, self.facts)
        return r



def _log_child_output(proc: RunProcess, result: RunResult) -> None:
    """Append the dead child's last output lines to the app's log, under one line naming the run."""
    log_output(proc, f"run {result.id} ({result.config.model} on {result.config.device}): {result.error}")
