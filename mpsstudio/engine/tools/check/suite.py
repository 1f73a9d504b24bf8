"""Is the device right today? The `check` tool's suite: a versioned suite of operations with known failure shapes, each
compared on the device with a float64 CPU reference, in four states of the device, in a run process.

Each case (SUITE) is an operation on seeded inputs, rounded to the dtype under test; its reference is the same
operation on those rounded inputs in float64 on the CPU. Its relative error is max|device - reference| /
max|reference| (opcheck.relative_error). The tolerance is derived, never tuned: `tolerance(dtype, k)` = 4 u (sqrt(k)
+ 1), u the dtype's unit roundoff and k the longest sum in the operation: the rounding a sum of k terms gathers as a
random walk (u sqrt(k)) and the result's own rounding (u), with a 4x margin. A wrong kernel is off by far more (the
known issues below were 0.1 to 1 of scale off, or not finite).

The states (STATES): fresh; after a large allocation (a block of about a quarter of the device's memory, at most
1 GiB, filled and let go, its buffer left in the allocator's cache); after the cache was emptied; and the fresh
result once more, which must agree with the first within the tolerance (a kernel that answers differently twice is
not deterministic: pytorch#180776).

A test seam the product owns: MPSSTUDIO_CHECK_FAULT="case:dtype" (in the run process's environment) scales the
device's result of that case by 1.25, a wrong kernel as the tests inject it; the reference is never touched.
"""

from __future__ import annotations

import copy
import math
import os
import time
import zlib
from collections.abc import Callable
from dataclasses import dataclass, replace

import torch
import torch.nn.functional as F

from ...basics.config import PRECISIONS, RunConfig
from ...basics.errors import UserError
from ...basics.formatting import fmt_bytes, printable
from ...machine.devices import Device
from ...machine.precision import precision_unsupported_reason
from .. import memory
from ..opcheck import relative_error
from ..toolkit import tool_env
from .modes import distribution
from .timing import across_processes
from .words import check_sentence

SUITE_VERSION = "2026-12-03.2"  # matmul-2g added
FAULT_ENV = "MPSSTUDIO_CHECK_FAULT"
DTYPES = {"fp32": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16}
UNIT_ROUNDOFF = {"fp32": 2.0 ** -24, "tf32": 2.0 ** -11, "fp16": 2.0 ** -11, "bf16": 2.0 ** -8}
CONVOLUTIONS = ("conv2d",)  # cuDNN's TF32 switch (torch.backends.cudnn.allow_tf32, on by default) governs these
PRODUCTS = ("matmul-t", "matmul-2g", "bmm", "einsum", "linear", "linear-nobias", "linear-tw", "sdpa-causal", "sdpa-mask")
STATES = ("fresh", "after a large allocation", "after emptying the cache", "repeated")
LARGE_BYTES = 1 << 30  # the large allocation's ceiling (a quarter of the device's memory where that is less)
CPU_LARGE_BYTES = 64 << 20
HALF = ("fp32", "fp16", "bf16")
SINGLE = ("fp32",)  # where k is large, half precision's tolerance would let a kernel 25 % off pass: fp32 alone


def tolerance(dtype: str, k: int) -> float:
    """The largest relative error a correct result shows (the module's docstring derives it)."""
    return 4.0 * UNIT_ROUNDOFF[dtype] * (math.sqrt(k) + 1.0)


@dataclass(frozen=True)
class Case:
    """One operation of the suite: `make(gen)` its float32 CPU inputs, `op(*inputs)` the operation, `k` its longest
    sum, `issue` the known failure it is shaped after."""

    id: str
    name: str
    shape: str
    dtypes: tuple[str, ...]
    k: int
    issue: str
    make: Callable[[torch.Generator], tuple[torch.Tensor, ...]]
    op: Callable[..., torch.Tensor]
    reference: Callable[..., torch.Tensor] | None = None  # the float64 reference of `op` from the rounded inputs
    needs_bytes: int = 0  # the device memory the case takes: run where the device has LARGE_SHARE times it
    gpu_only: str = ""  # why the CPU does not run it ("": it does)


