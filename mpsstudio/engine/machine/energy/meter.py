"""The meter: energy and utilisation of the device that ran a run, read at the measurement windows' boundaries.

The run loop (trainer.py) calls Meter.begin() where a measured window's clock starts and Meter.end() where it
stops, both right after the device synchronize it already does there: no extra sync, nothing per step. Counters
are read only where an energy span (about a second of whole windows, see Meter) opens and closes; a span's energy
is the difference of cumulative counters, the run's the sum over its spans (warm-up and validation never inside).

Where the numbers come from (the field's own libraries; no private-API code here):
- NVIDIA GPUs: NVML through `nvidia-ml-py` (`pynvml`): the total-energy counter (mJ, Volta and newer) and the
  GPU busy share (utilisation samples). NVML reads the whole board, idle power included.
- Apple silicon: `zeus-apple-silicon` (IOReport "Energy Model" counters: CPU, GPU, DRAM, ANE), which macOS
  estimates from activity, frequency and voltage (so these are labelled "estimated"); the GPU busy share is the
  IORegistry's "Device Utilization %" that Activity Monitor shows, read with the `ioreg` command.
- Linux CPUs: the RAPL counters under /sys/class/powercap (whole packages: every program's share, idle included).
- CPU utilisation: the run process's CPU time over the energy span, as a share of all the machine's logical cores.

Counters wrap (RAPL at max_energy_range_uj): each source unwraps its counter at every reading (rapl.py), so the
counters only grow. A counter that goes backwards anyway (a driver reset) makes that span's energy unknown, never
negative. Where no source works, every energy figure is None and `reason` says why in one phrase.
No torch here: the trainer passes what it knows about the device.
"""

from __future__ import annotations

import sys
import time
from dataclasses import dataclass, field

from ...basics.formatting import is_finite
from . import cpu, ioreport, nvml, rapl
from .base import EDGE_POLL_S, EDGE_WAIT_S, IDLE_S, PARTS, SPAN_S, Busy, SpanEnergy, Unreadable, error_phrase as _error


@dataclass
class Meter:
    """What the run loop reads at window boundaries: energy of `part` (the device that ran the work) plus every
    part the sources give, and the device's busy share, over energy spans.

    A span opens where a measured window's clock starts (begin) and closes at the end of the first window that
    makes it at least `span_s` long, or at a break (end(close=True): validation, the run's end, a stop). Spans,
    not single windows, because reading NVML's energy counter costs ~4 ms on an H100 and the counter moves only
    every ~100 ms (docs/benchmarks.md): per 0.1 s window that would be 8 % of the run and mostly rounding. Spans
    follow each other with no gap between one's end reading and the next one's start reading, so the counter's
    rounding cancels out over a run except at its ends and its breaks.
    """

    part: str | None = None  # "gpu" or "cpu": the device's part; None when nothing measures energy here
    counters: list = field(default_factory=list)
    busy: Busy | None = None
    reason: str | None = None  # why energy is not measured (None when it is)
    busy_reason: str | None = None
    span_s: float = SPAN_S
    failures: int = 0  # spans whose device counter could not be read
    _start: dict[str, float] | None = None
    _t0: float = 0.0
    _windows: int = 0
    _open: bool = False
    _last: tuple | None = None  # (reading, time) of the last span's end: where a span that follows it starts

    def describe(self) -> dict:
        """env["energy"]: what measured the run's energy and busy share, or why nothing did."""
        main = self.counters[0] if self.counters else None
        return {"source": ", ".join(c.name for c in self.counters) or None, "part": self.part,
                "measure": main.measure if main else None, "scope": main.scope if main else None,
                "reason": self.reason, "utilization": self.busy.measure if self.busy else None,
                "utilization_reason": self.busy_reason}

    def _read(self) -> dict[str, float]:
        """Every readable counter's parts; a source that fails now is left out of this reading (when it is the
        device's own, the span's energy is unknown)."""
        out: dict[str, float] = {}
        for counter in self.counters:
            try:
                values = counter.read()
            except Exception:
                continue
            for part, joules in values.items():
                out.setdefault(part, joules)  # the first source of a part is its best one
        return out

    def idle(self, seconds: float | None = None) -> tuple[float | None, float, str | None]:
        """The device's power while nothing runs on it (the run loop calls this after its warm-up, the device
        synchronized and the run's process waiting): the device's counter read at one of its updates and again at
        the first update `seconds` (IDLE_S) later, so a counter that moves every ~0.1 s (NVML) is not off by a step.
        (watts, seconds measured, None), or (None, 0.0, why not)."""
        if not self.counters or self.part is None:
            return None, 0.0, self.reason or "no energy counter readable here"
        try:
            t0, e0 = self._edge()
            time.sleep(IDLE_S if seconds is None else seconds)
            t1, e1 = self._edge()
        except Exception as exc:
            return None, 0.0, f"the energy counter could not be read ({_error(exc)})"
        if e0 is None or e1 is None:
            return None, 0.0, "the energy counter could not be read"
        if e1 < e0 or t1 <= t0:
            return None, 0.0, "the energy counter went backwards"
        return (e1 - e0) / (t1 - t0), t1 - t0, None

    def _edge(self) -> tuple[float, float | None]:
        """(time, joules of the device's part) right after the counter next moves, or after EDGE_WAIT_S."""
        part = self.part or ""  # (idle() reads no edge without a part)
        first = self._read().get(part)
        deadline = time.perf_counter() + EDGE_WAIT_S
        while True:
            now = time.perf_counter()
            value = self._read().get(part)
            if value is None or first is None or value != first or now >= deadline:
                return now, value
            time.sleep(EDGE_POLL_S)

    def begin(self, follow: bool = False) -> None:
        """A measured window's clock is about to start (the device was just synchronized): open a span unless
        one is open. `follow`: the span starts where the last one ended (its end reading, no counter read), for
        windows that follow each other with no gap."""
        if self._open:
            return
        self._open, self._windows = True, 0
        self._call_busy("begin")
        if follow and self._last is not None:
            self._start, self._t0 = self._last
            return
        self._t0 = time.perf_counter()
        self._start = self._read() if self.counters else None

    def end(self, close: bool = False) -> SpanEnergy | None:
        """A measured window ended (the device was just synchronized): None while its span goes on, the span's
        reading when it closes (long enough, or `close` at a break)."""
        if not self._open:
            return None
        self._windows += 1
        if not close and time.perf_counter() - self._t0 < self.span_s:
            return None
        return self._close()

    def flush(self) -> SpanEnergy | None:
        """Close the open span at its last window's end (a stop after that window): None when no window of it
        ended."""
        if not self._open or self._windows == 0:
            self._open = False
            return None
        return self._close()

    def _close(self) -> SpanEnergy:
        now = time.perf_counter()
        self._open = False
        out = SpanEnergy(seconds=now - self._t0, windows=self._windows, utilization=self._call_busy("end"))
        if not self.counters:
            return out
        end = self._read()
        self._last = (end, now)
        start, self._start = self._start or {}, None
        parts = {part: end[part] - start[part] for part in PARTS
                 if part in start and part in end and end[part] >= start[part]}  # backwards: unknown, never < 0
        if self.part not in parts:
            self.failures += 1
            return out
        out.energy_j, out.parts = parts[self.part], parts
        return out

    def close(self) -> None:
        for c in self.counters:
            try:
                c.close()
            except Exception:
                pass
        self._call_busy("close")

    def _call_busy(self, what: str) -> float | None:
        """The busy reader's begin/end/close; one that raises gives no figure for this span (never ends the run)."""
        if self.busy is None:
            return None
        try:
            value = getattr(self.busy, what)()
        except Exception:
            return None
        return value if is_finite(value) else None


