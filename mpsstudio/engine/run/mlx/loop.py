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

from ...analysis.summary import RunFacts, memory_measure, summarise
from ...basics.config import RunConfig
from ...basics.events import Ended, EpochEnd, Started, Warmup
from ...data.batches import endless
from ...machine import host
from ...machine import mlx as mlx_machine
from ...machine.energy import meter as energy
from ..failures import Cancelled, DataError, NonFinite
from ..windows import Windows

HALF_NOTE = ("MLX has no autocast: this run keeps fp32 master weights and optimizer state and computes each step's "
             "forward and backward in {p} (the weights cast to {p} each step, as mlx-lm's and PyTorch's mixed "
             "precision do; no loss scaling, which PyTorch's fp16 adds with its GradScaler).")
FP16_MAX = 65504.0


def make_optimizer(config: RunConfig):
    """The config's optimizer in MLX, as steps.make_optimizer makes PyTorch's: SGD with momentum 0.9, Adam, AdamW
    (weight decay 0.01), both with PyTorch's bias correction."""
    import mlx.optimizers as optim

    lr = float(config.lr or 0.0)
    if config.optimizer == "sgd":
        return optim.SGD(learning_rate=lr, momentum=0.9)
    if config.optimizer == "adam":
        return optim.Adam(learning_rate=lr, bias_correction=True)
    return optim.AdamW(learning_rate=lr, weight_decay=0.01, bias_correction=True)


def converter(layout: str, image: bool) -> Callable:
    """(PyTorch CPU tensor, MLX dtype) -> MLX array in the twin's layout: NHWC images for a convnet twin, token ids
    as int32."""
    import mlx.core as mx

    def convert(x, dtype=None):
        array = x.numpy()
        if image:
            if layout == "nhwc" and array.ndim == 4:
                array = array.transpose(0, 2, 3, 1)
            return mx.array(array, dtype=dtype or mx.float32)
        return mx.array(array.astype("int32"))

    return convert


