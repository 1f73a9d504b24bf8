"""How the dispatcher runs an operation on a device: a kernel of the device's own, a composite kernel (made of other
operations), MPS's CPU fallback, or none. Read from the dispatcher's own registrations, in the order it fills an
operator's table (docs/architecture.md, "Which operations fall back to the CPU"); the inspection, the diagnosis and
the preflight before an MPS run all ask here."""

from __future__ import annotations

import torch

from .apple import fallback_enabled

DISPATCH_KEYS = {"mps": "MPS", "cuda": "CUDA", "cpu": "CPU"}
_COMPOSITE_KEYS = ("CompositeExplicitAutogradNonFunctional", "CompositeExplicitAutograd", "CompositeImplicitAutograd")
_FALLBACK_SOURCE = "MPSFallback"  # the file that registers MPS's boxed CPU fallback, also per operation


def kernel_kind(op_name: str, device_type: str) -> str:
    """How the dispatcher runs `op_name` (e.g. "aten::nonzero") for a tensor on `device_type`:
    "native" (a kernel of its own for the device's key), "composite" (a kernel made of other operations),
    "cpu_fallback" (the boxed CPU fallback), "missing" (none, or on MPS the boxed fallback that raises: it would
    fail) or "unknown"."""
    key = DISPATCH_KEYS.get(device_type)
    if key is None:
        return "unknown"
    C = torch._C
    try:
        if C._dispatch_has_kernel_for_dispatch_key(op_name, key):
            # MPS registers the CPU fallback per operation too (MPSFallback.mm, m.impl(..., mps_fallback)):
            # the dispatcher's table names the file a kernel was registered from
            line = next((row for row in C._dispatch_dump_table(op_name).splitlines() if row.startswith(f"{key}:")), "")
            return "cpu_fallback" if _FALLBACK_SOURCE in line else "native"
        if any(C._dispatch_has_kernel_for_dispatch_key(op_name, k) for k in _COMPOSITE_KEYS):
            return "composite"
        if device_type == "mps":
            # MPSFallback.mm registers a boxed fallback for MPS whatever the variable says: the CPU fallback with
            # PYTORCH_ENABLE_MPS_FALLBACK on, else one that raises "not currently implemented" (so
            # _dispatch_has_backend_fallback cannot tell them apart: the variable torch loaded with can)
            return "cpu_fallback" if fallback_enabled() else "missing"
        if C._dispatch_has_backend_fallback(getattr(C.DispatchKey, key)):
            return "native"
        return "missing"
    except Exception:  # an operator the dispatcher does not know by this name (a custom op's alias)
        return "unknown"
