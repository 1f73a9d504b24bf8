"""Which layer computes wrong (issue 28, part 3): the device against the float64 CPU reference module by module.

Forward hooks on every leaf module (one without children) of two copies of the same weights, one on the device in
the run's precision and one on the CPU in float64, record each call's output on one fixed batch, both in evaluation
mode (opcheck.for_parity says why). Calls are matched in the order they happen (a module called twice is two
calls). A call's error is opcheck's relative error (max|device - reference| / max|reference|); it is beyond
tolerance when above the precision's tolerance and above CPU_FACTOR times the CPU's own error in the same
precision at that call (a third copy on the CPU, as the whole-model parity judges). The first call beyond tolerance
is named with its module path, type, input range and error; in fp16 and bf16, also the first whose output holds NaN
or Inf. After `after_steps` training steps on the device, the whole-model parity is repeated on the trained model
itself (its own memory on the device, not a fresh copy: some MPS bugs appear only with the allocator's state).
"""

from __future__ import annotations

import copy
import math
from collections.abc import Callable

import torch

from ..opcheck import CPU_FACTOR, TOLERANCES, for_parity, relative_error

MAX_ROWS = 400  # calls kept in the result (the first wrong one is always among them)


def _first_tensor(value):
    if isinstance(value, torch.Tensor):
        return value
    if isinstance(value, (tuple, list)):
        return next((t for t in (_first_tensor(v) for v in value) if t is not None), None)
    if isinstance(value, dict):
        return next((t for t in (_first_tensor(v) for v in value.values()) if t is not None), None)
    return None


def _record(model: torch.nn.Module) -> tuple[list, list]:
    """(calls, hook handles): each leaf module's call appends (path, type, input, output) as it happens."""
    calls: list[tuple[str, str, torch.Tensor | None, torch.Tensor | None]] = []
    handles = []
    for name, module in model.named_modules():
        if next(module.children(), None) is not None:
            continue

        def hook(mod, inputs, output, name=name):
            x, out = _first_tensor(inputs), _first_tensor(output)
            calls.append((name or "(the model)", type(mod).__name__,
                          x.detach() if x is not None else None, out.detach() if out is not None else None))
        handles.append(module.register_forward_hook(hook))
    return calls, handles


def _forward(model, x, dtype, device_type: str) -> list:
    calls, handles = _record(model)
    try:
        with torch.no_grad():
            if dtype is not None:
                with torch.autocast(device_type, dtype=dtype):
                    model(x)
            else:
                model(x)
    finally:
        for h in handles:
            h.remove()
    return calls


def _range(t: torch.Tensor | None) -> list[float] | None:
    if t is None or not t.is_floating_point() or t.numel() == 0:
        return None
    c = t.detach().float().cpu()
    finite = c[torch.isfinite(c)]
    if finite.numel() == 0:
        return None
    return [float(finite.min()), float(finite.max())]


def _finite(t: torch.Tensor | None) -> bool:
    return t is None or not t.is_floating_point() or bool(torch.isfinite(t.detach().float().cpu()).all())