def _n(gen: torch.Generator, *shape: int) -> torch.Tensor:
    return torch.randn(*shape, generator=gen)


def _mask(gen: torch.Generator) -> torch.Tensor:
    mask = torch.rand(1, 1, 64, 64, generator=gen) > 0.3
    mask[..., 0] = True  # every query sees at least one key
    return mask


K_BIG = 32767  # MPSGraph's K over-read on M1/M2 begins at K >= 32767 (pytorch#195163)
SUITE: tuple[Case, ...] = (
    Case("matmul-t", "matrix product, transposed left", f"(16x{K_BIG}).T @ ({K_BIG}x16)", SINGLE, K_BIG,
         "pytorch#193487 (A.T @ B off after large allocations)",
         lambda g: (_n(g, K_BIG, 16), _n(g, K_BIG, 16)), lambda a, b: a.t() @ b),
    Case("bmm", "batched matrix product", f"(2x16x{K_BIG}) @ (2x{K_BIG}x16)", SINGLE, K_BIG,
         "pytorch#195163 (bmm with K >= 32767 on M1/M2)",
         lambda g: (_n(g, 2, 16, K_BIG), _n(g, 2, K_BIG, 16)), torch.bmm),
    Case("einsum", "einsum bik,bkj->bij", f"(2x16x{K_BIG}), (2x{K_BIG}x16)", SINGLE, K_BIG,
         "pytorch#195163 (3-D matmul and einsum with K >= 32767)",
         lambda g: (_n(g, 2, 16, K_BIG), _n(g, 2, K_BIG, 16)), lambda a, b: torch.einsum("bik,bkj->bij", a, b)),
    Case("linear", "Linear(2, 192)", "(80x1x2)", HALF, 2, "pytorch#188438 (relative error 0.227 on an M1)",
         lambda g: (_n(g, 80, 1, 2), _n(g, 192, 2), _n(g, 192)), F.linear),
    Case("linear-nobias", "Linear(2, 192), no bias", "(80x1x2)", HALF, 2, "pytorch#188438",
         lambda g: (_n(g, 80, 1, 2), _n(g, 192, 2)), F.linear),
    Case("linear-tw", "linear, transposed weight", "(32x96) x (96x128).T", HALF, 96,
         "pytorch#197796 (bf16 F.linear with a transposed weight)",
         lambda g: (_n(g, 32, 96), _n(g, 96, 128)), lambda x, w: F.linear(x, w.t())),
    Case("sdpa-causal", "causal attention", "(1x4x64x64)", HALF, 64, "pytorch#195910 (fp16/bf16 leaks future tokens)",
         lambda g: (_n(g, 1, 4, 64, 64), _n(g, 1, 4, 64, 64), _n(g, 1, 4, 64, 64)),
         lambda q, k, v: F.scaled_dot_product_attention(q, k, v, is_causal=True)),
    Case("sdpa-mask", "attention, broadcast mask", "(1x4x64x64), mask (1x1x64x64)", HALF, 64,
         "pytorch#184180 (a partly broadcast mask, 0.096 from the CPU)",
         lambda g: (_n(g, 1, 4, 64, 64), _n(g, 1, 4, 64, 64), _n(g, 1, 4, 64, 64), _mask(g)),
         lambda q, k, v, m: F.scaled_dot_product_attention(q, k, v, attn_mask=m)),
    Case("conv2d", "convolution 3x3", "(8x16x16x16) * (32x16x3x3)", HALF, 144, "the built-in CNNs' layer",
         lambda g: (_n(g, 8, 16, 16, 16), _n(g, 32, 16, 3, 3)), lambda x, w: F.conv2d(x, w, padding=1)),
    Case("layer-norm", "layer norm", "(64x768)", SINGLE, 768, "the transformers' layer",
         lambda g: (_n(g, 64, 768),), lambda x: F.layer_norm(x, (768,))),
    Case("softmax", "softmax", "(64x1000)", SINGLE, 1000, "attention's and the classifiers' last step",
         lambda g: (_n(g, 64, 1000),), lambda x: torch.softmax(x, dim=-1)),
    Case("gelu", "GELU", "(64x1024)", HALF, 1, "the transformers' activation",
         lambda g: (_n(g, 64, 1024),), F.gelu),
)

