"""`mpsstudio inspect`: does the device compute this model correctly, and which operations left it for the CPU?

Three checks of one config, in a run's own process (isolation.run_tool):

1. The device's functional probe (probe.py).
2. CPU fallback: one training step (forward, backward, optimizer) runs under a TorchDispatchMode that sees
   every ATen operation; each operation with a tensor on the device is classified by the dispatcher's own
   registrations (`kernel_kind`, see docs/architecture.md "Which operations fall back to the CPU"): a kernel of
   its own for the device's dispatch key, a composite kernel (made of other operations), or the boxed CPU
   fallback PyTorch registers for MPS (aten/src/ATen/mps/MPSFallback.mm). PyTorch itself warns only once per
   process (TORCH_WARN_ONCE), so warnings cannot list them. Each operation is also timed with the device
   synchronized around it, which gives the fallback operations' share of the time spent in operations.
3. Numerical parity: the same weights and the same batch, one forward and backward on the device (in the
   config's precision, TF32 as the config says) and on the CPU in float64 as the reference. Reported: the
   relative error of the loss, of the logits and of every parameter's gradient, worst first, where the relative
   error of a tensor is max|device - reference| / max|reference| (relative to the tensor's scale, so values
   near zero do not blow it up). Dropout is off in both (its random masks differ between devices).
"""

from __future__ import annotations

import copy
import math
import time
from collections import Counter
from collections.abc import Callable

import torch
import torch.nn.functional as F
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten

from . import probe, toolkit
from .config import RunConfig
from .errors import UserError
from .formatting import error_line, plural

PARITY_BATCH = 8  # samples in the parity batch (the float64 CPU reference is slow for large models)
# Largest relative error (see the module docstring) that still counts as correct, per precision. fp32 allows
# for a different order of summation on the device; TF32 keeps 10 mantissa bits like fp16; bf16 keeps 7.
TOLERANCES = {"fp32": 1e-3, "tf32": 1e-2, "fp16": 1e-2, "bf16": 5e-2}
DISPATCH_KEYS = {"mps": "MPS", "cuda": "CUDA", "cpu": "CPU"}
_COMPOSITE_KEYS = ("CompositeExplicitAutogradNonFunctional", "CompositeExplicitAutograd", "CompositeImplicitAutograd")
_FALLBACK_SOURCE = "MPSFallback"  # the file that registers MPS's boxed CPU fallback, also per operation


def kernel_kind(op_name: str, device_type: str) -> str:
    """How the dispatcher runs `op_name` (e.g. "aten::nonzero") for a tensor on `device_type`:
    "native" (a kernel of its own for the device's key), "composite" (a kernel made of other operations),
    "cpu_fallback" (the boxed CPU fallback), "missing" (none: it would fail) or "unknown"."""
    key = DISPATCH_KEYS.get(device_type)
    if key is None:
        return "unknown"
    C = torch._C
    try:
        if C._dispatch_has_kernel_for_dispatch_key(op_name, key):
            # MPS registers the CPU fallback per operation too (MPSFallback.mm, m.impl(..., mps_fallback)):
            # the dispatcher's table names the file a kernel was registered from
            line = next((l for l in C._dispatch_dump_table(op_name).splitlines() if l.startswith(f"{key}:")), "")
            return "cpu_fallback" if _FALLBACK_SOURCE in line else "native"
        if any(C._dispatch_has_kernel_for_dispatch_key(op_name, k) for k in _COMPOSITE_KEYS):
            return "composite"
        if C._dispatch_has_backend_fallback(getattr(C.DispatchKey, key)):
            return "cpu_fallback" if device_type == "mps" else "native"
        return "missing"
    except Exception:  # an operator the dispatcher does not know by this name (a custom op's alias)
        return "unknown"


class _Recorder(TorchDispatchMode):
    """Counts (and times, the device synchronized around each) every ATen operation with a tensor on the device."""

    def __init__(self, device_type: str, sync: Callable[[], None]):
        super().__init__()
        self.device_type, self.sync = device_type, sync
        self.counts: Counter[str] = Counter()
        self.seconds: Counter[str] = Counter()

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        flat, _ = tree_flatten((args, kwargs))
        on_device = any(isinstance(t, torch.Tensor) and t.device.type == self.device_type for t in flat)
        if not on_device:
            return func(*args, **kwargs)
        self.sync()
        start = time.perf_counter()
        out = func(*args, **kwargs)
        self.sync()
        name = func.name()
        self.seconds[name] += time.perf_counter() - start
        self.counts[name] += 1
        return out


