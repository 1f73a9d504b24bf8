"""What travels on a run process's pipe. From the parent: the jobs it gives, each a named message (RunJob, ProbeJob,
ToolJob, and Stop). From the child: what may come back, and the checks it passes before a front end reads it: a
child runs a user's model, so its messages are untrusted (an allow-list of classes before unpickling, numbers where
numbers belong, an Ended run checked field by field as an imported run is)."""

from __future__ import annotations

import io
import pickle
from dataclasses import dataclass
from typing import Any

from ..basics.events import STOP as STOP, Ended, EpochEnd, Notice, Started, Stop as Stop, Warmup, Window

KINDS = ("ready", "event", "progress", "prepared", "rejected", "probed", "tooled", "partial", "done")
_EVENTS = (Started, Warmup, Window, EpochEnd, Notice, Ended)
MAX_NOTICE = 1000  # characters of a Notice


@dataclass(frozen=True)
class RunJob:
    """Run one config (a dict: RunConfig.to_dict) as the `position` (i, n) of its comparison; `save_model`: where
    the trained weights go (None: nowhere); `stay`: a warm worker's run, after which the process takes the next."""

    config: dict
    position: tuple[int, int] = (1, 1)
    save_model: str | None = None
    stay: bool = False


@dataclass(frozen=True)
class ProbeJob:
    """Build a user's model file at `spec` and check it (run/session.probe_model)."""

    model: str
    spec: Any


@dataclass(frozen=True)
class ToolJob:
    """Carry out one tool of tools/registry.py with its payload."""

    name: str
    payload: dict


# Stop the job in progress (at the end of its measurement window, or its step): basics/events.Stop, which the run's
# process also sends its torchrun ranks (run/distributed.py, process/rank.py).



# The only classes a child's message may hold: anything else (a pickle that would call os.system, say) is refused
# before it is built, so a model cannot run code in the front end's process through the pipe.
_ALLOWED = {
    "mpsstudio.engine.basics.events": {"Started", "Warmup", "Window", "EpochEnd", "Notice", "Ended"},
    "mpsstudio.engine.basics.results": {"RunResult", "WindowRow", "EpochRow", "Evaluation"},
    "mpsstudio.engine.basics.summary_fields": {"RunSummary"},
    "mpsstudio.engine.basics.config": {"RunConfig"},
    "mpsstudio.engine.run.session": {"ModelProbe"},
}


class _Unpickler(pickle.Unpickler):
    def find_class(self, module: str, name: str):
        if name in _ALLOWED.get(module, ()):
            return super().find_class(module, name)
        raise pickle.UnpicklingError(f"{module}.{name} is not allowed")


def load(data: bytes):
    return _Unpickler(io.BytesIO(data)).load()


class Garbled(Exception):
    """The child sent something that is not one of its messages: it is not trusted any further."""



def checked_event(event):
    """The child's events are untrusted: the right classes, numbers where numbers belong, and an Ended run
    checked field by field as an imported run is (runcheck.py)."""
    if not isinstance(event, _EVENTS):
        raise TypeError(f"not an event: {type(event).__name__}")
    if isinstance(event, Ended):
        from ..analysis.runcheck import checked_result

        return Ended(checked_result(event.result, "The run's process"))
    if isinstance(event, Notice):
        if not isinstance(event.text, str) or not isinstance(event.device, str):
            raise TypeError("a notice that is not a text")
        from ..basics.formatting import one_line, printable

        return Notice(one_line(printable(event.text), MAX_NOTICE), one_line(printable(event.device), 40))
    numbers = {
        Started: ("parameters", "total_steps", "warmup_steps", "run_index", "run_count", "train_size"),
        Warmup: ("steps", "seconds"),
        Window: ("index", "first_step", "seconds", "samples", "samples_per_s", "data_wait_s", "memory",
                 "steps_done", "total_steps", "elapsed_s"),
        EpochEnd: ("epoch", "seconds"),  # step: an int or None, checked below
    }[type(event)]
    for name in numbers:
        value = getattr(event, name)
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise TypeError(f"{name} is not a number")
    for name in ("losses",):
        values = getattr(event, name, [])
        if not isinstance(values, list) or any(isinstance(v, bool) or not isinstance(v, (int, float))
                                               for v in values):
            raise TypeError(f"{name} is not a list of numbers")
    if isinstance(event, Started) and not (isinstance(event.env, dict) and isinstance(event.config, dict)
                                           and isinstance(event.run_id, str)):
        raise TypeError("a malformed start")
    if isinstance(event, EpochEnd) and event.step is not None and (isinstance(event.step, bool)
                                                                   or not isinstance(event.step, int)):
        raise TypeError("step is not a whole number")
    if isinstance(event, Window):
        if not isinstance(event.memory_detail, dict):
            raise TypeError("memory_detail is not a mapping")
        for name in ("energy_j", "energy_s", "utilization", "eta_s", "recent_samples_per_s"):
            value = getattr(event, name)
            if value is not None and (isinstance(value, bool) or not isinstance(value, (int, float))):
                raise TypeError(f"{name} is not a number")
        for name in ("energy_windows", "memory_driver", "memory_process", "swap_used"):
            value = getattr(event, name)
            if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 0):
                raise TypeError(f"{name} is not a count")
        parts = event.energy_parts
        if parts is not None and not (isinstance(parts, dict) and all(
                isinstance(k, str) and isinstance(v, (int, float)) and not isinstance(v, bool)
                for k, v in parts.items())):
            raise TypeError("energy_parts is not a mapping of numbers")
    return event
