"""One step of a run: the training step (fp32, mixed precision with a GradScaler where the device has one,
gradient accumulation) or the inference step, the optimizer they use, and the process-wide settings a run sets.

The fp32 training step is the hot path: kept as lean as the bare PyTorch loop it is benchmarked against."""

from __future__ import annotations

from collections.abc import Callable
from contextlib import contextmanager, nullcontext

import torch
import torch.nn.functional as F

from ..basics.config import RunConfig
from ..basics.errors import UserError, present
from ..machine import devices, precision
from ..models import registry as models

DTYPES = {"fp16": torch.float16, "bf16": torch.bfloat16}


def make_optimizer(config: RunConfig, model: torch.nn.Module) -> torch.optim.Optimizer:
    """The config's optimizer over `model`'s parameters (runs and the measuring tools use the same); UserError for a
    model with none to train."""
    if not any(p.requires_grad for p in model.parameters()):
        raise UserError(f"{config.model.replace(chr(92), '/').rsplit('/', 1)[-1]} has no trainable parameters, so "
                        "there is nothing to train; give it layers with weights, or measure inference (--mode "
                        "inference).")
    if config.lr is None:  # (a script's config only: its own optimizer)
        raise ValueError("a run of a model needs its learning rate")
    # the parameters that train (a frozen body's, LoRA's or a head-only run's others are never the optimizer's)
    trained = [p for p in model.parameters() if p.requires_grad]
    if config.optimizer == "sgd":
        return torch.optim.SGD(trained, lr=config.lr, momentum=0.9)
    if config.optimizer == "adam":
        return torch.optim.Adam(trained, lr=config.lr)
    return torch.optim.AdamW(trained, lr=config.lr)


def raise_first_failure(exc: BaseException, inside: list, x, config: RunConfig, made: bool, num_classes: int) -> None:
    """A first step's (or a tool's first forward's) error as one sentence naming the layer it happened in, the
    input it got and what to change (UserError); returns for an error said elsewhere as what it is (out of memory,
    an operation the device lacks, our own sentences)."""
    from ..basics.formatting import error_line

    if (isinstance(exc, (UserError, NotImplementedError, torch.OutOfMemoryError))
            or "out of memory" in str(exc).lower()):  # said as such by run/failures.py
        return
    where = f" in {inside[-1][0] or 'the model'} ({inside[-1][1]})" if inside else " in the backward pass or the loss"
    text = error_line(exc, 240, with_type=False)
    given = (f", input {'x'.join(map(str, tuple(x.shape)[1:]))}" if isinstance(x, torch.Tensor) else
             " (the inputs make_batch returned)" if made else "")
    raise UserError(f"{text}{where}{given}{first_step_hint(text, config, made, num_classes)}") from exc


def check_forward(model: torch.nn.Module, x, config: RunConfig, made: bool, num_classes: int) -> None:
    """One forward pass of a user's model in eval mode without gradients (nothing in it changes: no running
    statistics, no gradients), for the tools: a model that cannot take its input fails here with the sentence a
    run's first step gives (raise_first_failure), not with a raw error deep in a search."""
    from .feed import call_model

    training = model.training
    model.eval()
    try:
        with torch.no_grad(), _where_it_failed(model) as inside:
            call_model(model, x)
    except (RuntimeError, ValueError, TypeError, IndexError, AssertionError) as exc:
        raise_first_failure(exc, inside, x, config, made, num_classes)
        raise
    finally:
        model.train(training)


SHAPE_WORDS = ("shape", "size of tensor", "mat1", "dimension", "channels", "expected input", "sizes", "kernel size",
               "output size", "too small", "expected 4d", "expected 3d", "expected 2d")


def first_step_hint(text: str, config: RunConfig, made: bool, num_classes: int) -> str:
    """What to change after a first step failed with `text`, where the failure says what it is about: the input's
    shape, the vocabulary, the targets' classes, or the model file's make_batch; "" when it says nothing we know."""
    low = text.lower()
    if made:
        return ": check what make_batch returns against what the model takes."
    info = models.get_model_info(config.model)
    if "index out of range" in low and info.input_kind == "tokens":
        said = info.declared.vocab_size if info.declared is not None else None
        return (": token ids reach VOCAB_SIZE - 1 ("
                f"{said - 1 if said else models.DEFAULT_VOCAB - 1:,} here); set VOCAB_SIZE in the model file to its "
                "embedding's size.")
    if "out of bounds" in low and "target" in low:
        return f": a target reached the number of classes ({num_classes}); set NUM_CLASSES or --num-classes."
    if any(word in low for word in SHAPE_WORDS):
        return (": set INPUT_SHAPE in the model file or --input-shape (Setup ▸ Input for synthetic data) to what the "
                "model takes.")
    return "."


@contextmanager
def global_settings(config: RunConfig):
    """Thread count, TF32 and denormal flushing are process-wide: set them for the run, then put them back.

    Denormals are flushed to zero on the CPU because a model that fits its data drives gradients into
    denormal floats, which the CPU computes several times slower (measured: 150 -> 430 us per step of a
    tiny model after ~750 steps); GPUs flush them anyway, so not flushing would inflate GPU speedups.
    """
    threads = torch.get_num_threads()
    tf32 = (torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32)
    try:
        if config.threads:
            torch.set_num_threads(config.threads)
        torch.backends.cuda.matmul.allow_tf32 = config.tf32
        torch.backends.cudnn.allow_tf32 = config.tf32 or config.tf32_conv
        flushing = torch.set_flush_denormal(True)
        yield flushing
    finally:
        torch.set_flush_denormal(False)
        torch.set_num_threads(threads)
        torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32 = tf32


