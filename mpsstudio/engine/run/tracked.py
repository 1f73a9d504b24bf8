"""A run measured from a training loop that is not ours (mpsstudio.track, `mpsstudio run SCRIPT`): the script reports
each step (its loss and batch size), and the Tracker applies the run loop's measurement rules to it: warm-up steps
timed apart; windows of about `window_s` of work, the device synchronized only at their ends; the losses kept on the
device and read once a window; memory, energy and the environment as a run records them; the same events
(Started, Warmup, Window, EpochEnd, Ended) and the same summary. What a step's time holds is the script's: its data
loading, logging and whatever else it does between two steps.

It never changes what the script computes: no thread count, TF32 or denormal setting is touched (a run of our own
sets them), nothing is moved or copied but the loss, read once a window."""

from __future__ import annotations

import math
import time
from collections.abc import Callable

import torch

from ..analysis.summary import RunFacts, memory_measure, summarise
from ..basics.config import RunConfig
from ..basics.events import Ended, EpochEnd, Started, Warmup
from ..basics.results import RunResult
from ..machine import devices, host
from .failures import NonFinite, outcome
from .setup import _environment
from .windows import Windows

UNBOUNDED = 10**9  # the steps of a script that runs to its own end (no --steps)


class ScriptDone(BaseException):
    """Raised in the script's loop when its run is over (--steps reached, Stop, a NaN loss): a BaseException, so
    that a script's own `except Exception` does not swallow it."""


