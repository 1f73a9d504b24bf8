"""Runs in run processes: each config in a fresh process (or the spare), its events forwarded as they come, Stop
and time limits honoured, and a run rebuilt from its events when its process died or was ended."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import replace

from ..basics.config import RunConfig
from ..basics.errors import UserError
from ..basics.events import Ended, Event, Notice, Started
from ..basics.redact import keeps_args, redact_text, redacted_options
from ..basics.formatting import fmt_duration, one_line
from ..basics.results import RunResult
from . import handles, interpreter
from .handles import POLL_S, TREE_S, RunProcess, log_output
from .journal import Journal
from .messages import STOP, RunJob
from ..analysis.summary import Recorder
from .messages import Garbled, checked_event
from .spare import Spare
from .warm import Warm

STOP_GRACE_S = 3.0  # after Stop: time a run has to end by itself before its process is ended
CTRL_C = "Stopped with Ctrl-C; what was measured until then is kept."
DONE_S = 10.0  # a warm worker's child: time to say "done" after its run's result before it is not used again
OUTPUT_S = 0.2  # how often a front end that shows a run's output as it comes is given what is new


def run_isolated(configs: Sequence[RunConfig], *, on_event: Callable[[Event], None] | None = None,
                 should_stop: Callable[[], bool] | None = None,
                 progress: Callable[[str, float], None] | None = None, spare: Spare | None = None,
                 timeout_s: float | None = None, grace_s: Callable[[], float] | float = STOP_GRACE_S,
                 repeat: Sequence[dict | None] | None = None,
                 save_models: Sequence[str | None] | None = None, journal: bool = False,
                 on_output: Callable[[str, str], None] | None = None, warm: Warm | None = None) -> list[RunResult]:
    """Run each config in turn, each in a fresh process; returns the results of the runs that started.

    A run's Ended event goes out once its process has ended (with everything it started), so nothing of the run
    is running when the front end saves it.

    Raises UserError when the first run's process finds the setup cannot run at all (nothing is recorded);
    KeyboardInterrupt after keeping the interrupted run as cancelled (an Ended event carries it).
    `grace_s` may be a callable, read when Stop is seen (a closing window allows less time than Stop).
    `repeat[i]` (repeat.interleave) is recorded as env["repeat"] of run i before its Ended event goes out.
    `save_models[i]`: where run i, if it finishes training, writes its trained model (models/saved.py).
    `journal`: each run's events are also written to a journal (journal.py) until its Ended event has been
    handled, so a front end killed meanwhile finds the run at its next start (the runs a front end keeps).
    `on_output(device, text)`: what each run's process writes, as it comes (whole lines, a few times a second).
    `warm`: a warm worker (warm.py) that runs the configs it may take one after another in one process (a tune's
    candidates); the others still get a process of their own.
    """
    forward = on_event or (lambda event: None)
    stop = should_stop or (lambda: False)
    results: list[RunResult] = []
    checked: dict[str, str] = {}  # another Python environment's check, once per call
    for i, cfg in enumerate(configs, start=1):
        if stop():
            break
        tag = repeat[i - 1] if repeat is not None and i <= len(repeat) else None

        def emit(event, tag=tag, cfg=cfg):
            if tag is not None and isinstance(event, Ended):
                event.result.env["repeat"] = dict(tag)
            if cfg.python and isinstance(event, Ended):  # known even of a run that never started
                event.result.env.setdefault("python_executable", cfg.python)
                event.result.env.setdefault("python_env", interpreter.env_name(cfg.python))
            forward(event)
        save = save_models[i - 1] if save_models is not None and i <= len(save_models) else None
        stays = warm is not None and save is None and warm.takes(cfg)
        if warm is not None and not stays:
            warm.close()  # nothing of another run beside this one
        if cfg.python:  # another Python environment: checked again (it may have changed since it was chosen), then
            why = checked.setdefault(cfg.python, interpreter.why_not(cfg.python))  # its own process, never the spare
            if why:
                if not results and i == len(configs):
                    raise UserError(why)
                result = Recorder(shown_config(cfg)).finish("failed", why)
                emit(Ended(result))
                results.append(result)
                continue
            proc = RunProcess(mps_fallback=cfg.mps_fallback, python=cfg.python)
        else:
            proc = warm.process_for(cfg) if warm is not None and stays else (
                spare.take(cfg.mps_fallback, cfg.device) if spare and not cfg.distributed else None) or \
                handles.new_process(mps_fallback=cfg.mps_fallback)
        job = _RunJob(proc, cfg, (i, len(configs)), emit, stop, progress, timeout_s, grace_s, save,
                      Journal(shown_config(cfg)) if journal else None, on_output, stay=stays)
        try:
            try:
                ran = job.run()
            finally:
                if job.stayed and warm is not None:
                    warm.keep(proc, cfg)
                else:
                    proc.end(wait_s=2.0)
                    proc.discard_output()
            if ran is None:  # rejected before the run started
                if not results:
                    raise UserError(job.rejected)
                ran = job.recorder.finish("failed", job.rejected)
            result = ran
            emit(Ended(result))  # after its process (and what that started) ended: nothing of the run runs on
        finally:
            if job.journal is not None:  # handed on (or interrupted: kept as cancelled by the Ended that went out)
                job.journal.close()
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


def shown_config(cfg: RunConfig) -> RunConfig:
    """The config as the run is kept and shown: a script's arguments with secrets redacted (basics/redact.py)."""
    options = redacted_options(cfg.options)
    return cfg if options is cfg.options else replace(cfg, options=options)


