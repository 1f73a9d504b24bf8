"""Steps counted from a script's own PyTorch calls, for a script that does not report them (mpsstudio.track.step):
torch.optim's global step post-hook marks each step, `backward()` gives its loss, and the model's own forward calls
give its batch. What it costs the script per step is one local forward pre-hook on the model and a wrapper around
`backward()`: PyTorch's global module hooks, which put every module call of the model on the slow path, are on only
until the first optimizer step has shown which module is the model (docs/benchmarks.md, "Your script as it is").

The batch is "the first dimension of the model's first input", unless a recurrent layer or attention of the model
takes sequence-first input (nn.LSTM, nn.GRU, nn.RNN, nn.MultiheadAttention without batch_first, as inside
nn.Transformer's layers) and the model's input shows that layout: then its second dimension. A step's samples are
those of every backward() since the last optimizer step (gradient accumulation: 4 micro-batches of 8 are 32), and a
model whose input is integer ids (a token model) also counts its tokens."""

from __future__ import annotations

import time
from collections.abc import Callable
from contextlib import contextmanager

import torch

from .tracker import Tracker, loss_problem

FIRST_DIM = "the first dimension of the model's first input"
NO_STEP_S = 10.0  # after the script's first forward pass: how long before a run with no counted step says so
SEQUENCE_FIRST = (torch.nn.RNNBase, torch.nn.MultiheadAttention)


def _autocast_state(kind: str) -> tuple[bool, torch.dtype | None]:
    """(autocast on?, its dtype) for a device type, as the code running now sees it."""
    try:
        return torch.is_autocast_enabled(kind), torch.get_autocast_dtype(kind)
    except (RuntimeError, TypeError, AttributeError):  # a device type autocast does not know
        return False, None


def _first_tensor(args, kwargs=None) -> torch.Tensor | None:
    """The call's first tensor: among its positional arguments, else its keyword arguments in their order."""
    for value in args:
        if isinstance(value, torch.Tensor):
            return value
    for value in (kwargs or {}).values():
        if isinstance(value, torch.Tensor):
            return value
    return None


class ModelInput:
    """How the model's input gives the batch: which dimension, said how, and whether it holds token ids."""

    def __init__(self, dim: int = 0, said: str = FIRST_DIM):
        self.dim, self.said = dim, said

    def read(self, x: torch.Tensor | None) -> tuple[int | None, int]:
        """(samples, tokens) of one call's first input: tokens only for integer ids of 2 or more dimensions."""
        if x is None or x.dim() <= self.dim:
            return None, 0
        samples = int(x.shape[self.dim])
        tokens = int(x.numel()) if x.dim() >= 2 and not x.dtype.is_floating_point and not x.dtype.is_complex \
            and x.dtype != torch.bool else 0
        return samples, tokens


def layout(seen: list[tuple[str, bool, tuple]], model_input: torch.Tensor | None) -> ModelInput:
    """The model's input layout from what its recurrent and attention layers received in the first step: `seen`
    holds (layer class, batch_first, its input's shape) of each such call."""
    shape = tuple(model_input.shape) if model_input is not None else ()
    for name, batch_first, got in seen:
        if batch_first or len(got) != 3 or len(shape) < 2:
            continue
        batch = got[1]  # sequence-first: (length, batch, features)
        if shape[1] == batch and shape[0] != batch:
            return ModelInput(1, f"the second dimension of the model's first input (its {name} takes "
                                 "sequence-first input)")
    return ModelInput()