def fallback_ops(step: Callable[[], None], device_type: str, sync: Callable[[], None],
                 decide: Callable[[str, str], str] | None = None) -> dict:
    """Run `step` once under the recorder; the operations that took the CPU fallback, most time first."""
    decide = decide or kernel_kind
    recorder = _Recorder(device_type, sync)
    with recorder:
        step()
    total = sum(recorder.seconds.values())
    kinds = {op: decide(op, device_type) for op in recorder.counts}
    ops = [{"op": op, "count": recorder.counts[op],
            "share": (recorder.seconds[op] / total) if total > 0 else None}
           for op in recorder.counts if kinds[op] == "cpu_fallback"]
    ops.sort(key=lambda o: (-(o["share"] or 0), -o["count"], o["op"]))
    return {
        "fallback_ops": ops,
        "op_count": sum(recorder.counts.values()),
        "distinct_ops": len(recorder.counts),
        "missing_ops": sorted(op for op, kind in kinds.items() if kind == "missing"),
        "fallback_share": (sum(o["share"] or 0 for o in ops) if total > 0 else None),
    }


def relative_error(got: torch.Tensor, ref: torch.Tensor) -> float:
    """max|got - ref| / max|ref| in float64 (inf when the reference is all zero and the result is not)."""
    got, ref = got.detach().to("cpu", torch.float64), ref.detach().to("cpu", torch.float64)
    diff = float((got - ref).abs().max()) if ref.numel() else 0.0
    scale = float(ref.abs().max()) if ref.numel() else 0.0
    if not math.isfinite(diff):
        return math.inf
    if scale == 0.0:
        return 0.0 if diff == 0.0 else math.inf
    return diff / scale


def _without_dropout(model: torch.nn.Module) -> torch.nn.Module:
    model.train()
    for module in model.modules():
        if isinstance(module, torch.nn.modules.dropout._DropoutNd):
            module.eval()
        if isinstance(getattr(module, "dropout", None), float):  # nn.MultiheadAttention keeps a float
            module.dropout = 0.0
    return model


def _forward_backward(model, x, y, dtype=None, device_type="cpu"):
    if dtype is not None:
        with torch.autocast(device_type, dtype=dtype):
            logits = model(x)
            loss = F.cross_entropy(logits, y)
    else:
        logits = model(x)
        loss = F.cross_entropy(logits, y)
    loss.backward()
    return logits, loss


def parity(setup: toolkit.Setup, base: torch.nn.Module) -> dict:
    """The device against the float64 CPU reference on one fixed batch (see the module docstring)."""
    cfg = setup.config
    x, y = toolkit.real_batch(setup, PARITY_BATCH, torch.device("cpu"))
    ref = _without_dropout(copy.deepcopy(base).double())
    ref_x = x.double() if x.is_floating_point() else x
    ref_logits, ref_loss = _forward_backward(ref, ref_x, y)
    dev_model = _without_dropout(copy.deepcopy(base).to(setup.tdev))
    dtype = {"fp16": torch.float16, "bf16": torch.bfloat16}.get(cfg.precision)
    tf32 = (torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32)
    try:
        torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = cfg.tf32
        logits, loss = _forward_backward(dev_model, x.to(setup.tdev), y.to(setup.tdev), dtype, setup.tdev.type)
        setup.device.synchronize()
    finally:
        torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32 = tf32
    grads = []
    ref_params = dict(ref.named_parameters())
    for name, p in dev_model.named_parameters():
        r = ref_params.get(name)
        if r is None or r.grad is None:
            continue
        err = relative_error(p.grad, r.grad) if p.grad is not None else math.inf
        grads.append({"name": name, "max_rel_err": err})
    grads.sort(key=lambda g: -g["max_rel_err"])
    label = "tf32" if cfg.precision == "fp32" and cfg.tf32 and setup.device.kind == "cuda" else cfg.precision
    tolerance = TOLERANCES[label]
    loss_err = relative_error(loss.float().reshape(1), ref_loss.reshape(1))
    logits_err = relative_error(logits.float(), ref_logits)
    worst = max([loss_err, logits_err, *(g["max_rel_err"] for g in grads)])
    return {
        "loss_rel_err": loss_err,
        "logits_max_rel_err": logits_err,
        "grads": grads,
        "worst_rel_err": worst,
        "tolerance": tolerance,
        "precision": label,
        "ok": worst <= tolerance,
        "batch_size": PARITY_BATCH,
        "reference": "CPU, float64",
    }


