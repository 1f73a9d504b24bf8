"""Runs in Bencher's metric format (BMF JSON: bencher.dev/docs/reference/bencher-metric-format), so a team can put
thresholds and alerts on MPS Studio's figures with Bencher: one benchmark per setup ("resnet18 · cifar10 · mps ·
fp32 · batch 64", the newest run of each), its measures "throughput" (samples/s: the median of the windows, with
the 95 % interval of that median as lower_value and upper_value, their range below nine windows), "latency" (the
step's median in nanoseconds, Bencher's unit for it) and, where an allocator measured a peak (CUDA's, MLX's; not
the in-use reading of MPS or the CPU's growth), "peak-memory" (bytes). Names follow the
shareable rules (a path's last part)."""

from __future__ import annotations

import json
from pathlib import Path

from ..basics.errors import UserError
from ..basics.files import write_atomic
from ..basics.frameworks import run_label
from ..basics.results import RunResult
from .mlflow_run import shown_name, throughput

PEAKS = ("peak_allocated", "mlx_peak")  # memory measures that are an allocator's peak (MPS's in-use reading is not)


def benchmark_name(run: RunResult) -> str:
    c = run.config
    device = run_label(c.framework or "torch", c.device, quantize=(c.options or {}).get("quantize"))
    return (f"{shown_name(c.model)} · {shown_name(c.dataset)} · {device} · {c.precision or 'fp32'} · "
            f"batch {c.batch_size}")


def document(runs: list[RunResult]) -> dict:
    """{benchmark: {measure: {"value", "lower_value"?, "upper_value"?}}} of the finished runs, the newest of each
    benchmark (runs in any order)."""
    out: dict[str, dict] = {}
    for run in sorted((r for r in runs if r.status == "finished"), key=lambda r: r.created_at):
        found = throughput(run)
        if found is None:
            continue
        measures = {"throughput": {"value": float(found["median"]), "lower_value": float(found["low"]),
                                   "upper_value": float(found["high"])}}
        if run.summary.step_ms is not None:
            measures["latency"] = {"value": float(run.summary.step_ms) * 1e6}
        if run.summary.peak_memory is not None and run.summary.memory_measure in PEAKS:
            measures["peak-memory"] = {"value": float(run.summary.peak_memory)}
        out[benchmark_name(run)] = measures
    return out


def export(runs: list[RunResult], path: str | Path) -> dict:
    doc = document(runs)
    if not doc:
        raise UserError("No finished run with measured windows to export; run a benchmark first (`mpsstudio bench`).")
    target = Path(path)
    try:
        write_atomic(target, json.dumps(doc, indent=1, allow_nan=False, ensure_ascii=False))
    except OSError as exc:
        raise UserError(f"{target} cannot be written ({exc.strerror or exc.__class__.__name__}); choose another "
                        "folder.") from None
    return doc
