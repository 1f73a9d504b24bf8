"""An MLX run, measured by the rules of every run (docs/architecture.md, "Measurement rules"; trainer.py is PyTorch's):
warm-up apart, the device waited for at every clock read (`mx.synchronize`), windows of ~0.1 s with their losses
fetched once per window, median and IQR over windows, memory from MLX's allocator, energy from the device's meter.

MLX is lazy: work never `mx.eval`-ed is never done. A training step here evaluates what a real loop must, as MLX's own
examples do: the loss, the model's state (its parameters, batch norm's statistics) and the optimizer's state, every
step (`mx.compile` of the step where the run compiles). The data are the run's own batches (the same as PyTorch's),
converted to MLX arrays as they are taken (data wait, outside the step). Before the first step the twin gets the
PyTorch model's initial weights (models/mlx_twins.transfer) and parity is checked (parity.py): a twin that differs is
refused, never timed.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

from ...analysis.summary import RunFacts, memory_measure, perplexity, summarise
from ...basics.events import Ended, EpochEnd, Started, Warmup
from ...data.batches import endless
from ...machine import host
from ...machine import mlx as mlx_machine
from ...machine.energy import meter as energy
from ..failures import Cancelled, DataError, NonFinite
from ..windows import Windows
from .steps import MlxSteps, labels_of

@dataclass
class MlxPrepared:
    device: mlx_machine.MlxDevice
    steps: MlxSteps
    parameters: int
    train: object  # the run's batch source (data/batches.py)
    val: object
    convert: Callable
    env: dict
    meter: energy.Meter
    warm: int
    total: int
    parity: dict
    notes: list
    tokens_per_sample: float | None = None  # a model folder's: a row's real tokens (text) or its positions
    seq_len: int | None = None
    text: dict | None = None  # a text dataset's facts (data/token_rows.py)
    trainable: int | None = None  # the parameters that train (LoRA's adapters: fewer)


class MlxLoop:
    """One MLX run from set-up (`prepare`: setup.prepare) to summary; `execute` is the measured loop."""

    def __init__(self, config, result, emit, stop, data, progress, position, prepare) -> None:
        self.config, self.result, self.emit, self.stop = config, result, emit, stop
        self.prepare = prepare
        self.data, self.progress, self.position = data, progress, position
        self.p: MlxPrepared | None = None
        self.windows: Windows | None = None
        self.warmup_s: float | None = None
        self.measured_wall_s = 0.0
        self.val: tuple[float, float] | None = None
        self.noted: dict = {}
        self.load = host.LoadMeter(None)

    def _check_stop(self) -> None:
        if self.stop():
            raise Cancelled()

    def execute(self) -> None:
        p = self.p = self.prepare(self.config, self.data, self.progress, self._check_stop, self.noted)
        self.result.env = p.env
        cfg, dev = self.config, p.device
        win = self.windows = Windows(cfg, dev, p.meter, self.result.losses, self.result.windows, self.emit, p.warm,
                                     p.total, self.noted.get("memory_base", 0))
        self.emit(Started(run_id=self.result.id, config=cfg.to_dict(), env=p.env, device=dev.to_dict(),
                          dataset=self.noted["dataset"], parameters=p.parameters, total_steps=p.total,
                          warmup_steps=p.warm, notes=p.notes, run_index=self.position[0], run_count=self.position[1],
                          train_size=self.noted["train_size"],
                          tokens_per_step=p.tokens_per_sample * cfg.batch_size if p.tokens_per_sample else None))
        dev.reset_peak()
        stream = endless(p.train)
        by_epoch = cfg.steps is None
        per_epoch = p.train.steps_per_epoch
        losses: list = []
        wait = validation_s = 0.0
        epoch = 0
        dev.synchronize()
        watts, seconds, why = p.meter.idle() if not self.stop() else (None, None, "stopped")
        if isinstance(p.env.get("energy"), dict):
            p.env["energy"].update(idle_w=watts, idle_s=seconds, idle_reason=why)
        if p.warm == 0:
            p.meter.begin()
            self.load.start()
        run_start = clock = epoch_start = warm_end = time.perf_counter()
        for step in range(1, p.total + 1):
            t = time.perf_counter()
            try:
                x, y = next(stream)
                xm, ym = p.convert(x, p.steps.dtype), labels_of(y)
            except Exception as exc:
                raise DataError() from exc
            wait += time.perf_counter() - t
            losses.append(p.steps.step(xm, ym))
            epoch_end = by_epoch and step % per_epoch == 0
            in_warm = step <= p.warm
            if in_warm and step < p.warm and self.stop():
                raise Cancelled()
            if not (step == p.warm or step == p.total or epoch_end or (not in_warm and win.full(len(losses)))):
                continue
            # The window's losses are fetched before its clock is read: a loss is only computed once something asks
            # for it (MLX is lazy), so work a step left un-evaluated is done, and timed, inside its own window.
            fetched = _fetch(losses)
            dev.synchronize()
            now = time.perf_counter()
            reading = None if in_warm else p.meter.end(close=step == p.total or epoch_end)
            first = step - len(losses) + 1
            try:
                values = win.unstage(fetched, first)
            except NonFinite as exc:
                exc.cause = p.steps.non_finite_cause(xm, ym)
                raise
            if in_warm:
                self.warmup_s = now - run_start
                self.emit(Warmup(steps=p.warm, seconds=self.warmup_s, losses=self.result.losses[:p.warm]))
                warm_end = time.perf_counter()
                self.load.start()
            else:
                done = step - p.warm
                eta = (now - warm_end) / done * (p.total - step) if done > 0 else None
                win.record(first, values, now - clock, wait, step, now - run_start, eta, reading)
            losses, wait = [], 0.0
            if epoch_end:
                epoch += 1
                t_val = time.perf_counter()
                self.val = p.steps.validate(p.val, p.convert)
                loss, accuracy = self.val or (None, None)
                ended = EpochEnd(epoch, now - epoch_start, loss, accuracy, step=step,
                                 val_perplexity=perplexity(loss) if p.text is not None else None)
                self.result.epochs.append(ended.record())
                self.emit(ended)
                validation_s += time.perf_counter() - t_val
            if self.stop():
                win.close_span()
                self._close(warm_end, validation_s)
                raise Cancelled()
            dev.synchronize()
            if step >= p.warm:
                p.meter.begin()
            clock = time.perf_counter()
            if epoch_end:
                epoch_start = clock
        if not by_epoch:
            t_val = time.perf_counter()
            self.val = p.steps.validate(p.val, p.convert)
            validation_s += time.perf_counter() - t_val
        self._close(warm_end, validation_s)

    def _close(self, warm_end: float, validation_s: float) -> None:
        if self.p is not None:
            self.p.device.synchronize()
        self.measured_wall_s = time.perf_counter() - warm_end - validation_s
        if self.result.env:
            self.result.env["host_load"] = self.load.stop()

    def end(self) -> None:
        p = self.p
        if p is not None:
            p.meter.close()
        if self.result.env and "host_load" not in self.result.env:
            self.result.env["host_load"] = self.load.stop()
        summarise(self.result, RunFacts(
            batch_size=self.config.batch_size, parameters=p.parameters if p else self.noted.get("parameters", 0),
            dataset=self.noted.get("dataset", ""), warmup_steps=p.warm if p else 0, warmup_s=self.warmup_s,
            measured_wall_s=self.measured_wall_s, train_size=self.noted.get("train_size", 0), val=self.val,
            peak_memory=self.windows.peak_memory if self.windows else 0,
            memory_measure=memory_measure(self.config.device, self.result.env),
            tokens_per_sample=p.tokens_per_sample if p else None, text=p.text if p else None,
            seq_len=p.seq_len if p else None, trainable_parameters=p.trainable if p else None))
        if p is not None:
            self.result.summary = self.result.summary.replaced(parity=p.parity)
            self.result.summary = self.result.summary.replaced(framework="mlx")
        elif self.noted.get("parity"):  # refused: the parity that refused it is the run's record
            self.result.summary = self.result.summary.replaced(parity=self.noted["parity"])
        self.emit(Ended(self.result))


def _fetch(losses: list):
    """A window's losses in one transfer, as numpy (Windows.unstage checks them for NaN/inf)."""
    import mlx.core as mx
    import numpy as np

    return np.array(mx.stack(losses).astype(mx.float32))
