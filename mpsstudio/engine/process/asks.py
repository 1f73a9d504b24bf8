"""One-answer jobs in a run process: a user's model built and checked (probe_model), a measuring tool (run_tool)
and the functional check of the devices (check_devices); each raises UserError (one sentence) when it cannot
answer."""

from __future__ import annotations

import os
import time
from collections.abc import Callable

from ..basics.errors import UserError
from ..basics.formatting import fmt_duration, one_line
from ..basics.spec import DataSpec
from . import handles
from .handles import POLL_S, TREE_S, RunProcess, log_output
from .messages import STOP, Garbled, ProbeJob, ToolJob
from .runs import STOP_GRACE_S
from .spare import Spare

PROBE_TIMEOUT_S = 60.0  # building a user's model to count its parameters and check its output


def probe_model(model: str, spec: DataSpec, *, timeout_s: float = PROBE_TIMEOUT_S,
                should_stop: Callable[[], bool] | None = None, spare: Spare | None = None):
    """Build `model` for `spec` in a short-lived process, count its parameters and check one forward pass:
    the session.ModelProbe that session.probe_model returns there.

    Raises UserError (one sentence) when the model cannot be built, returns the wrong shape, takes longer
    than `timeout_s`, or its process dies. The caller must have the user's consent to run the file's code.
    """
    name = os.path.basename(model)
    proc = (spare.take(True) if spare else None) or handles.new_process(mps_fallback=True)
    late = (f"{name} took longer than {fmt_duration(timeout_s)} to build and check, so it was stopped; make "
            f"build_model and forward quicker, or check the file for a loop that never ends.")
    answer = _ask(proc, ProbeJob(model, spec), "probed", f"checking {name}", timeout_s=timeout_s,
                  should_stop=should_stop, late=late, stop_grace_s=0.0)
    return _checked_probe(answer, name)


# fresh processes a resumable tool may take after one died in a step: a max-batch search whose probes abort above some
# size dies once doubling and once per bisection (7 to its 1/128 resolution)
MAX_RESTARTS = 12


class Checkpointed:
    """What `_ask` returns for a tool that died, or passed its checkpoint's deadline, after sending a checkpoint:
    that checkpoint's answer and how the process ended (one sentence)."""

    def __init__(self, answer, how: str):
        self.answer, self.how = answer, how


