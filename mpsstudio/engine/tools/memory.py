"""The memory side of the max-batch search: the limit a probe may use and the allocator that enforces it, the
process's peak resident size, swap, out-of-memory errors, and emptying the allocator between probes."""

from __future__ import annotations

import gc
import os
import sys
import threading
from collections.abc import Callable

import psutil
import torch

from ..basics.formatting import fmt_bytes
from .toolkit import Setup

CPU_SHARE = 0.5  # CPU runs: default limit, this share of the memory available when the search starts
MPS_FRACTION_MAX = 2.0  # torch.mps.set_per_process_memory_fraction takes 0..2 (of the recommended maximum)
RSS_SAMPLE_S = 0.01


def limit_for(setup: Setup, memory_limit: int | None) -> tuple[int | None, str]:
    """The memory a probe may use (bytes, or None: the device's own out-of-memory error), and where it comes from."""
    kind = setup.device.kind
    if kind == "mps":
        recommended = int(torch.mps.recommended_max_memory())
        if memory_limit is None:
            return recommended, "torch.mps.recommended_max_memory()"
        if memory_limit > MPS_FRACTION_MAX * recommended:  # the most the MPS allocator can be allowed
            return int(MPS_FRACTION_MAX * recommended), (f"--memory-limit, lowered to {MPS_FRACTION_MAX:g}x "
                                                         f"torch.mps.recommended_max_memory(), MPS's ceiling")
    if memory_limit is not None:
        return memory_limit, "--memory-limit"
    if kind == "cpu":
        available = int(psutil.virtual_memory().available)
        return int(available * CPU_SHARE), f"{CPU_SHARE:.0%} of the {fmt_bytes(available)} available at the start"
    return None, "the GPU's own memory (a real out-of-memory error)"


def enforce_limit(device, limit: int | None) -> tuple[str, Callable[[], None]]:
    """Cap the device's allocator at `limit` bytes in this process, so a batch above it fails with a real
    out-of-memory error. Returns how (words; "" when no allocator enforces the limit: the CPU, or no limit below the
    card) and a function that lifts the cap again."""
    if limit is None:
        return "", lambda: None
    if device.kind == "cuda":
        total = int(torch.cuda.get_device_properties(device.index).total_memory)
        if limit >= total:
            return "", lambda: None
        fraction = limit / total
        torch.cuda.set_per_process_memory_fraction(fraction, device.index)
        return (f"PyTorch's CUDA allocator capped at {fmt_bytes(limit)} "
                f"(torch.cuda.set_per_process_memory_fraction({fraction:.4f}))",
                lambda: torch.cuda.set_per_process_memory_fraction(1.0, device.index))
    if device.kind == "mps":
        fraction = limit / int(torch.mps.recommended_max_memory())
        torch.mps.set_per_process_memory_fraction(float(fraction))
        return (f"the MPS allocator capped at {fmt_bytes(limit)} "
                f"(torch.mps.set_per_process_memory_fraction({fraction:.4f}))",
                lambda: torch.mps.set_per_process_memory_fraction(_mps_default_ratio()))
    return "", lambda: None


def _mps_default_ratio() -> float:
    """The MPS allocator's limit before the search capped it: PYTORCH_MPS_HIGH_WATERMARK_RATIO, else torch's default
    for unified memory (1.7; aten/src/ATen/mps/MPSAllocator.h, default_high_watermark_ratio)."""
    try:
        ratio = float(os.environ.get("PYTORCH_MPS_HIGH_WATERMARK_RATIO", "1.7"))
    except ValueError:
        ratio = 1.7
    return ratio if 0.0 <= ratio <= MPS_FRACTION_MAX else 1.7


def ceiling(device) -> str:
    """The device's memory ceilings in one sentence, said beside a search's answer: on a Mac the three that users
    confuse (Metal's recommended working set, PyTorch's high watermark over it, macOS's wired limit for the GPU)."""
    total = int(psutil.virtual_memory().total)
    if device.kind == "mps":
        from ..machine.devices import sysctl

        return mps_ceiling(int(torch.mps.recommended_max_memory()), os.environ.get("PYTORCH_MPS_HIGH_WATERMARK_RATIO"),
                           sysctl("iogpu.wired_limit_mb"), total)
    if device.kind == "cuda":
        card = int(torch.cuda.get_device_properties(device.index).total_memory)
        return f"The GPU holds {fmt_bytes(card)}; PyTorch's allocator may use all of it unless a limit caps it."
    return (f"This machine has {fmt_bytes(total)} of memory, {fmt_bytes(int(psutil.virtual_memory().available))} "
            "available now; the CPU's search stops before the share of it its limit says.")


