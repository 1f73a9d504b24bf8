"""Parity of a model folder in both frameworks before anything is timed: the folder's model in transformers and in
mlx-lm (models/mlx_lm_folder.py), holding the folder's weights, must compute the same thing, or the two are not
compared at all.

The rules are parity.py's (the built-in twins'): on one batch (at most PARITY_SAMPLES sequences), dropout off on
both sides, the truth PyTorch in float64 on the CPU, each side's difference from it relative; MLX passes where it is
as close to the truth as PyTorch's own fp32 is (within FP32_SLACK times) or within FLOOR, and TF32-class products
get the tolerance TF32's precision derives. Checked: the logits, the next-token loss (the mean over the labelled
tokens: a text's prompts and padding, labelled -100, left out, as the runs' loss does) and one optimizer step of full
fine-tuning, or of LoRA's adapters (every trained parameter's update, by its name in transformers or peft); in a
half-precision run, the logits with the weights in that type (HALF_TOLERANCE: its rounding alone). Where the logits
differ, the first decoder block whose output differs is named (each block's output recorded on both sides); where
only the step does, the parameter whose update differs most.
"""

from __future__ import annotations

import copy

import numpy as np

from ...data.tokens import IGNORE
from ...models import mlx_lm_folder
from .steps import make_optimizer, next_token_loss
from .parity import FLOOR, HALF_TOLERANCE, PARITY_SAMPLES, Parity, dropout_off_torch, judge, relative, tf32_tolerance


def _next_token_loss_torch(logits, labels):
    import torch

    return torch.nn.functional.cross_entropy(logits[:, :-1].reshape(-1, logits.shape[-1]),
                                             labels[:, 1:].reshape(-1), ignore_index=IGNORE)


def _reference(torch_model, dtype):
    model = copy.deepcopy(torch_model).cpu().to(dtype).train()
    dropout_off_torch(model)
    return model


def _torch_side(config, model, x, labels) -> tuple:
    """(logits, loss, each trained parameter's update after one optimizer step) of a PyTorch reference, as numpy."""
    from ..steps import make_optimizer

    before = {name: p.detach().clone() for name, p in model.named_parameters() if p.requires_grad}
    logits = model(input_ids=x).logits
    loss = _next_token_loss_torch(logits, labels)
    updates = {}
    if config.mode == "train":
        optimizer = make_optimizer(config, model)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
        updates = {name: (p.detach() - before[name]).double().numpy() for name, p in model.named_parameters()
                   if name in before}
    return logits.detach().double().numpy(), loss.item(), updates