# JuliaGPU/Metal.jl#381: MPS matrix products write a NaN band once (M+2K)·N·4 bytes pass 2^31. The product is taken
# whole on the device (the failure is in its buffers), then its every value checked finite and ROWS_CHECKED rows
# spread over it (the last included) compared with float64: a whole float64 product of this size would take minutes.
BIG_M, BIG_K, BIG_N = 8192, 8192, 24576  # (M + 2K) N 4 = 2.25 GiB
ROWS_CHECKED = torch.linspace(0, BIG_M - 1, 64).round().long()
LARGE_SHARE = 6  # the big product runs where the device's memory is at least this many times what it takes


def _rows_if_finite(c: torch.Tensor) -> torch.Tensor:
    """The checked rows of a product, all NaN where any value of the whole product is not finite."""
    rows = c[ROWS_CHECKED.to(c.device)]
    return torch.where(torch.isfinite(c).all(), rows, torch.full_like(rows, math.nan))


def _big_reference(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    left = a[ROWS_CHECKED].double()
    return torch.cat([left @ b[:, j:j + 4096].double() for j in range(0, b.shape[1], 4096)], dim=1)


SUITE += (
    Case("matmul-2g", "matrix product past 2^31 bytes", f"({BIG_M}x{BIG_K}) @ ({BIG_K}x{BIG_N})", SINGLE, BIG_K,
         "JuliaGPU/Metal.jl#381 (a NaN band once (M+2K)·N·4 bytes pass 2^31)",
         lambda g: (_n(g, BIG_M, BIG_K), _n(g, BIG_K, BIG_N)), lambda a, b: _rows_if_finite(a @ b),
         reference=_big_reference, needs_bytes=4 * (BIG_M * BIG_K + BIG_K * BIG_N + BIG_M * BIG_N),
         gpu_only="a 3.3-TFLOP product takes minutes on a CPU, and its failure is a GPU buffer's"),
)
BY_ID = {case.id: case for case in SUITE}


def _rounded(inputs: tuple[torch.Tensor, ...], dtype: torch.dtype) -> tuple[torch.Tensor, ...]:
    return tuple(t.to(dtype) if t.is_floating_point() else t for t in inputs)


def _reference(case: Case, inputs: tuple[torch.Tensor, ...]) -> torch.Tensor:
    if case.reference is not None:
        return case.reference(*inputs)
    return case.op(*(t.double() if t.is_floating_point() else t for t in inputs))


def not_here(case: Case, device: Device) -> str:
    """Why the device does not take the case ("" when it does): the CPU a GPU-only case, a device whose memory is
    unknown or under LARGE_SHARE times what the case takes."""
    if case.gpu_only and device.kind == "cpu":
        return f"not on the CPU: {case.gpu_only}"
    if case.needs_bytes:
        total = device.memory_total or 0
        if total < LARGE_SHARE * case.needs_bytes:
            has = f"this device has {fmt_bytes(total)}" if total else "this device's memory is not known"
            return (f"it takes {fmt_bytes(case.needs_bytes)} of device memory, run where the device has "
                    f"{LARGE_SHARE} times that; {has}")
    return ""


def _on_device(case: Case, inputs: tuple[torch.Tensor, ...], device: Device, fault: str) -> torch.Tensor:
    tdev = torch.device(device.torch_device or device.id)
    with torch.no_grad():
        out = case.op(*(t.to(tdev) for t in inputs))
    device.synchronize()
    if fault:
        out = out * 1.25
    return out.double().cpu()


def _large_allocation(device: Device) -> None:
    total = device.memory_total or 0
    if device.kind == "cpu":  # malloc's blocks go back to the system: a GPU allocator's cache is what is under test
        size = CPU_LARGE_BYTES
    else:
        size = min(LARGE_BYTES, total // 4) if total else LARGE_BYTES // 4
    block = torch.empty(max(1, size // 4), dtype=torch.float32, device=device.torch_device or device.id)
    block.fill_(1.0)
    device.synchronize()
    del block  # its buffer stays in the allocator's cache: what the next kernel's memory comes from


def promised(case: Case, dtype: str, device: Device) -> str:
    """The arithmetic the settings promise for the case: on CUDA, fp32 products and convolutions are TF32 where
    PyTorch's switches allow it (the matmul one off by default, cuDNN's on), and are judged as TF32."""
    if dtype != "fp32" or device.kind != "cuda":
        return dtype
    if case.id in CONVOLUTIONS and torch.backends.cudnn.allow_tf32:
        return "tf32"
    fast_matmul = torch.backends.cuda.matmul.allow_tf32 or torch.get_float32_matmul_precision() != "highest"
    if case.id in PRODUCTS and fast_matmul:
        return "tf32"
    return dtype


def check_case(case: Case, dtype: str, device: Device, fault: str = "") -> dict:
    """One case in one dtype on the device, in every state: its worst relative error, the state of it, whether the
    repeat agreed, and the verdict ("passed", "wrong", "not deterministic", "failed": it raised)."""
    gen = torch.Generator().manual_seed(zlib.crc32(case.id.encode()))
    math_ = promised(case, dtype, device)
    tol = tolerance(math_, case.k)
    row = {"case": case.id, "operation": case.name, "shape": case.shape,
           "dtype": dtype if math_ == dtype else f"{dtype} (TF32)", "issue": case.issue,
           "tolerance": tol, "error": None, "state": None, "repeat_error": None, "status": "passed", "reason": ""}
    reason = (precision_unsupported_reason(device, dtype) if dtype != "fp32" else "") or not_here(case, device)
    if reason:
        return {**row, "status": "skipped", "reason": reason}
    inputs = _rounded(case.make(gen), DTYPES[dtype])
    ref = _reference(case, inputs)
    start = time.perf_counter()
    try:
        results = {}
        for state in STATES:
            if state == "after a large allocation":
                _large_allocation(device)
            elif state == "after emptying the cache":
                memory.free(device.kind)
            results[state] = _on_device(case, inputs, device, fault)
    except Exception as exc:  # an operation the device cannot run: said, the suite goes on
        first = (str(exc).splitlines() or [""])[0][:300]
        memory.free(device.kind)
        if isinstance(exc, torch.OutOfMemoryError) or "out of memory" in first.lower():  # MPS: a RuntimeError
            return {**row, "status": "skipped", "reason": f"it did not fit in the device's memory ({first})"}
        return {**row, "status": "failed", "reason": f"{type(exc).__name__}: {first}"}
    errors = {state: relative_error(got, ref) for state, got in results.items()}
    worst = max(errors, key=lambda s: errors[s] if math.isfinite(errors[s]) else math.inf)
    finite = bool(torch.isfinite(results["fresh"]).all())
    repeat = relative_error(results["repeated"], results["fresh"]) if finite else math.inf
    row.update(error=errors[worst], state=worst, repeat_error=repeat, seconds=time.perf_counter() - start)
    if not math.isfinite(errors[worst]) or errors[worst] > tol:
        when = {"fresh": "when fresh", "repeated": "when repeated"}.get(worst, worst)
        like = f"; it resembles {case.issue}" if case.issue.startswith("pytorch#") else ""
        row.update(status="wrong", reason=f"{_off(errors[worst], 'its ')} {when}, over the tolerance "
                                          f"{_err(tol)}{like}")
    elif not math.isfinite(repeat) or repeat > tol:
        row.update(status="not deterministic", reason=f"the same call twice differed by {_err(repeat)} of scale, "
                                                        f"over the tolerance {_err(tol)} (pytorch#180776's shape)")
    return row


def _off(value: float, its: str = "") -> str:
    """"off by 0.25 of its scale", or "not finite"."""
    return f"off by {value:.2g} of {its}scale" if math.isfinite(value) else "not finite"


def _err(value: float) -> str:
    return f"{value:.2g}" if math.isfinite(value) else "not finite"


def check_model(config: RunConfig, device: Device, fault: bool = False) -> dict:
    """The user's model as a whole (`check --model`): inspect's parity, one forward and backward of a fixed real
    batch on the device in fp32 against the float64 CPU reference (opcheck.parity_of: its tolerance, or CPU_FACTOR
    times the CPU's own error), in the suite's states; "repeated": the fresh forward made again, against the first.
    `fault`: the device's logits scaled by 1.25 (FAULT_ENV "model:fp32"; the float64 reference is never touched)."""
    from .. import toolkit
    from ..inspection import PARITY_BATCH
    from ..opcheck import float64_reference, for_parity, parity_of

    cfg = replace(config, device=device.id, precision="fp32", options=dict(config.options))
    tf32 = device.kind == "cuda" and bool(cfg.tf32)
    row = {"case": f"model:{printable(config.model)[-58:]}", "operation": f"your model {printable(config.model)[-60:]}",
           "shape": f"batch {PARITY_BATCH}, forward and backward", "dtype": "fp32 (TF32)" if tf32 else "fp32",
           "issue": "", "tolerance": 0.0, "error": None, "state": None, "repeat_error": None, "status": "passed",
           "reason": ""}
    start = time.perf_counter()
    try:
        setup = toolkit.prepare(cfg)
        base = toolkit.build(setup)
        if setup.feed.made or setup.feed.own_loss:
            return {**row, "status": "skipped", "reason": toolkit.not_for_own_feed(config.model)}
        if fault:
            base.register_forward_hook(lambda _m, _i, out: out * 1.25 if out.dtype != torch.float64 and (
                out.device.type != "cpu" or device.kind == "cpu") else out)
        x, y = toolkit.real_batch(setup, PARITY_BATCH, torch.device("cpu"))
        reference = float64_reference(base, x, y)  # once: each state compares with it
        if not bool(torch.isfinite(reference[0]).all()):
            return {**row, "status": "skipped", "reason": "the model's own output in float64 on the CPU is not "
                    "finite, so there is nothing right to compare the device with (the model, not the device)"}
        found = {}
        for state in STATES[:3]:
            if state == "after a large allocation":
                _large_allocation(device)
            elif state == "after emptying the cache":
                memory.free(device.kind)
            found[state] = parity_of(base, x, y, setup.tdev, "fp32", bool(cfg.tf32), setup.device.synchronize,
                                     setup.device.kind, reference=reference)
        twice = for_parity(copy.deepcopy(base).to(setup.tdev))
        with torch.no_grad():
            first, again = twice(x.to(setup.tdev)), twice(x.to(setup.tdev))
        setup.device.synchronize()
    except Exception as exc:  # a model the device cannot run: said as a case that failed, the suite goes on
        first_line = (str(exc).splitlines() or [""])[0][:300]
        said = first_line if isinstance(exc, UserError) else f"{type(exc).__name__}: {first_line}"
        return {**row, "status": "failed", "reason": said}
    worst = max(found, key=lambda s: found[s]["worst_rel_err"] if math.isfinite(found[s]["worst_rel_err"])
                else math.inf)
    repeat = relative_error(again, first)
    tol = float(found[worst]["tolerance"])
    row.update(error=found[worst]["worst_rel_err"], state=worst, tolerance=tol, repeat_error=repeat,
               seconds=time.perf_counter() - start)
    bad = [s for s, p in found.items() if not p["ok"]]
    if bad:
        when = {"fresh": "when fresh"}.get(bad[0], bad[0])
        row.update(status="wrong", reason=f"one forward and backward is {_off(found[bad[0]]['worst_rel_err'])} {when}, "
                                          f"beyond the tolerance {_err(tol)} and the CPU's own error (inspect names "
                                          "the tensors, diagnose the first layer)")
    elif not math.isfinite(repeat) or repeat > tol:
        row.update(status="not deterministic", reason=f"the same forward twice differed by {_err(repeat)} of scale "
                                                        "(pytorch#180776's shape)")
    return row


def check_device(device: Device, *, progress=None, should_stop=None) -> list[dict]:
    fault = os.environ.get(FAULT_ENV, "")
    rows = []
    work = [(case, dtype) for case in SUITE for dtype in case.dtypes if dtype in PRECISIONS]
    for i, (case, dtype) in enumerate(work):
        if should_stop is not None and should_stop():
            break
        if progress is not None:
            progress(f"{device.id}: {case.name} in {dtype} ({i + 1} of {len(work)})", i / len(work))
        rows.append(check_case(case, dtype, device, fault if fault == f"{case.id}:{dtype}" else ""))
    return rows


def run_tool(_config, payload: dict, *, progress=None, should_stop=None, checkpoint=None) -> dict:
    """The check of each device asked (`payload["devices"]`: ids; the available ones when empty), in this run
    process; a device that is not available is said, not checked."""
    from ...machine import devices as machine

    found = {d.id: d for d in machine.discover_devices()}
    first_gpu = next((d for d in found.values() if d.kind == "cuda"), None)
    asked = [str(d) for d in payload.get("devices") or []] or [d for d, dev in found.items() if dev.available]
    processes = int(payload.get("processes") or 0)
    model = RunConfig.from_dict(payload["config"]) if isinstance(payload.get("config"), dict) else None
    if model is not None:  # a model that does not build, or data that does not load, is bad input: said first
        from .. import toolkit

        toolkit.build(toolkit.prepare(model.changed(device="cpu")))
    fault = os.environ.get(FAULT_ENV, "") == "model:fp32"
    rows, skipped, timing, checked = [], [], [], []
    for name in asked:
        device = first_gpu if name == "cuda" else found.get(name)  # "cuda": the first GPU, as everywhere
        if device is None or not device.available:
            skipped.append(f"{name}: {device.reason if device is not None else 'no such device here'}")
            continue
        name = device.id
        checked.append(device)
        rows += [{"device": name, **row} for row in check_device(device, progress=progress, should_stop=should_stop)]
        if model is not None and not (should_stop and should_stop()):
            if progress is not None:
                progress(f"{name}: your model {model.model} against float64", 0.9)
            rows.append({"device": name, **check_model(model, device, fault)})
        if processes:
            timed, problems = across_processes(name, processes, progress=progress, should_stop=should_stop,
                                               model=payload.get("config") if model is not None else None)
            skipped += problems
            for shape in dict.fromkeys(k for t in timed for k in t):
                timing.append(distribution(name, shape, [t[shape] for t in timed if shape in t]))
    result = {"tool": "check", "suite": SUITE_VERSION, "devices": [d.id for d in checked], "rows": rows,
              "notes": skipped, "processes": processes, "timing": timing,
              "stopped": bool(should_stop and should_stop()),
              "env": tool_env(next((d for d in checked if d.kind != "cpu"), checked[0]) if checked
                              else machine.cpu_device())}
    result["sentence"] = check_sentence(result)
    return result