def run_tool(name: str, payload: dict, *, progress: Callable[[str, float], None] | None = None,
             should_stop: Callable[[], bool] | None = None, timeout_s: float | None = None,
             mps_fallback: bool = True, stop_grace_s: float = STOP_GRACE_S, python: str | None = None) -> dict:
    """Run one measuring tool (tools/registry.TOOLS: max-batch, inspect, device checks) in a fresh run process and return
    its result, a dict of plain JSON values checked here (the child runs a user's model: it is not trusted).

    Stop asks the tool to end (it returns what it found so far); a tool that does not within STOP_GRACE_S, or
    runs past `timeout_s`, is ended and raises UserError, as does one that dies or sends something else.
    A tool may send checkpoints: what stands should its process die, or not end a step that can hang in native code
    within the checkpoint's deadline (an MPS event that waits forever; a Metal assertion that aborts). Then the
    process is ended and the tool's registry entry finishes the answer from it (`registry.ended`); a resumable one
    (max-batch) goes on in a fresh process from where it was, up to MAX_RESTARTS times.
    KeyboardInterrupt (Ctrl-C, SIGTERM, SIGHUP in the CLI) asks it to stop too and goes up holding what it found in
    `partial` (None when it had nothing to give within STOP_GRACE_S). `stop_grace_s` 0: a stopped tool is ended
    at once (an export: what the user stopped must not land). `python`: another Python environment's interpreter
    to carry it out in, with its own torch (interpreter.py checks it first: one sentence when it cannot).
    """
    from ..tools import registry as tools

    late = (f"The {name} tool did not end within the time limit of {fmt_duration(timeout_s)}, so it was stopped."
            if timeout_s is not None else "")
    ends = time.monotonic() + timeout_s if timeout_s is not None else None
    if python:
        from . import interpreter

        why = interpreter.why_not(python)
        if why:
            raise UserError(why)
    for restart in range(MAX_RESTARTS + 1):
        proc = (handles.RunProcess(mps_fallback=mps_fallback, python=python) if python else
                handles.new_process(mps_fallback=mps_fallback))
        left = max(0.0, ends - time.monotonic()) if ends is not None else None
        try:
            answer = _ask(proc, ToolJob(name, payload), "tooled", f"running the {name} tool", timeout_s=left,
                          should_stop=should_stop, late=late, stop_grace_s=stop_grace_s, progress=progress)
        except KeyboardInterrupt as exc:  # what the tool found before it was stopped, checked, goes up with it
            kept = getattr(exc, "checkpoint", None)
            if getattr(exc, "partial", None) is None and kept is not None:  # it did not answer within the grace
                try:
                    ended = tools.ended(name, kept, "Stopped before it could answer.")
                    setattr(exc, "partial", None if "resume" in ended else ended)
                except UserError:
                    pass
            if getattr(exc, "partial", None) is not None:
                try:
                    setattr(exc, "partial", tools.checked(name, getattr(exc, "partial")))
                except UserError:
                    setattr(exc, "partial", None)
            raise
        if not isinstance(answer, Checkpointed):
            return tools.checked(name, answer)
        answer = tools.ended(name, answer.answer, answer.how)
        if "resume" not in answer:
            return tools.checked(name, answer)
        if restart == MAX_RESTARTS:
            raise UserError(f"The {name} tool's process died {MAX_RESTARTS + 1} times; the last time: {answer['how']}")
        payload = {**payload, "resume": answer["resume"]}
    raise AssertionError("unreachable")


def check_devices(devices_list: list, timeout_s: float = PROBE_TIMEOUT_S) -> dict:
    """probe.check of every available accelerator among `devices_list`, done in a run process (the front end's
    own process never starts a GPU context); a check whose process dies or hangs fails every accelerator."""
    from ..machine import probe

    wanted = [d.id for d in devices_list if d.available and d.kind != "cpu"]
    if not wanted:
        return {}
    try:
        answer = run_tool("devices", {}, timeout_s=timeout_s)["checks"]
    except UserError as exc:
        return {d: probe.Check(False, f"the check itself failed: {exc}") for d in wanted}
    return {d: probe.Check(bool(answer[d]["ok"]), answer[d]["detail"]) if d in answer
            else probe.Check(False, "the check's process did not find it") for d in wanted}