def check(config, torch_model, loaded: mlx_lm_folder.Loaded, x_torch, labels_torch, reduced: bool = False) -> Parity:
    """Parity of the folder's mlx-lm model `loaded` with its transformers model `torch_model` on the batch (token
    ids, labels: PyTorch CPU tensors). `reduced`: MLX's fp32 products are TF32-class. Neither model is changed."""
    import mlx.core as mx
    import mlx.nn as nn
    import torch
    from mlx.utils import tree_map

    from ...models.mlx_twins import flat


    model, kind = loaded.model, loaded.model_type
    lora = hasattr(torch_model, "peft_config")  # peft's wrapper: its adapters' names (mlx_lm_folder.torch_name)
    n = min(PARITY_SAMPLES, x_torch.shape[0])
    x_torch, labels_torch = x_torch[:n], labels_torch[:n]
    truth = _torch_side(config, _reference(torch_model, torch.float64), x_torch, labels_torch)
    fp32 = _torch_side(config, _reference(torch_model, torch.float32), x_torch, labels_torch)
    saved = tree_map(lambda v: v, model.parameters())
    was_training = model.training
    result = Parity(samples=n)
    x_mlx, labels_mlx = mx.array(x_torch.numpy().astype("int32")), mx.array(labels_torch.numpy().astype("int32"))
    try:
        model.train()  # mlx-lm's models have no dropout: training mode changes nothing they compute
        model.set_dtype(mx.float32)

        def loss_fn(m, x, y):
            return next_token_loss(m(x), y)

        out = model(x_mlx)
        loss = loss_fn(model, x_mlx, labels_mlx)
        mx.eval(out, loss)
        tf32 = {k: tf32_tolerance(model, k) if reduced else None for k in FLOOR}
        result.checks["forward"] = judge(truth[0], fp32[0], np.array(out), FLOOR["forward"], tf32["forward"])
        result.checks["loss"] = judge([truth[1]], [fp32[1]], [loss.item()], FLOOR["loss"], tf32["loss"])
        forward = result.checks["forward"]
        if forward["difference"] > forward["tolerance"]:
            result.layer = first_block_difference(_reference(torch_model, torch.float32), model, x_torch, x_mlx,
                                                  forward["tolerance"])
            return result
        if config.mode == "train":
            optimizer = make_optimizer(config)
            _, grads = nn.value_and_grad(model, loss_fn)(model, x_mlx, labels_mlx)
            optimizer.update(model, grads)
            mx.eval(model.parameters())
            start = {mlx_lm_folder.torch_name(k, kind, lora): v for k, v in flat(saved)}
            moved = {}
            for k, v in flat(model.trainable_parameters()):
                name = mlx_lm_folder.torch_name(k, kind, lora)
                if name in start:
                    update = np.array(v - start[name], dtype=np.float32)
                    moved[name] = update.T if mlx_lm_folder.transposed(name, kind) else update
            names = [name for name in truth[2] if name in moved]
            missing = [name for name in truth[2] if name not in moved]
            if missing:  # a parameter PyTorch trains that the MLX model lacks: not the same model
                result.checks["step"] = {"difference": float("inf"), "torch": None, "tolerance": FLOOR["step"]}
                result.layer = f"the MLX model has no parameter {missing[0]} (PyTorch trains {len(truth[2]):,})"
                return result
            result.checks["step"] = judge(np.concatenate([truth[2][k].ravel() for k in names]),
                                          np.concatenate([fp32[2][k].ravel() for k in names]),
                                          np.concatenate([moved[k].ravel() for k in names]), FLOOR["step"],
                                          tf32["step"])
            step = result.checks["step"]
            if step["difference"] > step["tolerance"]:
                diff, name = max((relative(truth[2][k], moved[k]), k) for k in names)
                result.layer = (f"the forward agrees, and the parameter whose update differs most is {name} (by "
                                f"{diff:.2g}): its gradient or the optimizer's step is not the same")
                return result
        half = config.precision if config.precision in HALF_TOLERANCE else None
        if half:  # the run's half type: the folder's weights rounded to it, the logits against the float64 truth
            model.update(saved)
            model.set_dtype(mx.bfloat16 if half == "bf16" else mx.float16)
            low = model(x_mlx).astype(mx.float32)
            result.checks[f"{half} forward"] = {"difference": relative(truth[0], np.array(low)), "torch": None,
                                                "tolerance": HALF_TOLERANCE[half]}
    finally:
        model.update(saved)
        model.train(was_training)
    return result


def torch_blocks(model) -> list:
    """The decoder blocks of a transformers model (or peft's wrapper of one), in order."""
    import torch

    found: list = []
    for name, module in model.named_modules():
        if isinstance(module, torch.nn.ModuleList) and name.endswith((".layers", ".h")) and len(module) > len(found):
            found = list(module)
    return found


def first_block_difference(reference, model, x_torch, x_mlx, tolerance: float) -> str:
    """The first decoder block whose output differs beyond `tolerance`, in words (its input agreeing or not)."""
    import mlx.core as mx
    import torch

    theirs: list = []
    hooks = [block.register_forward_hook(lambda mod, args, out: theirs.append(
        (args[0].detach() if args else None, out[0] if isinstance(out, tuple) else out)))
        for block in torch_blocks(reference)]
    ours: list = []
    swapped = []
    for block in mlx_lm_folder.blocks(model):
        cls = type(block)

        def call(self, *args, _cls=cls, **kwargs):
            out = _cls.__call__(self, *args, **kwargs)
            ours.append((args[0] if args else None, out))
            return out

        block.__class__ = type(cls.__name__, (cls,), {"__call__": call})
        swapped.append((block, cls))
    try:
        with torch.no_grad():
            reference(input_ids=x_torch)
        mx.eval(model(x_mlx))
    finally:
        for h in hooks:
            h.remove()
        for block, cls in swapped:
            block.__class__ = cls
    if not theirs or len(theirs) != len(ours):
        return (f"the two models' decoder blocks could not be paired ({len(theirs)} in PyTorch, {len(ours)} in "
                "MLX)")
    for i, ((given, out), (mine_in, mine_out)) in enumerate(zip(theirs, ours)):
        diff = relative(out.detach().float().numpy(), np.array(mine_out.astype(mx.float32)))
        if diff > tolerance:
            before = relative(given.float().numpy(), np.array(mine_in.astype(mx.float32))) \
                if given is not None and mine_in is not None else 0.0
            where = ("its input already differs, so the embeddings before it are not the same" if before > tolerance
                     else "its input agrees, so its weights or what it computes are not the same")
            return f"the first decoder block whose output differs is block {i} (by {diff:.2g}); {where}"
    return "every decoder block agrees, so the final norm or the language-model head differs"
