"""A run measured from a training loop that is not ours (mpsstudio.track, `mpsstudio run SCRIPT`): the script reports
each step (its loss and batch size), and the Tracker applies the run loop's measurement rules to it: warm-up steps
timed apart; windows of about `window_s` of work, the device synchronized only at their ends; the losses kept on the
device and read once a window; memory, energy and the environment as a run records them; the same events
(Started, Warmup, Window, EpochEnd, Ended) and the same summary. What a step's time holds is the script's: its data
loading, logging and whatever else it does between two steps.

It never changes what the script computes: no thread count, TF32 or denormal setting is touched (a run of our own
sets them), nothing is moved or copied but the loss, read once a window. Its own pauses fall outside the script's
time: the device's idle power is read after the script's last step, never between two of its steps."""

from __future__ import annotations

import math
import time
from collections.abc import Callable

import torch

from ...analysis.summary import RunFacts, memory_measure, summarise
from ...basics.config import MAX_BATCH, RunConfig
from ...basics.errors import present
from ...basics.events import UNBOUNDED_STEPS, Ended, EpochEnd, Started, Warmup
from ...basics.formatting import printable
from ...basics.results import RunResult
from ...machine import devices, environment, host
from ..failures import NonFinite, outcome
from ..setup import run_environment
from ..windows import Windows
from ...machine.energy.meter import Meter

UNBOUNDED = UNBOUNDED_STEPS  # the steps of a script that runs to its own end (no --steps)


# A tracked run's shortest window on a GPU. Measured on the lent H100 (resnet18 224 px, batch 64, 14.6 ms a step):
# a synchronization every 0.1 s cost 2.1 % of the loop's time, every 0.5 s 0.4 %; tracked with 0.5 s windows,
# 0.7-1.0 % (docs/benchmarks.md, "What mpsstudio.track costs").
GPU_WINDOW_S = 1.0
# ... and its shortest energy span there: reading NVML's energy counter and utilisation samples took ~5-8 ms of the
# script's thread once a second on the lent H200 (~1 % of a launch-bound script's time: benchmarks/script_overhead.py
# --self-time), so a script's GPU energy is read every 5 s (its power plot gets a point each time).
GPU_SPAN_S = 5.0


class ScriptDone(BaseException):
    """Raised in the script's loop when its run is over (--steps reached, Stop, a NaN loss): a BaseException, so
    that a script's own `except Exception` does not swallow it."""