class HookCounter:
    """Steps counted from the script's optimizers (torch.optim's global step post-hook), for a script that does not
    report them. A training step is one round of the script's optimizers: a GAN's discriminator and generator steps
    are one step, which ends when an optimizer of the round steps again. A step is handed to the tracker then (or at
    the end): if the script reports steps itself (`mpsstudio.track.step`) meanwhile, it is the script's count that is
    kept and the hooks go quiet. Its loss is the tensor backward() was last called on (Tensor.backward or
    torch.autograd.backward; a loss of several values counts by its mean).

    `batch_size`: the samples of every step, given by the user (--batch-size), instead of the model's input.
    `notice(text)`: a sentence for the run in progress (the early word when no step is counted)."""

    def __init__(self, tracker: Tracker, batch_size: int | None = None,
                 notice: Callable[[str], None] | None = None):
        self.tracker = tracker
        self.explicit = False
        self.pending: tuple | None = None
        self.loss: torch.Tensor | None = None
        self.given = batch_size
        self.batch: int | None = batch_size  # the model's last input's samples (mpsstudio.track reads it too)
        self.tokens = 0
        self.step_samples = 0  # samples of the backward() calls since the last optimizer step
        self.step_tokens = 0
        self.backwards = 0  # backward() calls since the last optimizer step
        self.input = ModelInput()
        self.model: torch.nn.Module | None = None
        self.depth = 0
        self.round: set[int] = set()  # the optimizers that stepped in the step going on
        self.sizes: dict[int, int] = {}  # parameters of each optimizer seen
        self.optimizers: list = []  # the optimizers of the first round (their class and learning rate are said)
        self.unseen_loss = False  # an optimizer stepped with no backward() seen
        self.notice = notice or (lambda text: None)
        self.first_forward: float | None = None
        self.said_no_step = False
        # the first step's calls of modules with parameters, until the model is known: (module, first input), and
        # what the recurrent and attention layers received (layout)
        self.calls: list[tuple[torch.nn.Module, torch.Tensor | None]] = []
        self.sequence_layers: list[tuple[str, bool, tuple]] = []
        self.autocast: tuple[bool, torch.dtype | None] | None = None  # read at the model's call (settings.py)
        self.model_input: torch.Tensor | None = None
        self.want_settings = False
        self.in_backward = False
        self.in_step = False  # inside an optimizer's step (between its pre- and post-hook)
        self._global: list = []
        self._local: torch.utils.hooks.RemovableHandle | None = None
        self._inner: torch.utils.hooks.RemovableHandle | None = None

    # ------------------------------------------------------------------ the optimizer's step and backward()

    def before_optimizer_step(self, optimizer, args, kwargs) -> None:
        """An optimizer's step begins: the backward() calls inside it (LBFGS's closure evaluates the same batch
        again and again) are one batch, not one each."""
        self.in_step = True

    def on_optimizer_step(self, optimizer, args, kwargs) -> None:
        self.in_step = False
        key = id(optimizer)
        if key not in self.sizes:
            self.sizes[key] = sum(p.numel() for g in optimizer.param_groups for p in g["params"])
            self.tracker.parameters = sum(self.sizes.values())
            if len(self.optimizers) < 8:
                self.optimizers.append(optimizer)
        self.depth = 0
        if self.model is None and self._global:
            self._settle(optimizer)
        if self.explicit:
            return
        if key in self.round:  # this optimizer again: the last step is over, a new one begins
            self.round = set()
            if self.pending is not None:
                pending, self.pending = self.pending, None
                self.tracker.step(*self._known(pending))
        self.round.add(key)
        samples = self.given or self.step_samples or self.batch
        if self.loss is not None:
            # None: not seen yet. A model called with keyword arguments only (`model(**batch)`, transformers'
            # Trainer) shows no input to PyTorch's global hooks, so the step in which the model is found learns its
            # batch from the model's next call, by the time this step is handed on (_known)
            self.pending = (self.loss, samples, 0 if self.given else self.step_tokens)
        elif self.pending is None:
            self.unseen_loss = True
        self.loss = None
        self.step_samples = self.step_tokens = self.backwards = 0

    def on_reported(self) -> None:
        """The script reports its steps: the hooks' pending step is the same step, dropped."""
        self.explicit, self.pending = True, None
        self.tracker.how = "mt.step"
        self.tracker.batch_from = "mt.step's batch_size"

    def flush(self) -> None:
        if self.pending is not None and not self.explicit:
            pending, self.pending = self.pending, None
            self.tracker.step(*self._known(pending))

    def _known(self, pending: tuple) -> tuple:
        """A step's (loss, samples, tokens) with its samples known: a step whose batch the model's calls never showed
        takes the model's next call's (the model found at its end, taking keyword arguments only), else, where no
        module call was ever seen (a model of plain tensors), one sample, said."""
        loss, samples, tokens = pending
        if samples is None and self.batch is not None:
            samples, tokens = self.batch, 0 if self.given else self.tokens
        if samples is None:
            samples, self.tracker.batch_from = 1, ("nothing: the script called no nn.Module, so each step counts "
                                                   "as one sample (give --batch-size N)")
        return loss, samples, tokens

    def _saw_backward(self, tensor) -> None:
        if isinstance(tensor, (tuple, list)):
            tensor = next((t for t in tensor if isinstance(t, torch.Tensor)), None)
        if isinstance(tensor, torch.Tensor):
            kept = tensor.detach()
            whole = kept.numel() == 1 or bool(loss_problem(kept))  # a complex or sparse loss: said at the step
            self.loss = kept if whole else kept.float().mean()
            if self.in_step:  # a closure's evaluation inside the step: its batch once
                if not self.step_samples and self.batch is not None:
                    self.step_samples, self.step_tokens, self.backwards = self.batch, self.tokens, 1
            else:
                self.backwards += 1
                if self.batch is not None:
                    self.step_samples += self.batch
                    self.step_tokens += self.tokens
        if self.first_forward is None:  # a script of plain tensors (no nn.Module): its first backward starts the clock
            self.first_forward = time.monotonic()
        self._no_step_yet()

    def _no_step_yet(self) -> None:
        """The early word: the script has run its model (or, with no nn.Module, its first backward) for NO_STEP_S and
        no step was counted; it says how the run ends and how to end it now."""
        if self.said_no_step or self.tracker.count or self.first_forward is None:
            return
        if time.monotonic() - self.first_forward >= NO_STEP_S:
            self.said_no_step = True
            self.notice(f"No training step counted {NO_STEP_S:g} s after the script's first forward pass: it steps "
                        "no torch.optim optimizer that MPS Studio sees. Add mpsstudio.track.step(loss, batch_size=n) "
                        "after each update (import mpsstudio.track as mt), or the run will end with nothing "
                        "measured. It runs on until the script ends or --timeout; Stop (Ctrl-C here) ends it now.")

    # ------------------------------------------------------------------ the model's calls

    def _pre_forward(self, module, args) -> None:
        """Every module call until the model is known (PyTorch's global forward pre-hook)."""
        if self.depth == 0:
            if next(module.parameters(), None) is not None:  # a model, not a loss module
                first = _first_tensor(args)
                if len(self.calls) < 1_000:  # a script that calls modules and never steps: the first ones
                    self.calls.append((module, first))
                self._read_input(first)
            if self.first_forward is None:
                self.first_forward = time.monotonic()
            self._no_step_yet()
        elif isinstance(module, SEQUENCE_FIRST) and len(self.sequence_layers) < 64:
            first = _first_tensor(args)
            if first is not None:
                self.sequence_layers.append((type(module).__name__, bool(getattr(module, "batch_first", False)),
                                             tuple(first.shape)))
        self.depth += 1

    def _post_forward(self, module, args, output) -> None:
        self.depth = max(0, self.depth - 1)

    def _model_call(self, module, args, kwargs) -> None:
        """Each call of the model once it is known (a forward pre-hook on it alone)."""
        first = _first_tensor(args, kwargs)
        self._read_input(first)
        if self.want_settings:
            self.want_settings = False
            self.model_input = first
            self.autocast = _autocast_state(first.device.type if first is not None else "cpu")
            if not self.autocast[0] and self._inner is None:  # a wrapper may enter autocast inside the model's own
                # forward (accelerate's prepare_model, as transformers' Trainer uses it): read it at the first inner call
                self._inner = torch.nn.modules.module.register_module_forward_pre_hook(self._inner_call)
        self._no_step_yet()

    def _inner_call(self, module, args) -> None:
        """The first module call inside the model at the first measured step (a one-shot global hook): autocast as
        the model's layers see it."""
        first = _first_tensor(args)
        if first is None:
            return
        self._remove_inner()
        state = _autocast_state(first.device.type)
        if state[0]:
            self.autocast = state

    def _remove_inner(self) -> None:
        if self._inner is not None:
            self._inner.remove()
            self._inner = None

    def _read_input(self, first: torch.Tensor | None) -> None:
        samples, tokens = self.input.read(first)
        if samples is not None and self.given is None:
            self.batch, self.tokens = samples, tokens

    def _settle(self, optimizer) -> None:
        """The first optimizer step: the model is the first outermost module called since the start that holds
        parameters this optimizer trains (else any parameters); its layout read, the global hooks removed and one
        local hook put on it."""
        trained = {id(p) for g in optimizer.param_groups for p in g["params"]}
        chosen = next(((m, x) for m, x in self.calls if any(id(p) in trained for p in m.parameters())),
                      self.calls[0] if self.calls else None)
        self._remove_global()
        if chosen is None:
            self.calls = []
            return
        self.model, first = chosen
        self.input = layout(self.sequence_layers, first)
        self.calls, self.sequence_layers = [], []
        if self.given is not None:
            self.tracker.batch_from = "--batch-size"
        else:
            self.tracker.batch_from = self.input.said
            samples, tokens = self.input.read(first)
            if samples is not None:
                self.batch, self.tokens = samples, tokens
                if self.input.dim != 0:  # this step's backward() calls were counted by the first dimension
                    self.step_samples, self.step_tokens = samples * self.backwards, tokens * self.backwards
        self._local = self.model.register_forward_pre_hook(self._model_call, with_kwargs=True)

    def _remove_global(self) -> None:
        for handle in self._global:
            handle.remove()
        self._global = []

    @contextmanager
    def installed(self):
        from torch.optim.optimizer import register_optimizer_step_post_hook, register_optimizer_step_pre_hook

        counter = self
        original, autograd_backward = torch.Tensor.backward, torch.autograd.backward

        def backward(tensor, *args, **kwargs):  # the loss of the step: the tensor backward() is called on
            counter._saw_backward(tensor)
            counter.in_backward = True  # Tensor.backward calls torch.autograd.backward: one backward, not two
            try:
                return original(tensor, *args, **kwargs)
            finally:
                counter.in_backward = False

        def autograd(tensors, *args, **kwargs):  # torch.autograd.backward(tensors, grad_tensors=...)
            if not counter.in_backward:
                counter._saw_backward(tensors)
            return autograd_backward(tensors, *args, **kwargs)
        step_hooks = [register_optimizer_step_pre_hook(self.before_optimizer_step),
                      register_optimizer_step_post_hook(self.on_optimizer_step)]
        self._global = [torch.nn.modules.module.register_module_forward_pre_hook(self._pre_forward),
                        torch.nn.modules.module.register_module_forward_hook(self._post_forward)]
        torch.Tensor.backward, torch.autograd.backward = backward, autograd
        try:
            yield self
        finally:
            torch.Tensor.backward, torch.autograd.backward = original, autograd_backward
            for hook in step_hooks:
                hook.remove()
            self._remove_global()
            self._remove_inner()
            if self._local is not None:
                self._local.remove()
                self._local = None
