"""Parity before anything is timed: the MLX twin and the PyTorch model, holding the same weights, must compute the
same thing, or the two frameworks are not compared at all.

On one batch (the run's first, at most PARITY_SAMPLES samples), with dropout off on both sides and batch norm in
training mode: the forward's logits, the loss, and one optimizer step (each parameter's update). The truth is PyTorch
in float64 on the CPU; each side's difference from it is relative (the norm of the difference over the norm of the
truth). MLX passes where it is as close to the truth as PyTorch's own fp32 is, within FP32_SLACK times (fp32 rounds
differently in each framework's kernels), or within FLOOR (about 1e-5 for the forward, the issue's figure): a
backward through batch norm loses digits in fp32 on both sides (resnet18 at batch 64: PyTorch's fp32 update 0.4 %
from float64's, MLX's 0.9 %), where a twin that is not the same model differs by tens of percent. A half-precision
run also checks the twin's logits in that precision against the truth, within that precision's tolerance. Where
they do not agree, the first layer whose output differs is named (every leaf layer's output recorded on both sides,
compared in PyTorch's order).
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field

import numpy as np

from ...basics.errors import UserError

PARITY_SAMPLES = 16
# Relative differences from float64 that always pass (the "about 1e-5" for fp32; the step's update went
# through backward too), how many times PyTorch's own fp32 difference MLX may be, and a half-precision forward's
# tolerance (its rounding alone)
FLOOR = {"forward": 1e-5, "loss": 1e-5, "step": 1e-4}
FP32_SLACK = 5.0
HALF_TOLERANCE = {"bf16": 5e-2, "fp16": 1e-2}
# The half-precision step (fp32 master weights, forward and backward in the half type), judged by its direction
# (1 - cosine with float64's update: _misdirection): HALF_STEP_FACTOR times the forward's tolerance (its update went
# through the forward, the backward's two products a layer and the optimizer)
HALF_STEP_FACTOR = 3.0
# TF32-class fp32 products (MLX's default on GPUs with NAX units, mlx#3860), derived from TF32's precision, never
# loosened to pass: each product rounds both operands to a 10-bit mantissa, a relative error of up to 2 x 2^-11 a
# product, adding along the path through the model's products (the step's goes through each three times: forward and
# backward); and what PyTorch's own fp32 lost to the problem's conditioning (its difference from float64, about
# condition x fp32's unit roundoff) at TF32's unit roundoff instead. The larger of the two.
TF32_UNIT = 2.0 ** -11
FP32_UNIT = 2.0 ** -24


def relative(a, b) -> float:
    """||a - b|| / ||a|| (a: PyTorch's), 0 for two zeros; inf where the shapes differ."""
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    if a.shape != b.shape:
        return float("inf")
    scale = float(np.linalg.norm(a))
    diff = float(np.linalg.norm(a - b))
    if not np.isfinite(diff):
        return float("inf")
    return diff / scale if scale > 0 else (0.0 if diff == 0 else float("inf"))


@dataclass
class Parity:
    """What parity found: each check's relative difference and tolerance, and whether all passed."""

    checks: dict = field(default_factory=dict)  # name -> {"difference": float, "tolerance": float}
    layer: str = ""  # where they do not agree: the first layer whose output differs, said in words
    samples: int = 0

    @property
    def passed(self) -> bool:
        return all(c["difference"] <= c["tolerance"] for c in self.checks.values())

    def words(self) -> str:
        """"parity passed on 16 samples (relative difference from PyTorch in float64, PyTorch's own fp32 beside it:
        forward 6.3e-07 (4.1e-07), ...)" or what failed and where."""
        shown = ", ".join(f"{name} {c['difference']:.1e}" + (f" ({c['torch']:.1e})" if c.get("torch") is not None else "")
                          for name, c in self.checks.items())
        if self.passed:
            return (f"parity passed on {self.samples} samples (relative difference from PyTorch in float64, PyTorch's "
                    f"own fp32 in brackets: {shown}; each within its tolerance)")
        failed = next(n for n, c in self.checks.items() if c["difference"] > c["tolerance"])
        c = self.checks[failed]
        return (f"parity failed: the {failed} differs from PyTorch's by {c['difference']:.2g} (relative; tolerance "
                f"{c['tolerance']:.1g})" + (f"; {self.layer}" if self.layer else ""))

    def record(self) -> dict:
        return {"passed": self.passed, "checks": self.checks, "layer": self.layer, "samples": self.samples,
                "words": self.words()}


def dropout_off_torch(model) -> None:
    import torch

    for module in model.modules():
        if isinstance(module, torch.nn.modules.dropout._DropoutNd):
            module.p = 0.0
        elif isinstance(module, torch.nn.MultiheadAttention):
            module.dropout = 0.0


def _dropout_off_mlx(model) -> list:
    """Dropout off in the twin (MLX's Dropout returns its input when its keep probability is 1); what to restore."""
    kept = []
    for _, module in model.named_modules():
        if hasattr(module, "_p_1"):
            kept.append((module, module._p_1))
            module._p_1 = 1.0
    return kept


def judge(truth, torch32, ours, floor: float, reduced: float | None = None) -> dict:
    """A check's record: MLX's and PyTorch fp32's relative differences from the float64 truth, and MLX's tolerance
    (`reduced`: the products' TF32-class rounding, where the run's products are TF32-class; the conditioning PyTorch's
    fp32 showed is then scaled to TF32's unit roundoff beside it)."""
    mine, theirs = relative(truth, ours), relative(truth, torch32)
    tolerance = max(floor, FP32_SLACK * theirs)
    if reduced is not None:
        tolerance = max(tolerance, reduced, theirs * TF32_UNIT / FP32_UNIT)
    return {"difference": mine, "torch": theirs, "tolerance": tolerance}


def products(twin) -> int:
    """The matrix-product layers of an MLX model (each weight of two or more dimensions outside an embedding: a
    Linear's, a convolution's, an attention's packed projection), what a TF32-class tolerance counts."""
    import mlx.nn as nn

    count = 0
    for _, module in twin.named_modules():
        if isinstance(module, nn.Embedding):
            continue
        count += sum(1 for name, value in module.items() if hasattr(value, "ndim") and value.ndim >= 2)
    return max(1, count)


def tf32_tolerance(twin, check: str) -> float:
    """The relative difference TF32-class products alone may make in `check` ("forward", "loss", "step")."""
    return 2 * TF32_UNIT * products(twin) * (3 if check == "step" else 1)


def _reference(torch_model, dtype):
    model = copy.deepcopy(torch_model).cpu().to(dtype).train()
    dropout_off_torch(model)
    return model


def _torch_side(config, model, x, y) -> tuple:
    """(logits, loss, each parameter's update after one optimizer step) of a PyTorch reference, as numpy."""
    import torch

    from ..steps import make_optimizer

    before = {name: p.detach().clone() for name, p in model.named_parameters()}
    logits = model(x)
    loss = torch.nn.functional.cross_entropy(logits, y)
    updates = {}
    if config.mode == "train":
        optimizer = make_optimizer(config, model)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
        updates = {name: (p.detach() - before[name]) for name, p in model.named_parameters()}
    return logits.detach().double().numpy(), loss.item(), updates


def check(config, torch_model, twin, x_torch, y_torch, to_mlx, make_steps, reduced: bool = False) -> Parity:
    """Parity of `twin` (weights transferred from `torch_model`) on the batch (x_torch, y_torch) (PyTorch CPU
    tensors); `to_mlx(x)` converts an input as the run does; `make_steps(config, dtype)` the run's MlxSteps on the
    twin. `reduced`: the run's fp32 products are TF32-class (machine/mlx.Arithmetic.reduced), whose tolerance is
    derived from TF32's precision. Neither model is changed (copies are stepped)."""
    import mlx.core as mx
    import mlx.nn as nn
    import torch
    from mlx.utils import tree_map

    from ...models.mlx_twins import flat, sequential_prefixes, to_mlx_layout, torch_name, weight_layouts

    layouts = weight_layouts(torch_model)
    n = min(PARITY_SAMPLES, x_torch.shape[0])
    x_torch, y_torch = x_torch[:n].float() if x_torch.is_floating_point() else x_torch[:n], y_torch[:n]
    wide = x_torch.double() if x_torch.is_floating_point() else x_torch
    truth = _torch_side(config, _reference(torch_model, torch.float64), wide, y_torch)
    reference = _reference(torch_model, torch.float32)
    fp32 = _torch_side(config, reference, x_torch, y_torch)
    saved = tree_map(lambda v: v, twin.parameters())  # the twin's values (arrays are immutable: a tree of refs)
    was_training = twin.training
    kept = _dropout_off_mlx(twin)
    result = Parity(samples=n)
    try:
        twin.train()
        twin.set_dtype(mx.float32)
        x_mlx, y_mlx = to_mlx(x_torch, mx.float32), mx.array(y_torch.numpy())

        def loss_fn(model, x, y):
            return nn.losses.cross_entropy(model(x).astype(mx.float32), y, reduction="mean")

        out = twin(x_mlx)
        mlx_loss = loss_fn(twin, x_mlx, y_mlx)
        mx.eval(out, mlx_loss)
        twin.update(saved)
        tf32 = {k: tf32_tolerance(twin, k) if reduced else None for k in FLOOR}
        result.checks["forward"] = judge(truth[0], fp32[0], np.array(out), FLOOR["forward"], tf32["forward"])
        result.checks["loss"] = judge([truth[1]], [fp32[1]], [mlx_loss.item()], FLOOR["loss"], tf32["loss"])
        if result.checks["forward"]["difference"] > result.checks["forward"]["tolerance"]:
            result.layer = first_difference(_reference(torch_model, torch.float32), twin, x_torch, x_mlx,
                                            result.checks["forward"]["tolerance"])
            return result
        if config.mode == "train":
            mlx_optimizer = make_steps(config, mx.float32).optimizer
            _, grads = nn.value_and_grad(twin, loss_fn)(twin, x_mlx, y_mlx)
            mlx_optimizer.update(twin, grads)
            mx.eval(twin.parameters())
            prefixes = sequential_prefixes(twin)
            after = {torch_name(k, prefixes): v for k, v in flat(twin.trainable_parameters())}
            start = {torch_name(k, prefixes): v for k, v in flat(saved)}
            names = [name for name in truth[2] if name in after]
            result.checks["step"] = judge(
                np.concatenate([to_mlx_layout(k, truth[2][k], layouts).ravel() for k in names]),
                np.concatenate([to_mlx_layout(k, fp32[2][k], layouts).ravel() for k in names]),
                np.concatenate([np.array(after[k] - start[k], dtype=np.float32).ravel() for k in names]), FLOOR["step"],
                tf32["step"])
            step = result.checks["step"]
            if step["difference"] > step["tolerance"]:  # the forward agrees: name what its step moved otherwise
                moved = {k: np.array(after[k] - start[k], dtype=np.float32) for k in names}
                result.layer = first_update_difference(truth[2], moved, layouts, step["tolerance"])
                return result
        half = config.precision if config.precision in HALF_TOLERANCE else None
        if half:
            _half_checks(result, config, half, twin, saved, truth, x_torch, y_mlx, to_mlx, make_steps, layouts)
    finally:
        twin.update(saved)
        for module, p in kept:
            module._p_1 = p
        twin.train(was_training)
    return result


def _half_checks(result: Parity, config, half: str, twin, saved, truth, x_torch, y_mlx, to_mlx, make_steps,
                 layouts: dict) -> None:
    """The run's half-precision arithmetic against the float64 truth: the forward's logits and, in training, one step
    as the run takes it (fp32 master weights, forward and backward in the half type, the optimizer in fp32)."""
    import mlx.core as mx

    from ...models.mlx_twins import flat, sequential_prefixes, to_mlx_layout, torch_name

    twin.update(saved)
    low_dtype = mx.bfloat16 if half == "bf16" else mx.float16
    steps = make_steps(config, low_dtype)
    steps.sync_model()
    x_low = to_mlx(x_torch, low_dtype)
    low = twin(x_low)
    result.checks[f"{half} forward"] = {"difference": relative(truth[0], np.array(low.astype(mx.float32))),
                                        "torch": None, "tolerance": HALF_TOLERANCE[half]}
    if config.mode != "train" or not truth[2]:
        return
    prefixes = sequential_prefixes(twin)
    start = {torch_name(k, prefixes): v for k, v in flat(steps.weights())}
    steps.step(x_low, y_mlx)
    after = {torch_name(k, prefixes): v for k, v in flat(steps.weights())}
    names = [name for name in truth[2] if name in after]
    moved = np.concatenate([np.array((after[k] - start[k]).astype(mx.float32)).ravel() for k in names])
    wanted = np.concatenate([to_mlx_layout(k, truth[2][k], layouts).ravel() for k in names]).astype(np.float64)
    result.checks[f"{half} step direction"] = {"difference": _misdirection(wanted, moved), "torch": None,
                                               "tolerance": HALF_STEP_FACTOR * HALF_TOLERANCE[half]}


def _misdirection(a, b) -> float:
    """1 - the cosine between two updates (0: the same direction; inf where either is not finite or zero). A half
    step is judged by its direction: Adam's first update is about lr x sign(gradient), so a gradient the half type
    rounds across zero flips an element whole, where the step still goes the same way."""
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    if a.shape != b.shape or not (np.isfinite(a).all() and np.isfinite(b).all()):
        return float("inf")
    norms = float(np.linalg.norm(a)) * float(np.linalg.norm(b))
    return 1.0 - float(a @ b) / norms if norms > 0 else float("inf")


def first_update_difference(truth: dict, moved: dict, layouts: dict, tolerance: float) -> str:
    """The parameter whose one-step update differs most from float64's (each by its own relative difference; in
    PyTorch's order among equals), in words: the forward agreed, so its gradient or the optimizer's step differs."""
    from ...models.mlx_twins import to_mlx_layout

    diffs = [(relative(to_mlx_layout(name, update, layouts), moved[name]), name) for name, update in truth.items()
             if name in moved]
    if not diffs or max(diffs)[0] <= tolerance:
        return "every parameter's update is within the tolerance alone, so together they differ"
    diff, name = max(diffs, key=lambda pair: pair[0])
    return (f"the forward agrees, and the parameter whose update differs most is {name} (by {diff:.2g}): its gradient "
            "or the optimizer's step is not the same (a backward of the model's own, or another optimizer setting)")


def first_difference(reference, twin, x_torch, x_mlx, tolerance: float) -> str:
    """The first leaf layer (in PyTorch's order) whose output differs beyond `tolerance`, in words."""
    import mlx.core as mx
    import torch

    from ...models.mlx_twins import sequential_prefixes, torch_name

    theirs: list = []
    hooks = [m.register_forward_hook(lambda mod, args, out, name=name: theirs.append(
        (name, args[0].detach() if args and isinstance(args[0], torch.Tensor) else None, out)))
        for name, m in reference.named_modules() if name and not any(True for _ in m.children())]
    ours: dict = {}
    prefixes = sequential_prefixes(twin)
    swapped = []
    for name, module in twin.named_modules():
        if name and not module.children():
            cls = type(module)

            def call(self, *args, _cls=cls, _name=torch_name(name, prefixes), **kwargs):
                out = _cls.__call__(self, *args, **kwargs)
                ours.setdefault(_name, (args[0] if args else None, out))
                return out

            module.__class__ = type(cls.__name__, (cls,), {"__call__": call})
            swapped.append((module, cls))
    try:
        with torch.no_grad():
            reference(x_torch)
        mx.eval(twin(x_mlx))
    finally:
        for h in hooks:
            h.remove()
        for module, cls in swapped:
            module.__class__ = cls
    for name, given, out in theirs:
        if name not in ours or not isinstance(out, torch.Tensor):
            continue
        mine_in, mine_out = ours[name]
        diff = relative(out.float().numpy(), _as_torch_layout(np.array(mine_out), tuple(out.shape)))
        if diff > tolerance:
            input_diff = (relative(given.float().numpy(), _as_torch_layout(np.array(mine_in), tuple(given.shape)))
                          if given is not None and mine_in is not None and given.is_floating_point() else 0.0)
            where = (f"its input already differs ({input_diff:.2g}), so what the model does before it outside its "
                     "layers (its forward / __call__) is not the same" if input_diff > tolerance else
                     "its input agrees, so its weights or what it computes are not the same")
            return f"the first layer whose output differs is {name} (by {diff:.2g}); {where}"
    return "every layer both models share agrees, so how the model combines them (its forward / __call__) differs"


def _as_torch_layout(array: np.ndarray, shape: tuple) -> np.ndarray:
    """An MLX output (channels last: NLC, NHWC, NDHWC) in PyTorch's layout (channels first) where that is what makes
    the shapes equal."""
    if array.shape != shape and array.ndim >= 3 and np.moveaxis(array, -1, 1).shape == shape:
        return np.moveaxis(array, -1, 1)
    return array


def refuse(parity: Parity, model: str) -> None:
    """A twin that disagrees is never compared: UserError with what differs."""
    if not parity.passed:
        raise UserError(f"{model} in MLX does not compute what it computes in PyTorch: {parity.words()}. It is not "
                        "run; fix the MLX model (build_mlx_model) so that it matches build_model.")