class Tracker:
    """One tracked run; `step(loss, batch_size)` after each optimizer step, `epoch(...)` after a validation, and
    `finish(status, error)` once at the end (also when the script failed)."""

    def __init__(self, config: RunConfig, emit: Callable, stop: Callable[[], bool] = lambda: False,
                 limit: int | None = None, how: str = "mt.step", asked: bool = False, machine: dict | None = None):
        """`asked`: MPS Studio chose `config.device` (mpsstudio run): a script that trains elsewhere ends its run
        with a sentence, never relabelled; else (a script run by python) the run is where its loss is. `machine`:
        the machine's description (environment.environment()), read before the script hid any device from itself."""
        self.config, self.emit, self.stop, self.limit, self.how = config, emit, stop, limit, how
        self.asked, self.machine = asked, machine
        # where the batch size comes from, in words ("the first dimension of the model's first input", ...)
        self.batch_from = "mt.step's batch_size" if how == "mt.step" else ""
        self.tokens = 0  # the measured steps' tokens (a token model's input ids), 0 when not a token model
        self.measured_samples = 0
        # called once, at the first measured step: the runner reads the script's settings there (counter.py); and
        # once as the run ends, before its summary (the runner's config then says what the script used)
        self.on_measure: Callable[[], None] | None = None
        self.on_finish: Callable[[], None] | None = None
        self.result = RunResult(config=config)
        self.device: devices.Device | None = None
        self.windows: Windows | None = None
        self.meter: Meter | None = None
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
        # On a GPU a window's record (memory, its event) waits until the script has queued its next step, so the
        # device computes meanwhile (as the trainer does): without it resnet18 on an H100 lost 3.5 % to mt.step.
        self.overlap = False
        # a window measured and its record waiting for the next step to be queued: (first, values, seconds, wait,
        # step, elapsed, eta) and its samples
        self.pending: tuple[tuple[int, list[float], float, float, int, float, float | None], int] | None = None

    @property
    def run_device(self) -> devices.Device:
        """The device of the run (known from the first step on), its windows and its energy meter."""
        return present(self.device, "no step was counted yet")

    @property
    def run_windows(self) -> Windows:
        return present(self.windows, "no step was counted yet")

    @property
    def run_meter(self) -> Meter:
        return present(self.meter, "no step was counted yet")

    @property
    def warm(self) -> int:
        return self.config.warmup_steps

    def configure(self, **changes) -> RunConfig:
        """The run's config with these changes (what the script turned out to use), the result's too."""
        self.config = self.result.config = self.config.changed(**changes)
        return self.config

    @property
    def total(self) -> int:
        return self.warm + self.limit if self.limit else UNBOUNDED

    def _start(self, loss: torch.Tensor, batch_size: int) -> None:
        elsewhere = trained_elsewhere(self.config.device, loss.device)
        if elsewhere and self.asked:
            self.result.summary = self.result.summary.replaced(trained_on=elsewhere)
            self.finish("failed", wrong_device(self.config.device, elsewhere))
            raise ScriptDone()
        if elsewhere:  # a script run by python: its run is where its loss is
            self.configure(device=elsewhere)
        self.configure(batch_size=batch_size)
        cfg = self.config
        self.device = devices.resolve_device(cfg.device)
        env, meter = run_environment(cfg, self.device, flush_denormal=None, env=self.machine)  # not touched
        self.meter = meter
        env["tracked"] = self.how
        self.result.env = env
        self.overlap = self.device.kind in ("cuda", "mps")
        if self.overlap:  # each window's synchronization idles a GPU (~2 ms on an H100): fewer, longer windows
            cfg = self.configure(window_s=max(cfg.window_s, GPU_WINDOW_S))
            meter.span_s = max(meter.span_s, GPU_SPAN_S)
        base = self.device.in_use(self.device.memory()) if self.device.kind == "cpu" else 0
        self.windows = Windows(cfg, self.device, meter, self.result.losses, self.result.windows, self.emit,
                               self.warm, self.total, base)
        how = {"mt.step": "steps reported by mpsstudio.track's step()",
               "optimizer hook": "steps counted by the optimizer hook (torch.optim's step post-hook), losses from "
                                 "the tensor each backward() was called on"}.get(self.how, self.how)
        self.emit(Started(run_id=self.result.id, config=cfg.to_dict(), env=env, device=self.device.to_dict(),
                          dataset=self._dataset(), parameters=self.parameters,
                          total_steps=self.total if self.limit else 0, warmup_steps=self.warm,
                          notes=[f"Your script's own loop: {how}; each step's time holds whatever the script does "
                                 "between two steps (its data loading too)"
                                 + (f"; measured in windows of at least {cfg.window_s:g} s (each synchronizes the "
                                    f"GPU), its energy read every {self.run_meter.span_s:g} s." if self.overlap else "."),
                                 *([f"Batch: {batch_size:,} samples a step, from {self.batch_from}."]
                                   if self.batch_from else [])]))
        self.run_device.synchronize()
        self.run_start = self.clock = self.warm_end = time.perf_counter()
        if self.warm == 0:
            self._measure_from_now()

    def _dataset(self) -> str:
        name = self.config.model.replace("\\", "/").rsplit("/", 1)[-1]
        return f"{name}'s own data"

    def _measure_from_now(self) -> None:
        if self.on_measure is not None:
            self.on_measure()
        self.run_meter.begin()
        self.load.start()
        self.clock = self.warm_end = time.perf_counter()

    def step(self, loss, batch_size: int, tokens: int = 0) -> None:
        """One optimizer step of the script: its loss (a tensor: kept on its device), its samples and, for a token
        model, its tokens (0 otherwise)."""
        if self.ended:
            raise ScriptDone()
        if not isinstance(loss, torch.Tensor):
            loss = torch.as_tensor(float(loss))
        problem = loss_problem(loss)
        if not problem and batch_problem(batch_size):
            source = f", from {self.batch_from}" if self.batch_from else ""
            problem = (f"its samples ({printable(repr(batch_size))[:40]}{source}) are not a whole number from 1 to "
                       f"{MAX_BATCH:,}, the largest batch MPS Studio measures (give the step's samples with "
                       "--batch-size N or mt.step(loss, batch_size=n))")
        if not problem and not (isinstance(tokens, int) and 0 <= tokens <= MAX_TOKENS):
            problem = "its tokens are not a count"
        if problem:  # checked where it enters: a run that cannot be stored is never made
            self.finish("failed", f"Step {self.count + 1} could not be measured: {problem}.")
            raise ScriptDone()
        if self.windows is None:
            self._start(loss, batch_size)
        self.count += 1
        self.batch_sizes.add(batch_size)
        kept = loss.detach()  # one op per step on the common 0-d loss: the script's time is what is measured
        self.win_losses.append(kept if kept.dim() == 0 else kept.float().mean())
        self.win_samples += batch_size
        if self.count > self.warm:
            self.measured_samples += batch_size
            self.tokens += tokens
        step, win = self.count, self.run_windows
        self._record_pending()  # the last window's books, now that this step is queued on the device
        try:
            if step <= self.warm:
                if step == self.warm:
                    self.run_device.synchronize()
                    self.warmup_s = time.perf_counter() - self.run_start
                    values = win.fetch(self.win_losses, 1)
                    self.emit(Warmup(steps=self.warm, seconds=self.warmup_s, losses=values))
                    self.win_losses, self.win_samples = [], 0
                    self._measure_from_now()
            elif win.full(len(self.win_losses)) or step == self.total:
                ended_at = self._close_window(close=step == self.total)
                if self.stop():
                    self.finish("cancelled")
                    raise ScriptDone()
                self.run_meter.begin()
                # the next window starts at this one's end where its books wait (GPU), else after them (CPU)
                self.clock = ended_at if self.pending is not None else time.perf_counter()
        except NonFinite as exc:
            self.finish(*outcome(exc, self.config))
            raise ScriptDone() from None
        if self.limit and step >= self.total:
            self.finish("finished")
            raise ScriptDone()

    def _close_window(self, close: bool) -> float:
        """Measure the open window (synchronized); its record waits for the next step where the device overlaps
        (`pending`), unless it is the last. Returns the clock reading that ended it."""
        self.run_device.synchronize()
        now = time.perf_counter()
        defer = self.overlap and not close
        # the energy counter (NVML: ~4 ms a read) is read with the books, once the next step is queued; the next
        # span then starts at that reading, so no energy falls between two spans
        reading = None if defer else self.run_meter.end(close=close)
        first = self.count - len(self.win_losses) + 1
        values = self.run_windows.fetch(self.win_losses, first)
        spent, done = now - self.warm_end, self.count - self.warm
        eta = spent / done * (self.total - self.count) if self.limit and done > 0 else None
        books = (first, values, now - self.clock, 0.0, self.count, now - self.run_start, eta)
        samples, self.win_losses, self.win_samples = self.win_samples, [], 0
        if defer:
            self.pending = (books, samples)
        else:
            self.run_windows.record(*books, reading, samples=samples)
        return now

    def _record_pending(self) -> None:
        if self.pending is not None:
            (books, samples), self.pending = self.pending, None
            reading = self.run_meter.end()
            self.run_meter.begin(follow=True)
            self.run_windows.record(*books, reading, samples=samples)

    def epoch(self, val_loss: float | None = None, val_accuracy: float | None = None) -> None:
        """The script validated after an epoch: its figures are kept with the run (measured steps go on)."""
        if self.windows is None or self.ended:
            return
        self._record_pending()  # its last window's event goes out before the epoch's
        epoch = len(self.result.epochs) + 1
        val_loss = _number(val_loss)
        val_accuracy = _number(val_accuracy)
        now = time.perf_counter()
        seconds, self.epoch_mark = now - max(self.epoch_mark, self.run_start), now  # this epoch's, validation too
        ended = EpochEnd(epoch, seconds, val_loss, val_accuracy, step=self.count)
        self.result.epochs.append(ended.record())
        self.emit(ended)

    def finish(self, status: str = "finished", error: str = "") -> RunResult:
        """End the run (once): the open window measured if it holds steps, the summary, the Ended event."""
        if self.ended:
            return self.result
        self.ended = True
        if self.on_finish is not None:
            self.on_finish()
        measured_wall = 0.0
        if status == "finished" and 0 < self.count <= self.warm:  # every step was warm-up: nothing measured
            status, error = "failed", (
                f"The script made {self.count:,} step{'' if self.count == 1 else 's'}, all of them warm-up "
                f"({self.warm:,}): nothing was measured; lower the warm-up (--warmup, or MPSSTUDIO_WARMUP for a "
                "script run by python) or let the script run longer.")
        if self.windows is None and not self.result.env:  # ended before its first step: where it ran, still said
            try:
                self.result.env = dict(self.machine) if self.machine else environment.environment()
            except Exception:  # the run's sentence matters more than its machine's description
                pass
        if self.windows is not None:
            try:
                self._record_pending()
                if self.win_losses and self.count > self.warm:
                    self._close_window(close=True)
                elif self.win_losses:  # still warming up: its losses are kept, nothing is measured
                    self.result.losses.extend(torch.stack(self.win_losses).float().cpu().tolist())
                self.run_device.synchronize()
            except Exception as exc:  # a NaN in the last window, a device gone: said, what was measured stands
                if status == "finished":
                    status, error = outcome(exc, self.config)
            measured_wall = time.perf_counter() - self.warm_end if self.count > self.warm else 0.0
            self.run_meter.close()
            self.result.env["host_load"] = self.load.stop()
            self._read_idle(status)
        elif isinstance(self.result.env, dict) and "energy" not in self.result.env:
            self.result.env["energy"] = {"reason": "not measured (the script ended before its first training step)"}
        self.result.status, self.result.error = status, error
        seen: dict = {}  # what the script's steps showed, kept by summarise
        if len(self.batch_sizes) > 1:
            seen["batch_sizes"] = sorted(self.batch_sizes)[:20]
        if self.batch_from:
            seen["batch_from"] = self.batch_from
        if self.tokens and self.measured_samples:
            seen["tokens_per_sample"] = self.tokens / self.measured_samples
        self.result.summary = self.result.summary.replaced(**seen)
        summarise(self.result, RunFacts(
            batch_size=self.config.batch_size, parameters=self.parameters, dataset=self._dataset(),
            warmup_steps=self.warm, warmup_s=self.warmup_s, measured_wall_s=measured_wall,
            val=(self.result.epochs[-1].val_loss, self.result.epochs[-1].val_accuracy)
            if self.result.epochs else None,
            peak_memory=self.windows.peak_memory if self.windows else 0,
            memory_measure=memory_measure(self.config.device, self.result.env)))
        s = self.result.summary
        per, rate = s.tokens_per_sample, s.samples_per_s
        tokens = {"tokens_per_s": rate * per} if per and rate else {}
        self.result.summary = s.replaced(tracked=self.how, **tokens)
        self.emit(Ended(self.result))
        return self.result

    def _read_idle(self, status: str) -> None:
        """The device's idle power, read once the script's last step is done (a second with nothing running), so
        that no pause of ours falls between two of the script's steps; only after a run that finished."""
        energy = self.result.env.setdefault("energy", {})
        if status != "finished":
            energy.update(idle_w=None, idle_s=0.0, idle_reason="not read (the run did not finish)")
            return
        energy.update(zip(("idle_w", "idle_s", "idle_reason"), self.run_meter.idle()), idle_when="after")


