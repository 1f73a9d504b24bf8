"""The measured phase's windows: how many steps the next window takes (about `window_s` of work, at least ~8 windows
a run so there is a median and an IQR), each window's losses fetched in one transfer and checked for NaN/inf, and
its throughput, memory, time left and energy span recorded and sent as a Window event."""

from __future__ import annotations

import math
import os
import statistics
from collections.abc import Callable
from dataclasses import replace

import torch

from ..basics.config import RunConfig
from ..basics.events import RECENT_WINDOWS, Window
from ..basics.results import WindowRow
from ..machine import devices
from ..machine.energy import meter as energy
from .failures import NonFinite

# "sync": time CUDA windows by the synchronized wall clock, as other devices (benchmarks/window_clock.py compares)
WINDOW_CLOCK_VAR = "MPSSTUDIO_WINDOW_CLOCK"


def span_fields(span: energy.SpanEnergy) -> dict:
    """The Window fields of the energy span a window closed."""
    return {"energy_j": span.energy_j, "energy_s": span.seconds, "energy_windows": span.windows,
            "energy_parts": span.parts, "utilization": span.utilization}


def reading_peak(memory: dict) -> int:
    """The library's own peak in a memory reading (Device.memory's "peak": CUDA's and MPS's allocator peak, MLX's on
    a GPU; "peak_allocated" in readings from before it), 0 where it keeps none."""
    value = memory.get("peak", memory.get("peak_allocated", 0))
    return int(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else 0


class Windows:
    """Window bookkeeping of one run; `records` and `losses` are the RunResult's own lists."""

    def __init__(self, config: RunConfig, device: devices.Device, meter: energy.Meter, losses: list[float],
                 records: list[WindowRow], emit: Callable, warm: int, total: int, memory_base: int, world: int = 1):
        self.config, self.device, self.meter, self.emit = config, device, meter, emit
        self.losses, self.records = losses, records
        self.total, self.memory_base = total, memory_base
        self.target = 1  # steps per window; adapted after each window to ~window_s of work
        self.cap = max(1, math.ceil((total - warm) / 8))  # at least ~8 windows for a median and IQR
        self.peak_memory = 0
        self.world = world  # ranks: a window's samples are every rank's (ranks.py)
        self.marks = StreamMarks(device)

    def full(self, steps_in_window: int) -> bool:
        return steps_in_window >= self.target

    def fetch(self, win_losses: list[torch.Tensor], first: int) -> list[float]:
        """One device-to-host transfer for the whole window; checks for NaN/inf."""
        try:
            values = torch.stack(win_losses).float().cpu().tolist()
        except RuntimeError:  # losses of several dtypes or devices (a script's own loop)
            values = torch.stack([v.float().cpu() for v in win_losses]).tolist()
        self.losses.extend(values)
        for i, v in enumerate(values):
            if not math.isfinite(v):
                raise NonFinite(first + i, v)
        return values

    def stage(self, win_losses: list[torch.Tensor]) -> torch.Tensor:
        """The window's losses copied to pinned host memory without waiting (read by `unstage` once the device has
        passed the window's end mark)."""
        losses = torch.stack(win_losses).float()
        host = torch.empty(losses.shape, dtype=losses.dtype, pin_memory=losses.is_cuda)
        return host.copy_(losses, non_blocking=True)

    def unstage(self, host: torch.Tensor, first: int) -> list[float]:
        """`fetch` for losses `stage` copied: kept, and checked for NaN/inf."""
        values = host.tolist()
        self.losses.extend(values)
        for i, v in enumerate(values):
            if not math.isfinite(v):
                raise NonFinite(first + i, v)
        return values

    def record(self, first: int, values: list[float], seconds: float, wait: float, step: int, elapsed: float,
               eta: float | None, reading: energy.SpanEnergy | None, samples: int | None = None) -> None:
        """A measured window ended: adapt the next window's length, then record and send this one. `samples`: the
        window's samples where its batches differ in size (a script's own loop), else steps x the batch size."""
        n = len(values)
        self.target = max(1, min(self.cap, round(self.config.window_s * n / seconds) if seconds > 0 else self.cap))
        memory = self.device.memory()
        in_use = max(0, self.device.in_use(memory) - self.memory_base)
        self.peak_memory = max(self.peak_memory, in_use, reading_peak(memory))
        samples = samples if samples is not None else n * self.config.batch * self.world
        sps = samples / seconds if seconds > 0 else float("inf")
        recent = [v for v in [w.samples_per_s for w in self.records[-(RECENT_WINDOWS - 1):]] + [sps]
                  if v is not None and math.isfinite(v)]
        lines = self.device.memory_lines(memory)
        window = Window(index=len(self.records), first_step=first, losses=values, seconds=seconds,
                        samples=samples, samples_per_s=sps, data_wait_s=wait, memory=in_use,
                        memory_detail=memory, steps_done=step, total_steps=self.total, elapsed_s=elapsed,
                        eta_s=eta, recent_samples_per_s=statistics.median(recent) if recent else None,
                        memory_driver=lines["memory_driver"], memory_process=lines["memory_process"],
                        swap_used=lines["swap_used"],
                        **(span_fields(reading) if reading is not None else {}))
        self.records.append(window.record())
        self.emit(window)

    def steps_per_s(self) -> float:
        """Measured steps a second, the median over the windows so far (0 before any)."""
        rates = [w.samples_per_s / (self.config.batch * self.world) for w in self.records
                 if w.samples_per_s and math.isfinite(w.samples_per_s)]
        return statistics.median(rates) if rates else 0.0

    def close_span(self) -> None:
        """A stop right after a window: its open energy span ends with that window (the device was synchronized
        there, and nothing ran since but bookkeeping)."""
        span = self.meter.flush()
        if span is not None and self.records:
            self.records[-1] = replace(self.records[-1], **span_fields(span))


class StreamMarks:
    """CUDA events recorded in the device's stream at windows' ends: a window's seconds are the device's own time
    between two marks, read without draining the queue (the run loop reads them once the next step is queued).
    Measured side by side with the synchronized clock on an H100 (docs/benchmarks.md). Other devices: disabled,
    `mark()` gives None, and windows are timed by the synchronized wall clock."""

    def __init__(self, device: devices.Device):
        self.enabled = device.kind == "cuda" and os.environ.get(WINDOW_CLOCK_VAR, "") != "sync"

    def mark(self):
        if not self.enabled:
            return None
        event = torch.cuda.Event(enable_timing=True)
        event.record()
        return event
