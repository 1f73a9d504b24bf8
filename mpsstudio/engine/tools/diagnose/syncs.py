"""What a step's host syncs cost, measured by removing them: the values a step reads back from the device (`.item()`,
`bool()`, `.tolist()`, `.cpu()`, ...) are recorded once, with the Python line that asked for each, then the same
steps are timed with those calls answered from the record, so the host never waits and keeps queueing work. The
difference between the step as it is and the step so replayed is what the waits cost, the overlap they destroy
included (the time the host spends inside them is only part of it: while it waits, the device also idles once it
has drained its queue). Nothing is skipped but the waits: the step's arithmetic is the same."""

from __future__ import annotations

import os
import sys
import types
from collections import Counter
from contextlib import contextmanager

import torch

from .timing import waits_wrapped

_OURS = (os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))),
         os.path.dirname(os.path.abspath(torch.__file__)))


def caller_line() -> str:
    """"blocks_item.py:15": the first frame outside torch and MPS Studio, where a model's code asked for the value."""
    frame: types.FrameType | None = sys._getframe(2)
    while frame is not None:
        path = os.path.abspath(frame.f_code.co_filename)
        if not path.startswith(_OURS) and not path.startswith("<"):
            return f"{os.path.basename(path)}:{frame.f_lineno}"
        frame = frame.f_back
    return "?"


class Replay:
    """A step's reads from the device of `device_type`: `recording()` keeps each value (and where it was asked for),
    `replaying()` answers the same calls, in the same order, from what was kept, without touching the device (a call
    beyond the record is made for real)."""

    def __init__(self, device_type: str):
        self.device_type = device_type
        self.values: list = []
        self.lines: Counter = Counter()
        self.at = 0
        self.extra = 0  # calls made for real while replaying (a step that asked for more than the record holds)
        self.inside = False  # within a read being recorded (its method may call the wrapper again)

    def _wrapped(self, name: str, method, replay: bool):
        replay_self = self

        def wrapper(tensor, *args, **kwargs):
            if (replay_self.inside or not isinstance(tensor, torch.Tensor)
                    or tensor.device.type != replay_self.device_type):  # (a tensor subclass's __torch_function__
                return method(tensor, *args, **kwargs)             # calls the method again: one read, not two)
            if replay:
                if replay_self.at < len(replay_self.values):
                    value = replay_self.values[replay_self.at]
                    replay_self.at += 1
                    return value
                replay_self.extra += 1
                replay_self.inside = True
                try:
                    return method(tensor, *args, **kwargs)
                finally:
                    replay_self.inside = False
            replay_self.inside = True
            try:
                value = method(tensor, *args, **kwargs)
            finally:
                replay_self.inside = False
            replay_self.values.append(value.clone() if isinstance(value, torch.Tensor) else value)
            replay_self.lines[f".{name.strip('_')}() at {caller_line()}"] += 1
            return value
        return wrapper

    @contextmanager
    def _patched(self, replay: bool):
        with waits_wrapped(lambda name, method: self._wrapped(name, method, replay)):
            yield self

    def recording(self):
        """Within the block, one step's reads are kept (a fresh record)."""
        self.values, self.lines, self.at = [], Counter(), 0
        return self._patched(replay=False)

    def replaying(self):
        """Within the block, the reads are answered from the record, from its start at each `next_step()`."""
        self.at = 0
        return self._patched(replay=True)

    def next_step(self) -> None:
        self.at = 0

    def where(self, most: int = 3) -> list[dict]:
        """The recorded reads by where they were asked for: [{"call": ".item() at blocks_item.py:15", "count": 6}]."""
        return [{"call": call, "count": n} for call, n in self.lines.most_common(most)]
