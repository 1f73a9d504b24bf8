"""What the exports share: the check of an exported model's outputs against PyTorch's, capturing a model with
MultiheadAttention, and writing a package folder whole or not at all."""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
from pathlib import Path

import torch

# max error relative to the largest output, for "agrees": an export run on the same CPU (fp32), the same model on
# another device in full fp32 (other kernels, other summation orders: measured on the lent H100 with TF32 off, see
# docs/benchmarks.md), and Core ML's fp16
# and compressed Core ML weights (provisional: set from what int8 and 4-bit palettes cost in published figures, not
# yet measured on a Mac)
TOLERANCE = {"fp32": 1e-4, "fp32-device": 1e-3, "fp16": 2e-2, "int8": 5e-2, "palettize4": 2.5e-1}


@contextlib.contextmanager
def no_attention_fast_path():
    """nn.MultiheadAttention takes a fused fast path in eval mode, which tracing and torch.export cannot follow
    ("Graphs differed across invocations"): off while the model is captured."""
    mha = getattr(torch.backends, "mha", None)
    before = mha.get_fastpath_enabled() if mha is not None else None
    if mha is not None:
        mha.set_fastpath_enabled(False)
    try:
        yield
    finally:
        if mha is not None:
            mha.set_fastpath_enabled(before)


def agreement(reference: torch.Tensor, got: torch.Tensor, precision: str) -> dict:
    """How the exported model's outputs agree with PyTorch's on the same batch."""
    if tuple(got.shape) != tuple(reference.shape):
        return {"ok": False, "max_abs_err": None, "max_rel_err": None, "top1_agreement": None,
                "tolerance": TOLERANCE[precision],
                "reason": f"its output has shape {list(got.shape)}, PyTorch's {list(reference.shape)}"}
    from ..opcheck import relative_error  # max|got - ref| / max|ref|, as the inspection's parity measures it

    max_abs = (got - reference).abs().max().item() if got.numel() else 0.0
    rel = relative_error(got, reference)
    top1 = (got.argmax(-1) == reference.argmax(-1)).float().mean().item() if reference.dim() >= 1 else None
    ok = bool(torch.isfinite(got).all().item()) and rel <= TOLERANCE[precision]
    return {"ok": ok, "max_abs_err": max_abs, "max_rel_err": rel, "top1_agreement": top1,
            "tolerance": TOLERANCE[precision], "reason": "" if ok else
            f"its outputs differ from PyTorch's by up to {rel:.2g} of the largest output (tolerance "
            f"{TOLERANCE[precision]:g})"}


@contextlib.contextmanager
def package_path(target: Path):
    """A folder beside `target` to write a package into; swapped in whole when the block ends without error (an
    older package at `target` is replaced), removed otherwise."""
    part = Path(tempfile.mkdtemp(prefix=f".{target.name}.", suffix=f".part{target.suffix}", dir=target.parent))
    shutil.rmtree(part)
    try:
        yield part
        old = None
        if target.exists():
            old = target.with_name(f".{target.name}.{os.getpid()}.part.old")
            os.replace(target, old)
        os.replace(part, target)
        if old is not None:
            shutil.rmtree(old, ignore_errors=True)
    finally:
        if part.exists():
            shutil.rmtree(part, ignore_errors=True)
