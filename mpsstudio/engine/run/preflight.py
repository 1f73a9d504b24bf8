"""Before an MPS run (issue 28, part 4): what the model and its data hold that MPS cannot (float64, complex128:
aten/src/ATen/mps/EmptyTensor.cpp and OperationUtils.mm refuse them), named in one sentence before anything moves
to the device, cast only when the user chose it; and which operations the model will run that MPS has no kernel
for, from one training step traced on the meta device (shapes only, nothing computed) and classified by the
dispatcher (machine/kernels.py), so the user learns before the run what will fall back to the CPU.

The trace is a forecast: a model whose forward needs real values (`.item()`, data-dependent shapes) cannot be
traced on the meta device, and then says so; the inspection after an MPS run lists what actually fell back.
"""

from __future__ import annotations

import copy

import torch
import torch.nn.functional as F
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten

from ..basics.errors import UserError
from ..basics.formatting import error_line, plural
from ..machine.kernels import kernel_kind

MPS_REFUSES = {torch.float64: ("float64", torch.float32), torch.complex128: ("complex128", torch.complex64)}
CAST_HOW = "--cast-float64, or Advanced ▸ Cast float64 for MPS"
SHOWN = 4  # names in a sentence


def refused(model: torch.nn.Module, data=None) -> list[str]:
    """"parameter `w` (float64)", "buffer `scale` (complex128)", "the dataset's inputs (float64)": what MPS
    cannot hold."""
    found = [f"parameter `{n}` ({MPS_REFUSES[p.dtype][0]})" for n, p in model.named_parameters()
             if p.dtype in MPS_REFUSES]
    found += [f"buffer `{n}` ({MPS_REFUSES[b.dtype][0]})" for n, b in model.named_buffers() if b.dtype in MPS_REFUSES]
    train = getattr(data, "train", None)
    for what, attr in (("inputs", "x"), ("labels", "y")):
        t = getattr(train, attr, None)
        if isinstance(t, torch.Tensor) and t.dtype in MPS_REFUSES:
            found.append(f"the dataset's {what} ({MPS_REFUSES[t.dtype][0]})")
    return found


def _listed(items: list[str]) -> str:
    shown = ", ".join(items[:SHOWN])
    return shown + (f" and {len(items) - SHOWN} more" if len(items) > SHOWN else "")


def check_dtypes(model: torch.nn.Module, data, name: str, cast: bool) -> str | None:
    """None when MPS can hold everything; UserError naming what it cannot, unless `cast`, which casts the model's
    tensors in place (float64 to float32, complex128 to complex64) and returns the note that says so."""
    name = name.replace("\\", "/").rsplit("/", 1)[-1]  # a model file by its file name
    found = refused(model, data)
    if not found:
        return None
    data_found = [f for f in found if f.startswith("the dataset's")]
    if cast and data_found:
        raise UserError(f"MPS has no float64 or complex128, and {_listed(data_found)} are; the cast applies to the "
                        "model's tensors only: save the data as float32.")
    if not cast:
        raise UserError(f"MPS has no float64 or complex128, and {name} holds {plural(len(found), 'tensor')} of them: "
                        f"{_listed(found)}; make them float32 in the model, or let MPS Studio cast them for this run "
                        f"({CAST_HOW}).")
    for module in model.modules():
        for key, p in list(module._parameters.items()):
            if p is not None and p.dtype in MPS_REFUSES:
                module._parameters[key] = torch.nn.Parameter(p.detach().to(MPS_REFUSES[p.dtype][1]),
                                                             requires_grad=p.requires_grad)
        for key, b in list(module._buffers.items()):
            if b is not None and b.dtype in MPS_REFUSES:
                module._buffers[key] = b.to(MPS_REFUSES[b.dtype][1])
    return (f"Cast for MPS, as chosen: {_listed(found)} (float64 to float32, complex128 to complex64); results can "
            "differ from a float64 run elsewhere.")


class _Names(TorchDispatchMode):
    def __init__(self):
        super().__init__()
        self.names: dict[str, int] = {}

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        flat, _ = tree_flatten((args, kwargs))
        if any(isinstance(t, torch.Tensor) and t.device.type == "meta" for t in flat):
            self.names[func.name()] = self.names.get(func.name(), 0) + 1
        return func(*args, **kwargs)


def traced_ops(model: torch.nn.Module, input_shape: tuple, input_float: bool, train: bool,
               make_optimizer) -> dict[str, int]:
    """The operations (name: calls) of one step of a batch of 2 on the meta device: forward, loss and, when
    training, backward and the optimizer. Raises what the model raises on meta tensors."""
    meta = copy.deepcopy(model).to("meta")
    x = (torch.empty((2, *input_shape), device="meta") if input_float
         else torch.zeros((2, *input_shape), dtype=torch.long, device="meta"))
    y = torch.zeros(2, dtype=torch.long, device="meta")
    names = _Names()
    if train:
        opt = make_optimizer(meta)
        with names:
            F.cross_entropy(meta(x), y).backward()
            opt.step()
    else:
        with torch.no_grad(), names:
            F.cross_entropy(meta(x), y)
    return names.names


def forecast(model: torch.nn.Module, input_shape: tuple, input_float: bool, train: bool,
             make_optimizer, fallback_on: bool, decide=kernel_kind) -> dict:
    """{"no_mps_kernel": [{"op", "calls", "kind"}], "traced": bool, "reason": why not traced, "note": the sentence
    (None when every operation has an MPS kernel)}."""
    try:
        ops = traced_ops(model, input_shape, input_float, train, make_optimizer)
    except Exception as exc:  # the model needs real values, or an operation has no meta kernel
        return {"no_mps_kernel": [], "traced": False, "note": None,
                "reason": f"its operations could not be listed before the run ({error_line(exc, 160)}); the "
                          "inspection after the run lists what fell back"}
    lacking = [{"op": op, "calls": n, "kind": kind} for op, n in sorted(ops.items())
               if (kind := decide(op, "mps")) in ("cpu_fallback", "missing")]
    note = None
    if lacking:
        names = _listed([o["op"] for o in lacking])
        note = (f"Before the run: {plural(len(lacking), 'operation')} of this model {'has' if len(lacking) == 1 else 'have'}"
                f" no MPS kernel ({names}); " + ("each will run on the CPU, copying its tensors there and back."
                                                 if fallback_on else "the CPU fallback is off for this run, so the "
                                                 "run will fail at the first of them: turn the fallback on."))
    return {"no_mps_kernel": lacking, "traced": True, "reason": None, "note": note}