def meter_for(kind: str, index: int | None = None, uuid: str | None = None) -> Meter:
    """The meter of a device ("cpu", "mps" or "cuda"); a source that cannot be used here gives its reason. Never
    raises: energy is optional, and a run must not fail because a meter did (docs/architecture.md, "Energy")."""
    try:
        return _meter_for(kind, index, uuid)
    except Exception as exc:  # a source's library raised something of its own while it was set up
        return Meter(span_s=SPAN_S, reason=f"the energy meter could not be set up ({_error(exc)})",
                     busy_reason=f"the utilisation meter could not be set up ({_error(exc)})")


def _meter_for(kind: str, index: int | None, uuid: str | None) -> Meter:
    meter = Meter(span_s=SPAN_S)
    try:
        if kind == "cuda":
            _cuda(meter, index, uuid)
        elif sys.platform == "darwin":
            _apple_silicon(meter, kind)
        elif kind == "cpu":
            meter.part = "cpu"
            if not sys.platform.startswith("linux"):
                raise Unreadable(f"no CPU energy counter this app can read on {_os_name()}")
            meter.counters.append(rapl.RaplCounter())
        else:
            raise Unreadable(f"no energy counter for {kind} here")
    except Unreadable as exc:
        meter.reason = str(exc)
    if not meter.counters:
        meter.part = None
        meter.reason = meter.reason or "no energy counter readable here"
    if kind == "cpu" and meter.busy is None:
        try:
            meter.busy = cpu.CpuBusy()
        except Exception as exc:
            meter.busy_reason = f"this process's CPU time could not be read ({_error(exc)})"
    if meter.busy is None and meter.busy_reason is None:
        meter.busy_reason = meter.reason or "no utilisation reading here"
    return meter


def _os_name() -> str:
    return {"win32": "Windows", "darwin": "an Intel Mac"}.get(sys.platform, sys.platform)


def _cuda(meter: Meter, index: int | None, uuid: str | None) -> None:
    meter.part = "gpu"
    library, handle, label = nvml.open_nvml(index, uuid)
    try:
        meter.busy = nvml.NvmlBusy(library, handle)
    except Exception as exc:
        meter.busy_reason = f"NVML reports no GPU utilisation here ({_error(exc)})"
    try:
        meter.counters.append(nvml.NvmlCounter(library, handle, label))
    except Exception as exc:
        text = _error(exc)
        if "not supported" in text.lower():
            raise Unreadable("this GPU has no NVML total-energy counter (GPUs from Volta on have one)") from None
        raise Unreadable(f"NVML's total-energy counter could not be read ({text})") from None
    if sys.platform.startswith("linux"):
        try:
            meter.counters.append(rapl.RaplCounter())  # the host CPU's share, kept as a part when readable
        except Exception:
            pass


def _apple_silicon(meter: Meter, kind: str) -> None:
    import platform

    meter.part = "gpu" if kind == "mps" else "cpu"
    if kind == "mps":
        try:
            meter.busy = ioreport.IoregBusy()
        except Exception as exc:
            meter.busy_reason = str(exc) if isinstance(exc, Unreadable) else \
                f"the IORegistry could not be read ({_error(exc)})"
    if platform.machine() != "arm64":
        raise Unreadable("no energy counter this app can read on an Intel Mac or under Rosetta")
    meter.counters.append(ioreport.AppleCounter())