@contextmanager
def _where_it_failed(model: torch.nn.Module):
    """The modules entered and not yet left while the block runs (a list of (qualified name, type)): the last is
    where an exception was raised during a forward pass."""
    names = {id(m): name for name, m in model.named_modules()}
    inside: list = []

    def enter(module, args):
        if id(module) in names:
            inside.append((names[id(module)], type(module).__name__))

    def leave(module, args, output):
        if inside and id(module) in names and inside[-1][0] == names[id(module)]:
            inside.pop()
    hooks = [torch.nn.modules.module.register_module_forward_pre_hook(enter),
             torch.nn.modules.module.register_module_forward_hook(leave)]
    try:
        yield inside
    finally:
        for h in hooks:
            h.remove()


class Steps:
    """The step functions of one run over its model on its device; `step(x, y)` returns the step's loss, still on
    the device (fetched once per window, never per step)."""

    def __init__(self, config: RunConfig, model: torch.nn.Module, device: devices.Device, tdev: torch.device,
                 num_classes: int, feed=None):
        from .feed import Feed

        self.config, self.model, self.num_classes = config, model, num_classes
        self.feed = feed or Feed()
        # the loss of a batch: cross-entropy on the model's logits, or the model file's own inputs and loss
        self.loss_of = self._fed_loss if (self.feed.made or self.feed.own_loss) else self._logits_loss
        self.optimizer: torch.optim.Optimizer | None = make_optimizer(config, model) if config.mode == "train" else None
        self.forward = torch.compile(model) if config.compile else model
        self.scaler = None
        if config.precision == "fp16" and config.mode == "train" and precision.grad_scaler_supported(device):
            self.scaler = torch.amp.GradScaler(tdev.type)
        dtype = DTYPES.get(config.precision or "fp32")
        self.autocast: Callable = (lambda: torch.autocast(tdev.type, dtype=dtype)) if dtype else nullcontext
        self.micro = 0  # micro-batches since the run started (gradient accumulation)
        self.parameters = models.count_parameters(model)

    @property
    def trained(self) -> torch.optim.Optimizer:
        """The optimizer of a training run (an inference run has none)."""
        return present(self.optimizer, "an inference run has no optimizer")

    def _logits_loss(self, x, y) -> torch.Tensor:
        return F.cross_entropy(self.forward(x), y)

    def _fed_loss(self, x, y) -> torch.Tensor:
        return self.feed.loss_of(self.forward, x, y)

    def choose(self) -> Callable[[torch.Tensor, torch.Tensor], torch.Tensor]:
        """The step function this config runs."""
        cfg = self.config
        if cfg.mode == "inference":
            return self.infer
        if cfg.accumulate > 1:
            return self.train_accumulate
        return self.train if cfg.precision == "fp32" else self.train_amp

    def train(self, x, y) -> torch.Tensor:
        """fp32 training step: the hot path, kept as lean as the bare loop it is benchmarked against."""
        self.trained.zero_grad(set_to_none=True)
        loss = self.loss_of(x, y)
        loss.backward()
        self.trained.step()
        return loss.detach()

    def train_amp(self, x, y) -> torch.Tensor:
        """Mixed-precision training step (autocast; a GradScaler for fp16 where the device has one)."""
        self.trained.zero_grad(set_to_none=True)
        with self.autocast():
            loss = self.loss_of(x, y)
        if self.scaler is not None:
            self.scaler.scale(loss).backward()
            self.scaler.step(self.trained)
            self.scaler.update()
        else:
            loss.backward()
            self.trained.step()
        return loss.detach()

    def train_accumulate(self, x, y) -> torch.Tensor:
        """One micro-batch of gradient accumulation: gradients add up over `accumulate` micro-batches (each loss
        divided by it, so the step is that of their mean), then one optimizer step."""
        n = self.config.accumulate
        if self.micro % n == 0:
            self.trained.zero_grad(set_to_none=True)
        with self.autocast():
            loss = self.loss_of(x, y)
        scaled = loss / n
        (self.scaler.scale(scaled) if self.scaler is not None else scaled).backward()
        self.micro += 1
        if self.micro % n == 0:
            if self.scaler is not None:
                self.scaler.step(self.trained)
                self.scaler.update()
            else:
                self.trained.step()
        return loss.detach()

    def infer(self, x, y) -> torch.Tensor:
        with torch.inference_mode(), self.autocast():
            return self.loss_of(x, y)

    def first(self, step_fn, x, y) -> torch.Tensor:
        """The first step, checking once that the model returns logits (N, num_classes): a user's model that
        does not gets a sentence naming the shape, not a loss function's error."""
        forward = self.forward
        expected = (int(x.shape[0]) if isinstance(x, torch.Tensor) else self.config.batch_size, self.num_classes)

        def checked(*inputs, **named):
            out = forward(*inputs, **named)
            if self.feed.own_loss is not None:  # its own loss takes what the model returns
                return out
            got = tuple(out.shape) if isinstance(out, torch.Tensor) else type(out).__name__
            if got != expected:
                raise UserError(f"{self.config.model} returned {'an output of shape ' if isinstance(got, tuple) else ''}"
                                f"{got}; MPS Studio needs logits of shape (N, num_classes), here {expected}: "
                                "return one score per class for each sample.")
            return out
        self.forward = checked
        try:
            with _where_it_failed(self.model) as inside:
                return step_fn(x, y)
        except (RuntimeError, ValueError, TypeError, IndexError, AssertionError) as exc:
            raise_first_failure(exc, inside, x, self.config, self.feed.made, self.num_classes)
            raise
        finally:
            self.forward = forward
            self.parameters = models.count_parameters(self.model)  # lazy modules have their shapes now