def shown_event(event, keep: bool):
    """An event as the front end may keep and show it: a script's arguments and its quoted words redacted."""
    if keep:
        return event
    if isinstance(event, Started):
        event.config = {**event.config, "options": redacted_options(event.config.get("options") or {})}
    elif isinstance(event, Ended):
        r = event.result
        r.config = shown_config(r.config)
        r.error = redact_text(r.error) if isinstance(r.error, str) else r.error
    elif isinstance(event, Notice):
        event.text = redact_text(event.text)
    return event


class _RunJob:
    def __init__(self, proc, cfg, position, emit, stop, progress, timeout_s, grace_s, save_model=None, journal=None,
                 on_output=None, stay: bool = False):
        self.proc, self.cfg, self.position, self.save_model = proc, cfg, position, save_model
        self.stay = stay  # a warm worker's run: its process may serve the next one (stayed, once it said "done")
        self.stayed = False
        self.stop_sent = False
        self.on_output = on_output
        self.shown_at = 0.0
        self.journal = journal
        self.keep = keeps_args(cfg.options)
        self.emit, self.stop, self.progress = emit, stop, progress or (lambda message, fraction: None)
        self.timeout_s, self.grace_s = timeout_s, grace_s
        self.recorder = Recorder(shown_config(cfg))
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
        started = look_at = time.monotonic()
        stop_at: float | None = None
        why = ""
        proc.send(RunJob(self.cfg.to_dict(), self.position, self.save_model, self.stay))
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
                if self.on_output is not None and now - self.shown_at >= OUTPUT_S:
                    self._show_output(now)
                if now >= look_at:
                    proc.look_at_tree()
                    look_at = now + TREE_S
                if stop_at is None and self.stop():
                    proc.send(STOP)
                    self.stop_sent = True
                    grace = self.grace_s() if callable(self.grace_s) else self.grace_s
                    stop_at = now + grace
                if stop_at is not None and now >= stop_at:
                    why = "stopped"
                    break
                if self.timeout_s is not None and now - started > self.timeout_s and stop_at is None:
                    proc.send(STOP)
                    self.stop_sent = True
                    stop_at, self.timed_out = now + min(STOP_GRACE_S, self.timeout_s), True
        except KeyboardInterrupt as exc:  # Ctrl-C in the CLI, or SIGTERM / SIGHUP (Terminated, with its reason):
            proc.end()  # keep the run so far as cancelled, then go on up
            why = getattr(exc, "reason", "") or CTRL_C
            self.emit(Ended(self._kept(self.recorder.finish("cancelled", why))))
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
        return self._kept(result)

    def _done(self) -> bool:
        """Whether the child said "done" after a finished run (within DONE_S), so it may take the next; any other
        message, or none, and the process is not used again."""
        deadline = time.monotonic() + DONE_S
        while time.monotonic() < deadline:
            try:
                message = self.proc.receive(POLL_S)
            except (EOFError, Garbled):
                return False
            if message is not None:
                return message == ("done",)
        return False

    def _show_output(self, now: float, everything: bool = False) -> None:
        self.shown_at = now
        output = getattr(self.proc, "output", None)
        if output is None:
            return
        text = output.take_live(whole_lines=not everything)
        if text:
            self.on_output(self.cfg.device, text)

    def _kept(self, result: RunResult) -> RunResult:
        """The run with its process's output kept (output.py), once that process has ended; its words redacted. A
        warm worker's finished run leaves its process running for the next (its output goes on in that process's
        and is kept with the run that ends it)."""
        if not self.keep:
            result.error = redact_text(result.error) if isinstance(result.error, str) else result.error
        if self.stay and result.status == "finished" and not self.stop_sent and self._done():
            self.stayed = True
            if self.on_output is not None:
                self._show_output(time.monotonic())
            result.env["process"] = "warm worker"
            return result
        self.proc.end(wait_s=2.0)
        if self.on_output is not None and getattr(self.proc, "output", None) is not None:
            self.proc.output.close()
            self._show_output(time.monotonic(), everything=True)
        note = self.proc.keep_output(result.id)
        if note:
            result.summary = result.summary.replaced(output_note=note)
        if self.proc.orphans and not result.summary.leftover_processes:
            result.summary = result.summary.replaced(leftover_processes=self.proc.orphans)
        return result

    def _handle(self, message: tuple) -> RunResult | None:
        kind = message[0]
        try:
            if kind == "event":
                event = shown_event(checked_event(message[1]), self.keep)
                if isinstance(event, Ended) and self.timed_out and event.result.status == "cancelled":
                    event.result.status, event.result.error = "failed", self._timeout_sentence()  # it stopped
                self.recorder.add(event)
                if self.journal is not None:
                    self.journal.add(event)
                if isinstance(event, Ended):  # goes out once the process has ended (run_isolated)
                    return self._kept(event.result)
                self.emit(event)
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



def _log_child_output(proc: RunProcess, result: RunResult) -> None:
    """Append the dead child's last output lines to the app's log, under one line naming the run."""
    log_output(proc, f"run {result.id} ({result.config.model} on {result.config.device}): {result.error}")
