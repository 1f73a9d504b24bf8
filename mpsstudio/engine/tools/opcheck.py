"""Per-operation checks of one training step, made by the inspection (inspection.py: `mpsstudio inspect`, and the
inspection the front ends start after each finished MPS run, cli/tools.py and gui/window/run_control.py): which operations took MPS's CPU fallback, and does the device
agree with a float64 CPU reference. Pure torch: no config, data or model loading here.

Which operations fall back (see docs/architecture.md, "Which operations fall back to the CPU"): each operation a
TorchDispatchMode sees with a tensor on the device is classified by the dispatcher's own registrations
(`kernel_kind`). Parity: relative error of a tensor = max|device - reference| / max|reference| in float64.
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

from ..machine.kernels import kernel_kind

# Largest relative error (see the module docstring) that still counts as correct, per precision. fp32 allows for
# another order of summation and the fast convolution algorithms GPU libraries choose (measured on an H100,
# resnet18, TF32 off: 5.9e-3 in one weight gradient where the CPU's float32 is at 6.9e-7); TF32 keeps 10 mantissa
# bits, fp16 10 and bf16 7, and gradients are sums that cancel, so theirs are wider. A wrong kernel is off by
# orders of magnitude more (or not finite).
TOLERANCES = {"fp32": 1e-2, "tf32": 5e-2, "fp16": 5e-2, "bf16": 1e-1}
CPU_FACTOR = 4.0  # or within this multiple of the CPU's own error in the same precision (see parity_of)
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
    ops: list[dict] = [{"op": op, "count": recorder.counts[op],
                        "share": (recorder.seconds[op] / total) if total > 0 else None}
                       for op in recorder.counts if kinds[op] == "cpu_fallback"]
    ops.sort(key=lambda o: (-(o["share"] or 0), -o["count"], o["op"]))
    return {
        "fallback_ops": ops,
        "ops": [{"op": op, "count": n, "kind": kinds[op]} for op, n in recorder.counts.most_common()],
        "op_count": sum(recorder.counts.values()),
        "distinct_ops": len(recorder.counts),
        "missing_ops": sorted(op for op, kind in kinds.items() if kind == "missing"),
        "fallback_share": (sum(o["share"] or 0 for o in ops) if total > 0 else None),
    }


def relative_error(got: torch.Tensor, ref: torch.Tensor) -> float:
    """max|got - ref| / max|ref| in float64 (inf when the reference is all zero and the result is not).

    Each tensor is copied to the CPU first and converted there: MPS has no float64, and a device-to-CPU copy into
    float64 in one `.to("cpu", torch.float64)` raises TypeError in torch <= 2.13 and silently copies nothing in
    2.14.0-2.14.1 (pytorch#197715), which made every MPS result look 100 % wrong."""
    got, ref = _cpu_float64(got), _cpu_float64(ref)
    diff = float((got - ref).abs().max()) if ref.numel() else 0.0
    scale = float(ref.abs().max()) if ref.numel() else 0.0
    if not math.isfinite(diff):
        return math.inf
    if scale == 0.0:
        return 0.0 if diff == 0.0 else math.inf
    return diff / scale


def _cpu_float64(t: torch.Tensor) -> torch.Tensor:
    """`t` as a float64 CPU tensor: moved in its own dtype, then converted on the CPU (see relative_error)."""
    return t.detach().cpu().to(torch.float64)


def for_parity(model: torch.nn.Module) -> torch.nn.Module:
    """Evaluation mode: dropout off (its random masks differ between devices) and normalisation layers on their
    running statistics. In training mode the gradients through batch statistics cancel to near zero at a small
    batch, which amplifies rounding by orders of magnitude (resnet18, batch 8, this CPU in float32 against
    float64: 3.5e-2 in training mode, 1.4e-5 in evaluation mode), hiding the device's arithmetic behind it."""
    return model.eval()


def forward_backward(model, x, y, dtype=None, device_type="cpu"):
    if dtype is not None:
        with torch.autocast(device_type, dtype=dtype):
            logits = model(x)
            loss = F.cross_entropy(logits, y)
    else:
        logits = model(x)
        loss = F.cross_entropy(logits, y)
    loss.backward()
    return logits, loss


def _run_copy(base, x, y, tdev, dtype, sync=lambda: None):
    """Logits, loss and named gradients of a copy of `base` on `tdev` (autocast to `dtype` when given)."""
    model = for_parity(copy.deepcopy(base).to(tdev))
    logits, loss = forward_backward(model, x.to(tdev), y.to(tdev), dtype, tdev.type)
    sync()
    return logits, loss, {n: p.grad for n, p in model.named_parameters() if p.grad is not None}


def _cpu_same_precision(base, x, y, dtype):
    """The CPU in the device's precision setting (float32, or autocast to bf16/fp16), None where it has none."""
    try:
        return _run_copy(base, x, y, torch.device("cpu"), dtype)
    except Exception:  # this CPU's autocast lacks the type
        return None


def float64_reference(base: torch.nn.Module, x: torch.Tensor, y: torch.Tensor) -> tuple:
    """(logits, loss, named gradients) of a float64 copy of `base` on the CPU batch (x, y): parity_of's reference,
    made once where several checks compare with it."""
    ref = for_parity(copy.deepcopy(base).double())
    logits, loss = forward_backward(ref, x.double() if x.is_floating_point() else x, y)
    return logits, loss, {n: p.grad for n, p in ref.named_parameters() if p.grad is not None}


def parity_of(base: torch.nn.Module, x: torch.Tensor, y: torch.Tensor, tdev: torch.device, precision: str,
              tf32: bool, sync: Callable[[], None], device_kind: str, compare_cpu: bool | None = None,
              on_device: torch.nn.Module | None = None, reference: tuple | None = None) -> dict:
    """`base` (a CPU model, left unchanged) on `tdev` in `precision` against float64 on the CPU, one forward and
    backward of the CPU batch (x, y), both in evaluation mode (`for_parity`).

    A tensor is within tolerance when its relative error is at most the precision's tolerance, or at most
    CPU_FACTOR times the error the CPU itself makes in the same precision setting: a reduced-precision gradient
    that is a near-cancelling sum is far from float64 on any hardware, and the device is then judged against the
    CPU doing the same arithmetic.
    `on_device`: a model already on `tdev` (trained there) to check itself instead of a fresh copy of `base`, whose
    weights it must hold. `reference`: float64_reference(base, x, y), made already."""
    ref_logits, ref_loss, ref_grads = reference if reference is not None else float64_reference(base, x, y)
    dtype = {"fp16": torch.float16, "bf16": torch.bfloat16}.get(precision)
    saved = (torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32)
    try:
        torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = tf32
        if on_device is None:
            logits, loss, grads = _run_copy(base, x, y, tdev, dtype, sync)
        else:
            was_training = on_device.training
            model = for_parity(on_device)
            model.zero_grad(set_to_none=True)
            logits, loss = forward_backward(model, x.to(tdev), y.to(tdev), dtype, tdev.type)
            sync()
            grads = {n: p.grad for n, p in model.named_parameters() if p.grad is not None}
            model.train(was_training)
    finally:
        torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32 = saved
    if compare_cpu is None:
        compare_cpu = tdev.type != "cpu"  # the CPU is not its own yardstick
    cpu = _cpu_same_precision(base, x, y, dtype) if compare_cpu else None
    label = "tf32" if precision == "fp32" and tf32 and device_kind == "cuda" else precision
    tolerance = TOLERANCES[label]

    def judged(got, want, cpu_got) -> dict:
        err = relative_error(got, want) if got is not None else math.inf
        cpu_err = relative_error(cpu_got, want) if cpu_got is not None else None
        ok = err <= tolerance or (cpu_err is not None and err <= CPU_FACTOR * cpu_err)
        return {"max_rel_err": err, "cpu_rel_err": cpu_err, "ok": ok}
    loss_j = judged(loss.float().reshape(1), ref_loss.reshape(1), cpu[1].float().reshape(1) if cpu else None)
    logits_j = judged(logits.float(), ref_logits, cpu[0].float() if cpu else None)
    rows = [{"name": name, **judged(grads.get(name), want, cpu[2].get(name) if cpu else None)}
            for name, want in ref_grads.items()]
    rows.sort(key=lambda g: (g["ok"], -g["max_rel_err"]))  # failures first, then the largest errors
    worst = max([loss_j["max_rel_err"], logits_j["max_rel_err"], *(g["max_rel_err"] for g in rows)])
    return {
        "loss_rel_err": loss_j["max_rel_err"], "loss_cpu_rel_err": loss_j["cpu_rel_err"], "loss_ok": loss_j["ok"],
        "logits_max_rel_err": logits_j["max_rel_err"], "logits_cpu_rel_err": logits_j["cpu_rel_err"],
        "logits_ok": logits_j["ok"],
        "grads": rows,
        "worst_rel_err": worst,
        "tolerance": tolerance,
        "cpu_factor": CPU_FACTOR,
        "precision": label,
        "cpu_precision": "fp32" if label == "tf32" else label,  # the CPU has no TF32
        "ok": loss_j["ok"] and logits_j["ok"] and all(g["ok"] for g in rows),
        "batch_size": int(x.shape[0]),
        "reference": "CPU, float64, evaluation mode",
    }