class MlxSteps:
    """The step functions of an MLX run: training (loss, gradients, optimizer update, then `mx.eval` of the loss and
    every state) or inference (the forward and its loss, evaluated).

    In half precision (fp16, bf16) a training run keeps the weights and the optimizer's state in fp32 (`master`):
    each step casts the weights to the half type, runs the forward and backward there, and the optimizer updates the
    fp32 weights with the gradients cast back. Casting the whole model (and so Adam's state, whose eps of 1e-8 is 0
    in fp16) turned fp16 + Adam to NaN at the second step (issue 56)."""

    def __init__(self, config: RunConfig, model, dtype) -> None:
        import mlx.core as mx
        import mlx.nn as nn

        self.model, self.dtype, self.config = model, dtype, config
        self.optimizer = make_optimizer(config) if config.mode == "train" else None
        self.half = dtype != mx.float32

        def loss_fn(m, x, y):
            return nn.losses.cross_entropy(m(x).astype(mx.float32), y, reduction="mean")

        self.loss_fn = loss_fn
        self.loss_each = nn.losses.cross_entropy
        self.master: dict | None = None
        if self.half and self.optimizer is not None:
            self.master = {"weights": model.trainable_parameters()}  # fp32: the optimizer's
            cast = self.cast

            def loss_of(weights, x, y):
                model.update(cast(weights))
                return loss_fn(model, x, y)

            grad = mx.value_and_grad(loss_of)
            master = self.master

            def train(x, y):
                loss, grads = grad(master["weights"], x, y)
                master["weights"] = self.optimizer.apply_gradients(grads, master["weights"])
                return loss
        else:
            if self.half:
                model.set_dtype(dtype)  # inference: the weights themselves in the half type
            grad = nn.value_and_grad(model, loss_fn)

            def train(x, y):
                loss, grads = grad(model, x, y)
                self.optimizer.update(model, grads)
                return loss

        def infer(x, y):
            return loss_fn(model, x, y)

        body = train if config.mode == "train" else infer
        if config.compile:  # the state a compiled step reads and changes, as MLX's compile docs say
            state = [model.state, mx.random.state] + ([self.optimizer.state] if self.optimizer else []) + (
                [self.master] if self.master is not None else [])
            body = mx.compile(body, inputs=state, outputs=state)
        self.body = body

    def cast(self, tree):
        """A tree of weights in the step's half type (floating arrays only)."""
        import mlx.core as mx
        from mlx.utils import tree_map

        return tree_map(lambda w: w.astype(self.dtype) if mx.issubdtype(w.dtype, mx.floating) else w, tree)

    def weights(self):
        """The weights the optimizer updates: the fp32 master weights of a half-precision run, else the model's."""
        return self.master["weights"] if self.master is not None else self.model.trainable_parameters()

    def step(self, x, y):
        """One step, evaluated: the loss (kept for the window's one fetch) and every state the step changed."""
        import mlx.core as mx

        loss = self.body(x, y)
        if self.optimizer is not None:
            mx.eval(loss, self.model.state, self.optimizer.state, *([self.master] if self.master is not None else []))
        else:
            mx.eval(loss)
        return loss

    def sync_model(self) -> None:
        """The model given the current master weights in the half type (before validation: a step leaves the model
        holding the weights it was cast from, one update behind)."""
        if self.master is not None:
            self.model.update(self.cast(self.master["weights"]))

    def non_finite_cause(self, x, y) -> str:
        """Why a half-precision loss turned non-finite, where it can be told (the batch it happened on): the same
        fp32 weights give a finite loss in fp32 (the half type's range overflowed), or they are not finite any more
        (the training diverged); "" where neither (or an fp32 run)."""
        import math

        import mlx.core as mx
        import numpy as np

        if self.master is None:
            return ""
        weights = self.master["weights"]
        finite = all(bool(np.isfinite(np.array(w.astype(mx.float32))).all()) for _, w in _flat(weights))
        if not finite:
            return "the fp32 master weights themselves became non-finite: the training diverged, not the precision"
        self.model.update(weights)
        try:
            value = float(np.array(self.loss_fn(self.model, x.astype(mx.float32) if mx.issubdtype(
                x.dtype, mx.floating) else x, y)))
        finally:
            self.sync_model()
        if math.isfinite(value) and self.config.precision == "fp16":
            return (f"the same weights give a finite loss ({value:.4g}) in fp32: fp16's range (largest value "
                    f"{FP16_MAX:,.0f}) overflowed in the forward or backward; bf16 keeps fp32's range")
        if math.isfinite(value):
            return f"the same weights give a finite loss ({value:.4g}) in fp32: {self.config.precision} lost it"
        return ""

    def validate(self, batches, convert) -> tuple[float, float] | None:
        """(mean loss, accuracy) over the validation batches, the model in eval mode; None without any."""
        import mlx.core as mx
        import numpy as np

        if batches is None:
            return None
        self.sync_model()
        self.model.eval()
        total = correct = 0
        loss_sum = 0.0
        try:
            for x, y in batches.epoch():
                xm, ym = convert(x, self.dtype), mx.array(y.numpy())
                logits = self.model(xm).astype(mx.float32)
                loss = mx.sum(self.loss_each(logits, ym))
                hits = mx.sum(mx.argmax(logits, axis=-1) == ym)
                mx.eval(loss, hits)
                loss_sum, correct, total = loss_sum + float(np.array(loss)), correct + int(np.array(hits)), total + y.shape[0]
        finally:
            self.model.train(self.config.mode == "train")
        return (loss_sum / total, correct / total) if total else None


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
                          train_size=self.noted["train_size"]))
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
                xm, ym = p.convert(x, p.steps.dtype), _labels(y)
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
                ended = EpochEnd(epoch, now - epoch_start, loss, accuracy, step=step)
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
            memory_measure=memory_measure(self.config.device, self.result.env)))
        if p is not None:
            self.result.summary = self.result.summary.replaced(parity=p.parity)
            self.result.summary = self.result.summary.replaced(framework="mlx")
        elif self.noted.get("parity"):  # refused: the parity that refused it is the run's record
            self.result.summary = self.result.summary.replaced(parity=self.noted["parity"])
        self.emit(Ended(self.result))


def _flat(tree) -> list:
    from mlx.utils import tree_flatten

    return list(tree_flatten(tree))


def _labels(y):
    import mlx.core as mx

    return mx.array(y.numpy().astype("int32"))


def _fetch(losses: list):
    """A window's losses in one transfer, as numpy (Windows.unstage checks them for NaN/inf)."""
    import mlx.core as mx
    import numpy as np

    return np.array(mx.stack(losses).astype(mx.float32))