class Tracker:
    """One tracked run; `step(loss, batch_size)` after each optimizer step, `epoch(...)` after a validation, and
    `finish(status, error)` once at the end (also when the script failed)."""

    def __init__(self, config: RunConfig, emit: Callable, stop: Callable[[], bool] = lambda: False,
                 limit: int | None = None, how: str = "mt.step"):
        self.config, self.emit, self.stop, self.limit, self.how = config, emit, stop, limit, how
        self.result = RunResult(config=config)
        self.device: devices.Device | None = None
        self.windows: Windows | None = None
        self.meter = None
        self.count = 0  # steps reported
        self.win_losses: list[torch.Tensor] = []
        self.win_samples = 0
        self.clock = self.warm_end = self.run_start = 0.0
        self.warmup_s: float | None = None
        self.parameters = 0
        self.batch_sizes: set[int] = set()
        self.load = host.LoadMeter()
        self.ended = False
        self.epoch_mark = 0.0

    @property
    def warm(self) -> int:
        return self.config.warmup_steps

    @property
    def total(self) -> int:
        return self.warm + self.limit if self.limit else UNBOUNDED

    def _start(self, loss: torch.Tensor, batch_size: int) -> None:
        cfg = self.config
        if loss.device.type != torch.device(cfg.device).type:  # the loss says where the script trains
            cfg.device = str(loss.device) if loss.device.type == "cuda" else loss.device.type
        cfg.batch_size = batch_size
        self.device = devices.resolve_device(cfg.device)
        env, self.meter = _environment(cfg, self.device, flush_denormal=None)  # the script's own: not touched
        env["tracked"] = self.how
        self.result.env = env
        base = self.device.in_use(self.device.memory()) if self.device.kind == "cpu" else 0
        self.windows = Windows(cfg, self.device, self.meter, self.result.losses, self.result.windows, self.emit,
                               self.warm, self.total, base)
        how = {"mt.step": "steps reported by mpsstudio.track's step()",
               "optimizer hook": "steps counted by the optimizer hook (torch.optim's step post-hook), losses from "
                                 "the tensor each backward() was called on"}.get(self.how, self.how)
        self.emit(Started(run_id=self.result.id, config=cfg.to_dict(), env=env, device=self.device.to_dict(),
                          dataset=self._dataset(), parameters=self.parameters,
                          total_steps=self.total if self.limit else 0, warmup_steps=self.warm,
                          notes=[f"Your script's own loop: {how}; each step's time holds whatever the script does "
                                 "between two steps (its data loading too)."]))
        self.device.synchronize()
        self.run_start = self.clock = self.warm_end = time.perf_counter()
        if self.warm == 0:
            self._measure_from_now()

    def _dataset(self) -> str:
        name = self.config.model.replace("\\", "/").rsplit("/", 1)[-1]
        return f"{name}'s own data"

    def _measure_from_now(self) -> None:
        self.meter.begin()
        self.load.start()
        self.clock = self.warm_end = time.perf_counter()

    def step(self, loss, batch_size: int) -> None:
        """One optimizer step of the script: its loss (a tensor: kept on its device) and its samples."""
        if self.ended:
            raise ScriptDone()
        if not isinstance(loss, torch.Tensor):
            loss = torch.as_tensor(float(loss))
        if self.windows is None:
            self._start(loss, batch_size)
        self.count += 1
        self.batch_sizes.add(batch_size)
        self.win_losses.append(loss.detach().reshape(()).float())
        self.win_samples += batch_size
        step, win = self.count, self.windows
        try:
            if step <= self.warm:
                if step == self.warm:
                    self.device.synchronize()
                    self.warmup_s = time.perf_counter() - self.run_start
                    values = win.fetch(self.win_losses, 1)
                    self.emit(Warmup(steps=self.warm, seconds=self.warmup_s, losses=values))
                    self.win_losses, self.win_samples = [], 0
                    self.result.env.setdefault("energy", {}).update(zip(("idle_w", "idle_s", "idle_reason"),
                                                                        self.meter.idle()))
                    self._measure_from_now()
            elif win.full(len(self.win_losses)) or step == self.total:
                self._close_window(close=step == self.total)
                if self.stop():
                    self.finish("cancelled")
                    raise ScriptDone()
                self.meter.begin()
                self.clock = time.perf_counter()
        except NonFinite as exc:
            self.finish(*outcome(exc, self.config))
            raise ScriptDone() from None
        if self.limit and step >= self.total:
            self.finish("finished")
            raise ScriptDone()

    def _close_window(self, close: bool) -> None:
        self.device.synchronize()
        now = time.perf_counter()
        reading = self.meter.end(close=close)
        first = self.count - len(self.win_losses) + 1
        values = self.windows.fetch(self.win_losses, first)
        spent, done = now - self.warm_end, self.count - self.warm
        eta = spent / done * (self.total - self.count) if self.limit and done > 0 else None
        self.windows.record(first, values, now - self.clock, 0.0, self.count, now - self.run_start, eta, reading,
                            samples=self.win_samples)
        self.win_losses, self.win_samples = [], 0

    def epoch(self, val_loss: float | None = None, val_accuracy: float | None = None) -> None:
        """The script validated after an epoch: its figures are kept with the run (measured steps go on)."""
        if self.windows is None or self.ended:
            return
        epoch = len(self.result.epochs) + 1
        val_loss = _number(val_loss)
        val_accuracy = _number(val_accuracy)
        now = time.perf_counter()
        seconds, self.epoch_mark = now - max(self.epoch_mark, self.run_start), now  # this epoch's, validation too
        self.result.epochs.append({"epoch": epoch, "step": self.count, "seconds": seconds, "val_loss": val_loss,
                                   "val_accuracy": val_accuracy})
        self.emit(EpochEnd(epoch, seconds, val_loss, val_accuracy, step=self.count))

    def finish(self, status: str = "finished", error: str = "") -> RunResult:
        """End the run (once): the open window measured if it holds steps, the summary, the Ended event."""
        if self.ended:
            return self.result
        self.ended = True
        measured_wall = 0.0
        if self.windows is not None:
            try:
                if self.win_losses and self.count > self.warm:
                    self._close_window(close=True)
                elif self.win_losses:  # still warming up: its losses are kept, nothing is measured
                    self.result.losses.extend(torch.stack(self.win_losses).float().cpu().tolist())
                self.device.synchronize()
            except Exception as exc:  # a NaN in the last window, a device gone: said, what was measured stands
                if status == "finished":
                    status, error = outcome(exc, self.config)
            measured_wall = time.perf_counter() - self.warm_end if self.count > self.warm else 0.0
            self.meter.close()
            self.result.env["host_load"] = self.load.stop()
        self.result.status, self.result.error = status, error
        if len(self.batch_sizes) > 1:
            self.result.summary["batch_sizes"] = sorted(self.batch_sizes)[:20]
        summarise(self.result, RunFacts(
            batch_size=self.config.batch_size, parameters=self.parameters, dataset=self._dataset(),
            warmup_steps=self.warm, warmup_s=self.warmup_s, measured_wall_s=measured_wall,
            val=(self.result.epochs[-1]["val_loss"], self.result.epochs[-1]["val_accuracy"])
            if self.result.epochs else None,
            peak_memory=self.windows.peak_memory if self.windows else 0,
            memory_measure=memory_measure(self.config.device)))
        self.result.summary["tracked"] = self.how
        self.emit(Ended(self.result))
        return self.result


def _number(v) -> float | None:
    try:
        v = float(v)
    except (TypeError, ValueError):
        return None
    return v if math.isfinite(v) else None


# The tracked run of this process, when a runner (run/script.py) runs a script for it; mpsstudio.track reports to it.
ACTIVE: dict = {"tracker": None, "counter": None}


def bind(tracker: Tracker, counter=None) -> None:
    ACTIVE.update(tracker=tracker, counter=counter)


def unbind() -> None:
    ACTIVE.update(tracker=None, counter=None)
