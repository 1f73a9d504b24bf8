"""How a model is fed and how its loss is taken, for runs and tools alike: one tensor of images or tokens with
cross-entropy on its logits (the built-in models, a user's model on a dataset), or, for a user's model file that
defines `make_batch(batch_size, generator)`, the inputs and targets it makes (a tensor, a tuple or a dict of
tensors: several inputs, token batches with masks) and its own `loss(outputs, targets)` where it defines one."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch
import torch.nn.functional as F

from ..basics.config import RunConfig
from ..basics.spec import is_text_dataset
from ..models import registry as models


def call_model(forward, x):
    """forward(x), forward(*x) for a tuple or list of inputs, forward(**x) for a dict of them."""
    if isinstance(x, dict):
        return forward(**x)
    if isinstance(x, (tuple, list)):
        return forward(*x)
    return forward(x)


@dataclass
class Feed:
    """`make_batch`: the model file's (None: batches come from the dataset); `loss(outputs, targets)`: the file's,
    else cross-entropy on logits."""

    make_batch: Callable | None = None
    own_loss: Callable | None = None
    where: str = ""

    @property
    def made(self) -> bool:
        return self.make_batch is not None

    def loss(self, outputs, targets) -> torch.Tensor:
        if self.own_loss is None:
            return F.cross_entropy(outputs, targets)
        from ..basics.errors import UserError

        try:
            out = self.own_loss(outputs, targets)
        except (Exception, SystemExit) as exc:  # its own error, named as its (out of memory stays the device's)
            if isinstance(exc, (UserError, torch.OutOfMemoryError)) or "out of memory" in str(exc).lower():
                raise
            from ..basics.formatting import error_line

            raise UserError(f"loss in {self.where} raised {error_line(exc, 200)}; fix it and try again.") from exc
        if not isinstance(out, torch.Tensor) or out.numel() != 1:
            raise UserError(f"loss in {self.where} returned {type(out).__name__}"
                            f"{' of shape ' + str(tuple(out.shape)) if isinstance(out, torch.Tensor) else ''}; return "
                            "one number as a tensor (the mean loss of the batch).")
        return out.reshape(())

    def loss_of(self, forward, x, y) -> torch.Tensor:
        return self.loss(call_model(forward, x), y)

    def batch(self, batch_size: int, device: torch.device, seed: int = 0):
        """One made batch (inputs, targets) on `device` (make_batch's models only)."""
        from ..data.batches import made_batch, to_device

        if self.make_batch is None:
            raise ValueError("batch() is for a model file with make_batch")
        return to_device(made_batch(self.make_batch, batch_size, torch.Generator().manual_seed(seed), self.where),
                         device)


def feed_for(config: RunConfig) -> Feed:
    """The config's feed: a user's file's make_batch (on synthetic data) and loss, loaded in the run's process; a
    model folder's batches for its task at the run's sequence length and the loss transformers computes."""
    if models.get_model_info(config.model).folder:  # synthetic data, or text (setup.load_data refuses any other)
        from ..models import hf_model

        shape = config.input_shape
        folder, spec = hf_model.spec_for(config.model, shape[0] if shape and len(shape) == 1 else None)
        if is_text_dataset(config.dataset):  # its batches are the text's rows, with their labels
            return Feed(None, hf_model.model_loss, folder.path.name)
        return Feed(hf_model.batch_maker(folder, spec), hf_model.model_loss, folder.path.name)
    make, loss = models.own_functions(config.model)
    where = config.model.replace("\\", "/").rsplit("/", 1)[-1]
    if str(config.dataset).lower() != "synthetic":
        make = None  # a dataset's samples are what the model gets
    return Feed(make, loss, where)