def first_wrong_layer(base: torch.nn.Module, x: torch.Tensor, tdev: torch.device, precision: str, tf32: bool,
                      device_kind: str) -> dict:
    """The calls of `base`'s leaf modules on `tdev` against float64 on the CPU (see the module docstring)."""
    dtype = {"fp16": torch.float16, "bf16": torch.bfloat16}.get(precision)
    label = "tf32" if precision == "fp32" and tf32 and device_kind == "cuda" else precision
    tolerance = TOLERANCES[label]
    ref = _forward(for_parity(copy.deepcopy(base).double()), x.double() if x.is_floating_point() else x, None, "cpu")
    saved = (torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32)
    try:
        torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = tf32
        got = _forward(for_parity(copy.deepcopy(base).to(tdev)), x.to(tdev), dtype, tdev.type)
    finally:
        torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32 = saved
    cpu = None
    if tdev.type != "cpu":  # the CPU doing the same arithmetic: the yardstick for reduced precision
        try:
            cpu = _forward(for_parity(copy.deepcopy(base)), x, dtype, "cpu")
        except Exception:  # this CPU's autocast lacks the type
            cpu = None
    rows: list[dict] = []
    first, nonfinite = None, None
    seen: dict[str, int] = {}
    for i, (name, kind, inp, out) in enumerate(got):
        seen[name] = seen.get(name, 0) + 1
        call = name if seen[name] == 1 else f"{name} (call {seen[name]})"
        want = ref[i][3] if i < len(ref) and ref[i][0] == name else None
        if out is None or want is None or not out.is_floating_point() or out.shape != want.shape:
            continue
        err = relative_error(out.float(), want)
        cpu_err = None
        if cpu is not None and i < len(cpu) and cpu[i][0] == name and cpu[i][3] is not None \
                and cpu[i][3].shape == want.shape:
            cpu_err = relative_error(cpu[i][3].float(), want)
        ok = err <= tolerance or (cpu_err is not None and err <= CPU_FACTOR * cpu_err)
        row = {"module": call, "type": kind, "max_rel_err": err, "cpu_rel_err": cpu_err, "ok": ok,
               "finite": _finite(out), "input_range": _range(inp)}
        if len(rows) < MAX_ROWS:
            rows.append(row)
        if first is None and not ok:
            first = row
            if row not in rows:
                rows.append(row)
        if nonfinite is None and not row["finite"] and dtype is not None:
            nonfinite = row
            if row not in rows:
                rows.append(row)
    return {"precision": label, "tolerance": tolerance, "cpu_factor": CPU_FACTOR, "calls": len(got),
            "compared": sum(1 for _ in rows), "rows": rows, "first_wrong": first, "first_nonfinite": nonfinite,
            "batch_size": int(x.shape[0]), "reference": "CPU, float64, evaluation mode",
            "ok": first is None and nonfinite is None}


def layers_sentence(result: dict, device: str) -> str:
    """"The first module beyond tolerance on mps is `layer2.0.conv1` (Conv2d): relative error 3.1e-01 (tolerance
    1e-02), its input ranging -2.1 to 3.4." or that every module agrees."""
    first, nonfinite = result.get("first_wrong"), result.get("first_nonfinite")
    parts = []
    if nonfinite:
        parts.append(f"The first module whose output holds NaN or Inf on {device} is `{nonfinite['module']}` "
                     f"({nonfinite['type']}){_input(nonfinite)}.")
    if first:
        err = first["max_rel_err"]
        shown = f"{err:.1e}" if math.isfinite(err) else "not finite"
        parts.append(f"The first module beyond tolerance on {device} is `{first['module']}` ({first['type']}): "
                     f"relative error {shown} (tolerance {result['tolerance']:.0e}){_input(first)}; the modules "
                     "after it inherit its error.")
    if not parts:
        parts.append(f"Every module of {device} agrees with the float64 CPU reference ({result['compared']} calls "
                     f"compared, {result['precision']}, tolerance {result['tolerance']:.0e}).")
    return " ".join(parts)


def _input(row: dict) -> str:
    r = row.get("input_range")
    return f", its input ranging {r[0]:.3g} to {r[1]:.3g}" if r else ""


def parity_after_training(model: torch.nn.Module, x, y, tdev, precision: str, tf32: bool,
                          sync: Callable[[], None], device_kind: str) -> dict:
    """The whole-model parity of a model trained on the device, computed on that very model (its memory and the
    allocator's state as training left them) against its weights in float64 on the CPU."""
    from ..opcheck import parity_of

    base = copy.deepcopy(model).to("cpu")  # the trained weights, for the float64 reference
    return parity_of(base, x, y, tdev, precision, tf32, sync, device_kind, on_device=model)
