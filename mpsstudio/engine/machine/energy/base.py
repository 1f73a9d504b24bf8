"""The one interface every energy and utilisation source implements (Counter, Busy), the span reading they make,
and what they share. A source that cannot be used here raises Unreadable with the phrase a run shows."""

from __future__ import annotations

from dataclasses import dataclass

from ...basics.formatting import error_line

PARTS = ("gpu", "cpu", "dram", "ane")  # the parts a source may give, in the order they are shown
SPAN_S = 1.0  # shortest energy span: the counters are read about once a second, at window boundaries
IDLE_S = 1.0  # the idle reading before the measured phase: about this long, from one counter update to another
EDGE_WAIT_S = 0.3  # how long the idle reading waits for a counter to move (NVML's moves every ~0.1 s)
EDGE_POLL_S = 0.002
MEASURED, ESTIMATED = "measured", "estimated"


class Unreadable(Exception):
    """A source that cannot be used here; the message is the phrase the run shows."""


@dataclass
class SpanEnergy:
    """One energy span: consecutive measurement windows read as one (at least SPAN_S long, or up to a break such
    as validation or the run's end). Joules of the device's part (None when its counter could not be read), every
    part's joules, the busy share (0-100), the span's seconds between the two readings and its window count."""

    seconds: float
    windows: int
    energy_j: float | None = None
    parts: dict[str, float] | None = None
    utilization: float | None = None

    @property
    def power_w(self) -> float | None:
        return self.energy_j / self.seconds if self.energy_j is not None and self.seconds > 0 else None


class Counter:
    """Cumulative energy counters of one source, in joules per part (a counter that wraps is unwrapped by its
    source, so these only grow; one that goes backwards anyway makes its span unknown)."""

    name = ""
    measure = MEASURED
    scope = ""

    def read(self) -> dict[str, float]:
        raise NotImplementedError

    def close(self) -> None:
        pass


class Busy:
    """A busy share (0-100) over each window; `measure` names it."""

    measure = ""

    def begin(self) -> None:
        pass

    def end(self) -> float | None:
        return None

    def close(self) -> None:
        pass


def error_phrase(exc: BaseException) -> str:
    return error_line(exc, 120, with_type=False)


def percent(v: float) -> float:
    return min(100.0, max(0.0, v))
