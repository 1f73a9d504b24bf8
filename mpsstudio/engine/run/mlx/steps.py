"""What one MLX step computes (loop.py times it): the config's optimizer in MLX, the run's batches as MLX arrays, and
the step functions of training and inference, half precision included, with validation after an epoch.

MLX is lazy: work never `mx.eval`-ed is never done. A training step evaluates what a real loop must, as MLX's own
examples do: the loss, the model's state (its parameters, batch norm's statistics) and the optimizer's state, every
step (`mx.compile` of the step where the run compiles). A model folder (mlx-lm's model of it) is a language model:
its loss the mean over the labelled next tokens, its validation PyTorch's on text (run/epochs.py).
"""

from __future__ import annotations

from collections.abc import Callable

from ...basics.config import RunConfig
from ...data.tokens import IGNORE

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


def next_token_loss(logits, labels):
    """MLX's mean next-token cross entropy over the labelled tokens (labels IGNORE left out: prompts, padding), in fp32."""
    import mlx.core as mx
    import mlx.nn as nn

    targets = labels[:, 1:]
    mask = targets != IGNORE
    each = nn.losses.cross_entropy(logits[:, :-1].astype(mx.float32), mx.where(mask, targets, 0), reduction="none")
    return (each * mask).sum() / mx.maximum(mask.sum(), 1)


class MlxSteps:
    """The step functions of an MLX run: training (loss, gradients, optimizer update, then `mx.eval` of the loss and
    every state) or inference (the forward and its loss, evaluated).

    In half precision (fp16, bf16) a training run keeps the weights and the optimizer's state in fp32 (`master`):
    each step casts the weights to the half type, runs the forward and backward there, and the optimizer updates the
    fp32 weights with the gradients cast back. Casting the whole model (and so Adam's state, whose eps of 1e-8 is 0
    in fp16) turned fp16 + Adam to NaN at the second step (issue 56)."""

    def __init__(self, config: RunConfig, model, dtype, lm: bool = False) -> None:
        import mlx.core as mx
        import mlx.nn as nn

        self.model, self.dtype, self.config, self.lm = model, dtype, config, lm
        self.optimizer = make_optimizer(config) if config.mode == "train" else None
        self.half = dtype != mx.float32

        def loss_fn(m, x, y):
            if lm:  # a language model (a model folder in mlx-lm): the mean over the labelled next tokens
                return next_token_loss(m(x), y)
            return nn.losses.cross_entropy(m(x).astype(mx.float32), y, reduction="mean")

        self.loss_fn = loss_fn
        self.loss_each = nn.losses.cross_entropy
        self.master: dict | None = None
        if self.half and self.optimizer is not None:
            self.master = {"weights": model.trainable_parameters()}  # fp32: the optimizer's
            if lm:  # the frozen weights (LoRA's base model) in the half type once; the trained ones cast each step
                model.set_dtype(dtype)
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
        if self.lm:
            return self._validate_text(batches, convert)
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


    def _validate_text(self, batches, convert) -> tuple[float, float] | None:
        """A language model's validation, as PyTorch's (epochs.py): the mean cross-entropy of each learnt next token
        (label IGNORE left out) and the share its top choice gets right."""
        import mlx.core as mx
        import mlx.nn as nn
        import numpy as np

        self.sync_model()
        self.model.eval()
        loss_sum = right = counted = 0.0
        try:
            for x, y in batches.epoch():
                logits = self.model(convert(x, self.dtype))[:, :-1].astype(mx.float32)
                target = labels_of(y)[:, 1:]
                learnt = target != IGNORE
                each = nn.losses.cross_entropy(logits, mx.where(learnt, target, 0), reduction="none")
                parts = mx.stack([(each * learnt).sum(), ((mx.argmax(logits, axis=-1) == target) & learnt).sum(),
                                  learnt.sum()]).astype(mx.float32)
                got = np.array(parts)
                loss_sum, right, counted = loss_sum + float(got[0]), right + float(got[1]), counted + float(got[2])
        finally:
            self.model.train(self.config.mode == "train")
        return (loss_sum / counted, right / counted) if counted else None


def _flat(tree) -> list:
    from mlx.utils import tree_flatten

    return list(tree_flatten(tree))


def labels_of(y):
    import mlx.core as mx

    return mx.array(y.numpy().astype("int32"))