def mps_ceiling(recommended: int, ratio_text: str | None, wired_text: str, memory: int) -> str:
    """The Mac's memory ceilings in words from what was read: Metal's recommended maximum for the GPU, the high
    watermark ratio in force (PYTORCH_MPS_HIGH_WATERMARK_RATIO, default 1.7; 0: no ceiling of PyTorch's own) and
    `sysctl iogpu.wired_limit_mb` (0: macOS's default; "" where it cannot be read)."""
    parts = [f"Metal recommends at most {fmt_bytes(recommended)} for the GPU (torch.mps.recommended_max_memory(), of "
             f"this Mac's {fmt_bytes(memory)})"]
    try:
        ratio = float(ratio_text) if ratio_text is not None else None
    except ValueError:
        ratio = None
    if ratio is not None and not 0.0 <= ratio <= MPS_FRACTION_MAX:
        ratio = None
    if ratio == 0.0:
        parts.append("PyTorch's MPS allocator has no ceiling of its own (PYTORCH_MPS_HIGH_WATERMARK_RATIO=0): it "
                     "allocates until macOS refuses")
    else:
        said = ratio if ratio is not None else 1.7
        source = "PYTORCH_MPS_HIGH_WATERMARK_RATIO" if ratio is not None else "its default"
        parts.append(f"PyTorch's MPS allocator refuses past {said:g}x that, {fmt_bytes(int(said * recommended))} "
                     f"(the high watermark ratio, {source})")
    wired = wired_text.strip()
    if wired.isdigit() and int(wired) > 0:
        parts.append(f"macOS lets the GPU wire at most {fmt_bytes(int(wired) * 1024**2)} (iogpu.wired_limit_mb)")
    elif wired.isdigit():
        parts.append("macOS's wired limit for the GPU is its default (iogpu.wired_limit_mb = 0)")
    else:
        parts.append("macOS's wired limit for the GPU could not be read (sysctl iogpu.wired_limit_mb)")
    return "; ".join(parts) + "."


class RssPeak:
    """The process's peak resident size while a probe runs (sampled in a thread; CPU and MPS share RAM)."""

    def __init__(self):
        self.peak = 0
        self._stop = threading.Event()
        self._proc = psutil.Process()
        self._thread = threading.Thread(target=self._watch, daemon=True, name="rss-peak")

    def _watch(self):
        while not self._stop.is_set():
            self.peak = max(self.peak, self._proc.memory_info().rss)
            self._stop.wait(RSS_SAMPLE_S)

    def __enter__(self):
        self.peak = self._proc.memory_info().rss
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join()
        self.peak = max(self.peak, self._proc.memory_info().rss)


def swapped_out() -> int:
    """A reading whose growth during a probe is what the system moved to swap, in bytes. On Linux psutil's `sout`,
    the kernel's swap-out counter. On macOS psutil's `sout` is page-outs (`vmstat.pageouts` x the page size,
    psutil/arch/osx/mem.c: file-backed pages written back count too, and swap the compressor makes may not), so there
    the swap in use (`used`, sysctl VM_SWAPUSAGE) stands in: its growth is what was swapped out."""
    try:
        swap = psutil.swap_memory()
        return int(swap.used if sys.platform == "darwin" else swap.sout)
    except Exception:  # no swap information here (some containers)
        return 0


def is_oom(exc: BaseException) -> bool:
    text = str(exc).lower()
    return isinstance(exc, (torch.OutOfMemoryError, MemoryError)) or "out of memory" in text \
        or "cannot allocate memory" in text or "can't allocate memory" in text


def free(device_kind: str) -> None:
    """Collect Python's garbage and give the allocator's unused memory back. On CUDA also cuBLAS's workspaces
    (one per stream and thread, kept by the allocator once made), so the next step makes them as a run's first
    step does, among its own tensors: measured on an H100, vit_b_16 under a 16 GiB cap trained 123 after earlier
    probes had left them in place, while a fresh process (a run) ran out of memory at 123 and trained 122, as the
    search does with them cleared (docs/benchmarks.md). Where the process has run MLX, MLX's cached buffers too
    (`mx.clear_cache`) and its peak reset, so a warm worker's next MLX run starts as a fresh process's would."""
    gc.collect()
    mlx = sys.modules.get("mlx.core")  # MLX's allocator, where this process has used MLX: its cache and its peak
    if mlx is not None:
        mlx.clear_cache()
        mlx.reset_peak_memory()
    if device_kind == "cuda":
        clear = getattr(torch._C, "_cuda_clearCublasWorkspaces", None)  # private; torch's own tests use it so
        if clear is not None:
            clear()
        torch.cuda.empty_cache()
    elif device_kind == "mps":
        torch.mps.empty_cache()