def inspect(config: RunConfig, *, progress: Callable[[str, float], None] | None = None,
            should_stop: Callable[[], bool] | None = None,
            decide: Callable[[str, str], str] | None = None) -> dict:
    """Probe, fallback operations and parity of `config` on its device; UserError for bad input."""
    progress = progress or (lambda message, fraction: None)
    stop = should_stop or (lambda: False)
    check = probe.check(config.device, cached=False) if config.device != "cpu" else probe.check("cpu")
    setup = toolkit.prepare(config, progress)  # raises "available but not working" when the probe failed
    base = toolkit.build(setup)
    out: dict = {"tool": "inspect", "device": setup.device.id, "precision": config.precision, "tf32": config.tf32,
                 "probe": check.to_dict(), "env": setup.env, "config": setup.config.to_dict(), "stopped": False}
    try:
        progress("checking parity with the CPU (float64)", 0.1)
        out["parity"] = parity(setup, base)
        if stop():
            raise toolkit.Stopped()
        progress("recording the operations of one training step", 0.6)
        out.update(_step_ops(setup, base, decide))
    except toolkit.Stopped:
        out["stopped"] = True
    except UserError:
        raise
    except Exception as exc:
        raise UserError(f"Inspecting {config.model} on {setup.device.id} failed ({error_line(exc, 200)}); "
                        f"check that it runs with `mpsstudio bench` first.") from exc
    out.setdefault("parity", None)
    out.setdefault("fallback_ops", [])
    out["fallback_applies"] = setup.device.kind == "mps"
    out["sentence"] = sentence(out)
    return out


def _step_ops(setup: toolkit.Setup, base: torch.nn.Module, decide) -> dict:
    from . import trainer

    model = copy.deepcopy(base).to(setup.tdev)
    opt = trainer.make_optimizer(setup.config, model)
    x, y = toolkit.real_batch(setup, max(2, min(setup.config.batch_size, 64)), setup.tdev)
    dtype = {"fp16": torch.float16, "bf16": torch.bfloat16}.get(setup.config.precision)

    def step():
        opt.zero_grad(set_to_none=True)
        _forward_backward(model, x, y, dtype, setup.tdev.type)
        opt.step()
    step()  # warm-up: first-call set-up is not an operation of the step
    setup.device.synchronize()
    found = fallback_ops(step, setup.tdev.type, setup.device.synchronize, decide)
    found["ops_batch_size"] = int(x.shape[0])
    return found


def sentence(result: dict) -> str:
    """What inspect found, in words: parity first (wrong results matter most), then fallbacks, then the probe."""
    device = result.get("device", "?")
    parts = []
    check = result.get("probe") or {}
    if check and not check.get("ok", True):
        parts.append(f"{device} is {probe.NOT_WORKING}: {check.get('detail', '')}.")
    par = result.get("parity")
    if par:
        what = f"{par['precision']}, tolerance {par['tolerance']:.0e}"
        if par["ok"]:
            parts.append(f"{device} matches the float64 CPU reference ({what}): largest relative error "
                         f"{par['worst_rel_err']:.1e}.")
        else:
            worst = _worst_name(par)
            parts.append(f"{device} differs from the float64 CPU reference beyond tolerance ({what}): relative "
                         f"error {par['worst_rel_err']:.1e} in {worst}; its results here are not to be trusted.")
    ops = result.get("fallback_ops") or []
    if ops:
        names = ", ".join(o["op"] for o in ops[:3]) + (", ..." if len(ops) > 3 else "")
        share = result.get("fallback_share")
        timing = f" ({share:.0%} of the time spent in operations)" if share is not None else ""
        parts.append(f"{plural(len(ops), 'operation')} ran on the CPU{timing}: {names}; each copies its tensors "
                     f"to the CPU and back, which slows every step.")
    elif result.get("fallback_applies"):
        parts.append(f"Every operation of a training step ran on {device} (no CPU fallback).")
    if result.get("stopped"):
        parts.append("Stopped before every check ran.")
    return " ".join(parts) or f"Nothing was checked on {device}."


def _worst_name(par: dict) -> str:
    worst = par["worst_rel_err"]
    if par["loss_rel_err"] == worst:
        return "the loss"
    if par["logits_max_rel_err"] == worst:
        return "the logits"
    return f"the gradient of {par['grads'][0]['name']}" if par["grads"] else "the gradients"