def _ask(proc: RunProcess, job: ProbeJob | ToolJob, answer_kind: str, subject: str, *, timeout_s: float | None,
         should_stop: Callable[[], bool] | None, late: str, stop_grace_s: float,
         progress: Callable[[str, float], None] | None = None):
    """Send `job` to `proc`, wait for its `answer_kind` message and return what it holds; UserError otherwise.

    With `stop_grace_s` the child is asked to stop and given that long to answer first; with 0 it is ended."""
    stop = should_stop or (lambda: False)
    answered = False
    fallback = None  # the child's checkpoint (below): what stands if it dies, passes its deadline or is stopped
    try:
        proc.send(job)
        deadline = time.monotonic() + timeout_s if timeout_s is not None else None
        stop_at: float | None = None
        look_at = time.monotonic()
        fallback, fallback_at, fallback_s = None, None, None  # the child's checkpoint: what stands if it dies, or
        # passes fallback_at
        while True:
            try:
                message = proc.receive(POLL_S)
            except EOFError:
                proc.end()
                sentence = proc.death_sentence(f"The process {subject}")
                log_output(proc, sentence)
                if proc.orphans:
                    sentence += f" {proc.orphans}"
                if fallback is not None:  # it died in a step it had said it might not survive
                    return Checkpointed(fallback, sentence)
                raise UserError(sentence) from None
            except Garbled as exc:
                raise UserError(f"The process {subject} sent {exc} instead of its answer; check the "
                                "model file.") from None
            if message is not None:
                kind = message[0]
                if kind == answer_kind and len(message) == 2:
                    answered = True
                    return message[1]
                if kind == "rejected" and len(message) == 2:
                    answered = True
                    raise UserError(one_line(str(message[1]), 2000))
                if kind == "progress" and progress is not None and len(message) == 3:
                    try:
                        progress(one_line(str(message[1]), 200), float(message[2]))
                    except (TypeError, ValueError):
                        raise UserError(f"The process {subject} sent a malformed progress message.") from None
                if kind == "partial" and len(message) == 3:
                    fallback, fallback_s = _checkpoint(message, subject)
                    fallback_at = time.monotonic() + fallback_s if fallback_s is not None else None
                    continue
                if kind == "done":
                    raise UserError(f"{subject[0].upper()}{subject[1:]} ended without an answer; see the log.")
                continue
            now = time.monotonic()
            if now >= look_at:
                proc.look_at_tree()
                look_at = now + TREE_S
            if stop_at is None and stop():
                if stop_grace_s <= 0:
                    raise UserError(f"{subject[0].upper()}{subject[1:]} was stopped.")
                proc.send(STOP)
                stop_at = now + stop_grace_s
            if stop_at is not None and now >= stop_at:
                raise UserError(f"{subject[0].upper()}{subject[1:]} was stopped.")
            if deadline is not None and now > deadline:
                raise UserError(late)
            if fallback_at is not None and now > fallback_at:  # hung in a step that may never end: what stands
                how = f"The process {subject} did not end a step within {fmt_duration(fallback_s)}, so it was ended."
                log_output(proc, how)
                return Checkpointed(fallback, how)
    except KeyboardInterrupt as exc:
        partial, kept = _answer_after_stop(proc, answer_kind, stop_grace_s) if stop_grace_s > 0 else (None, None)
        setattr(exc, "partial", partial)
        if partial is None and stop_grace_s > 0 and (kept or fallback) is not None:
            setattr(exc, "checkpoint", kept or fallback)  # no answer in time: what the tool said stands (run_tool)
        raise
    finally:
        proc.end(wait_s=1.0 if answered else 0.0)  # one that answered exits by itself (its exit work done) in ms
        proc.discard_output()


def _checkpoint(message: tuple, subject: str) -> tuple[object, float | None]:
    """(the answer a checkpoint message holds, its deadline in seconds or None); (None, None) withdraws it."""
    _, answer, deadline_s = message
    if answer is None:
        return None, None
    if deadline_s is not None and (isinstance(deadline_s, bool) or not isinstance(deadline_s, (int, float))
                                   or not 0 < deadline_s < 1e6):
        raise UserError(f"The process {subject} sent a malformed checkpoint.")
    return answer, deadline_s


def _answer_after_stop(proc: RunProcess, answer_kind: str, grace_s: float) -> tuple[object, object]:
    """Ask the child to stop and wait up to `grace_s` for its answer (what it found so far): (its answer or None, the
    last checkpoint it sent meanwhile or None). What it sent before the stop is read first, whatever the grace."""
    kept = None
    if not proc.send(STOP):
        return None, None
    deadline = time.monotonic() + grace_s
    first = True
    while first or time.monotonic() < deadline:
        try:
            message = proc.receive(0.0 if first else POLL_S)
        except (EOFError, Garbled):
            return None, kept
        if message is None:
            first = False
            continue
        if message[0] == answer_kind and len(message) == 2:
            return message[1], kept
        if message[0] == "partial" and len(message) == 3 and message[1] is not None:
            kept = message[1]
    return None, kept


def _checked_probe(probe, name: str):
    parameters = getattr(probe, "parameters", None)
    if isinstance(parameters, bool) or not isinstance(parameters, int) or parameters < 0:
        raise UserError(f"The process checking {name} sent an answer that could not be read; check the file.")
    return probe