MAX_TOKENS = 10**12  # a step's tokens (MAX_BATCH sequences of a million tokens each)


def batch_problem(samples) -> str:
    """Why a step's samples cannot be counted ("" when they can): a whole number from 1 to the engine's largest
    batch (--batch-size's limit), so that every figure a run stores fits the history."""
    if isinstance(samples, bool) or not isinstance(samples, int) or not 1 <= samples <= MAX_BATCH:
        return f"batch_size must be a whole number from 1 to {MAX_BATCH:,} (the largest batch MPS Studio measures)"
    return ""


def loss_problem(loss: torch.Tensor) -> str:
    """Why a step's loss tensor cannot be measured ("" when it can), read without waiting for the device: a loss
    on the meta device has no value, a complex one no order (its imaginary part would be dropped), a sparse one is
    not one number. A NaN or infinite value is found when its window is read (the run then says at which step)."""
    if loss.device.type == "meta":
        return ("the loss is on the meta device, which holds shapes but no values: nothing can be measured; train on "
                "a real device")
    if loss.dtype.is_complex:
        return "the loss is complex; give a real number (the value the optimizer minimises)"
    if loss.layout != torch.strided:
        return f"the loss is a {str(loss.layout).replace('torch.', '')} tensor; give the dense mean loss"
    if loss.dtype == torch.bool:
        return "the loss is a true/false tensor, not a number"
    return ""


def trained_elsewhere(asked: str, where: torch.device) -> str:
    """The device a script's loss is on, when that is not the device asked for ("" when it is): another kind, or
    another CUDA GPU than one asked by its number."""
    kind = torch.device(asked)
    if where.type == "meta":
        return ""  # not a device anyone trains on: the loss's check says so (track.py)
    if where.type != kind.type:
        return f"{where.type}:{where.index}" if where.type == "cuda" and where.index is not None else where.type
    if kind.index is not None and where.index is not None and where.index != kind.index:
        return f"{where.type}:{where.index}"
    return ""


def wrong_device(asked: str, where: str) -> str:
    """The sentence of a run whose script trained on another device than the one asked for."""
    return (f"Asked for {asked}; the script trained on {where}: it chooses its device itself, so this run measured "
            f"nothing for {asked}. Let it take the run's device (mpsstudio.track.device(), or {{device}} in its "
            f"arguments), or give it arguments for {asked} alone (--args-for {asked}=\"...\", or the script "
            "dialog's field for that device).")


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
