"""Deploy benchmark: inference of the user's model on each place it can run, side by side.

Rows, per model: PyTorch on the CPU, PyTorch on each available accelerator (MPS or CUDA), and Core ML with each
compute unit (CPU only, CPU + GPU, CPU + Neural Engine, All). For each row and batch size: the first prediction
apart, then the latency of a batch (median and IQR of synchronized repetitions after a warm-up, until
`MEASURE_S` has passed), samples/s, and how its outputs agree with PyTorch fp32 on the CPU on the same fixed batch.

Core ML needs macOS to run a package (`coreml.predictor`, written against coremltools' documented MLModel and
ComputeUnit); elsewhere each Core ML row says so in one sentence after the conversion itself was done and timed
(what the user would ship is made and checked for conversion here). Runs in a run's process (process.run_tool).
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable

import torch

from ...basics.errors import UserError
from ...basics.formatting import error_line, fmt_bytes
from ..sweep import separated
from .artifacts import TOLERANCE, agreement
from .export import logits_of

WARMUP_S, MEASURE_S = 0.3, 1.0  # per row and batch size
MIN_REPS, MAX_REPS = 5, 500
NOISY = 0.10  # IQR / median above this: the row's latency is marked noisy, as a run's throughput is
DEFAULT_BATCHES = (1, 8, 32)
COMPUTE_UNITS = (("CPU_ONLY", "Core ML, CPU only"), ("CPU_AND_GPU", "Core ML, CPU and GPU"),
                 ("CPU_AND_NE", "Core ML, CPU and Neural Engine"), ("ALL", "Core ML, all units"))


def bench(models_list: list[str], *, batch_sizes: list[int] | None = None, devices: list[str] | None = None,
          weights: str | None = None, compress: list[str] | tuple[str, ...] = (),
          progress: Callable[[str, float], None] | None = None,
          should_stop: Callable[[], bool] | None = None,
          checkpoint: Callable[[dict | None, float | None], None] | None = None) -> dict:
    """The table of rows (see the module docstring) for every model; `compress`: Core ML weight compressions
    (coreml.COMPRESSIONS) measured beside the fp16 package. UserError for bad input. `checkpoint(answer, None)`: the
    rows measured so far, as a stopped benchmark's answer, after each device's and each package's rows: what is kept
    if the benchmark is stopped and does not answer in time (a conversion in progress does not look at Stop)."""
    from ...machine import devices as machine
    from .. import toolkit
    from . import coreml

    say = progress or (lambda message, fraction: None)
    stop = should_stop or (lambda: False)
    sizes = sorted(set(batch_sizes or DEFAULT_BATCHES))
    if not sizes or any(isinstance(b, bool) or not isinstance(b, int) or not 1 <= b <= 1024 for b in sizes):
        raise UserError("Deploy batch sizes must be whole numbers from 1 to 1,024.")
    if not models_list:
        raise UserError("Name at least one model to benchmark.")
    compress = tuple(dict.fromkeys(compress or ()))
    if any(c not in coreml.COMPRESSIONS for c in compress):
        raise UserError(f"Core ML compression must be among {', '.join(coreml.COMPRESSIONS)}.")
    found = [d for d in machine.discover_devices() if d.available]
    wanted = devices or [d.id for d in found]
    places = [machine.resolve_device(d) for d in wanted]
    rows: list[dict] = []
    notes: list[str] = []
    placements: dict[str, dict] = {}
    stopped = False
    env = toolkit.tool_env(places[0] if places else machine.cpu_device())
    runs_here = coreml.runs_here()

    def answer(stopped: bool) -> dict:
        result = {"models": list(models_list), "batch_sizes": sizes, "rows": list(rows), "notes": list(notes),
                  "stopped": stopped, "placement": dict(placements), "env": env, "coreml_runs_here": runs_here}
        result["sentence"] = sentence(result)
        return result

    def keep() -> None:  # what stands if Stop comes and the benchmark cannot answer in time
        if checkpoint is not None:
            checkpoint(answer(True), None)
    if any(p.kind == "cuda" for p in places):  # as a run measures (config.TF32_NOTE): like with like, full fp32
        torch.backends.cudnn.allow_tf32 = False
        torch.backends.cuda.matmul.allow_tf32 = False
        notes.append("CUDA rows ran in full fp32 (TF32 off), as MPS Studio's runs do; PyTorch's default runs "
                     "convolutions in TF32 on this GPU, faster and less exact.")
    for m_index, name in enumerate(models_list):
        try:
            model, x_of, about = _model(name, weights if len(models_list) == 1 else None)
            # PyTorch fp32 on the CPU: what every row matches
            reference = {b: logits_of(model, x_of(b), about["spec"]) for b in sizes}
        except UserError as exc:  # this model cannot be measured; the others still are
            rows.extend(_row(name, "PyTorch, cpu", "pytorch", "cpu", b, reason=str(exc)) for b in sizes)
            continue
        for place in places:
            if stop():
                stopped = True
                break
            say(f"{name}: PyTorch on {place.id}", (m_index + 0.5) / len(models_list))
            rows.extend(_torch_rows(name, model, place, x_of, sizes, reference, stop))
            keep()
        if stopped or stop():
            stopped = True
            break
        core, placements[name], more = _coreml_rows(name, model, x_of, sizes, reference, about, stop, compress)
        rows.extend(core)
        notes.extend(more)
        keep()
    if weights and len(models_list) > 1:
        notes.append("--weights applies to one model; with several, each is the model as freshly built.")
    return answer(stopped)


def _model(name: str, weights: str | None):
    from ...basics.config import RunConfig
    from .export import build, example

    try:
        model, spec, about = build(RunConfig(model=name, dataset="synthetic"), weights, lambda *a: None,
                                   model_given=True)
    except UserError:
        raise
    except Exception as exc:  # a model file's build_model that raises, returns something else
        raise UserError(f"{name} could not be built ({error_line(exc, 200)})") from None
    about["spec"] = spec
    if not weights:
        about["weights_note"] = "the model as freshly built (random weights): its speed is what counts here"
    return model, (lambda b: example(spec, b)), about


def _torch_rows(name, model, place, x_of, sizes, reference, stop=lambda: False) -> list[dict]:
    import copy

    rows = []
    try:
        here = copy.deepcopy(model).to(place.torch_device)
    except Exception as exc:
        return [_row(name, f"PyTorch, {place.id}", "pytorch", place.id, b, reason=f"the model could not be moved "
                     f"there ({error_line(exc, 160)})") for b in sizes]
    meter = _meter(place.kind, place)
    for b in sizes:
        if stop():
            break
        x = x_of(b).to(place.torch_device)
        try:
            with torch.no_grad():
                first, times, out, span = _timed(lambda: here(x), place.synchronize, meter)
        except Exception as exc:  # out of memory, an operator the device lacks
            rows.append(_row(name, f"PyTorch, {place.id}", "pytorch", place.id, b,
                             reason=f"it failed ({error_line(exc, 200)})"))
            continue
        if not isinstance(out, torch.Tensor):
            rows.append(_row(name, f"PyTorch, {place.id}", "pytorch", place.id, b,
                             reason=f"it returned {type(out).__name__}, not a tensor of logits"))
            continue
        rows.append(_row(name, f"PyTorch, {place.id}", "pytorch", place.id, b, first_s=first, times=times,
                         check=agreement(reference[b], out.float().cpu(),
                                         "fp32" if place.kind == "cpu" else "fp32-device"),
                         energy=_energy(meter, span, len(times) * b)))
    meter.close()
    return rows


def _timed(call, synchronize, meter=None) -> tuple[float, list[float], torch.Tensor, object]:
    """The first call's seconds, then per-call seconds after a warm-up (each synchronized), the last output, and
    the energy `meter` read over the timed calls (SpanEnergy; None without a meter)."""
    started = time.perf_counter()
    out = call()
    synchronize()
    first = time.perf_counter() - started
    until = time.perf_counter() + WARMUP_S
    while time.perf_counter() < until:
        out = call()
    synchronize()
    times: list[float] = []
    if meter is not None:
        meter.begin()
    until = time.perf_counter() + MEASURE_S
    while len(times) < MAX_REPS and (len(times) < MIN_REPS or time.perf_counter() < until):
        t0 = time.perf_counter()
        out = call()
        synchronize()
        times.append(time.perf_counter() - t0)
    span = meter.end(close=True) if meter is not None else None
    return first, times, out, span


def _coreml_rows(name, model, x_of, sizes, reference, about, stop=lambda: False, compress=()
                 ) -> tuple[list[dict], dict, list[str]]:
    """Core ML: one package taking every batch size (enumerated shapes), converted here (timed), and the compressed
    variants asked for; each run on every compute unit on macOS only (compressed ones with all units); where Core ML
    plans each operation (MLComputePlan, at the first batch size), or why that is not known; notes. A model that
    does not convert with a flexible batch gets one package per batch size."""
    import tempfile
    from pathlib import Path

    from . import coreml

    rows, notes = [], []
    placement = {"reason": "where Core ML runs each operation is known only on macOS 14.4 or later (MLComputePlan)"}
    batches = {b: (x_of(b), reference[b]) for b in sizes}
    with tempfile.TemporaryDirectory() as tmp:
        def converted(group: list[int]):  # (sizes, ML program, seconds)
            started = time.perf_counter()
            mlmodel = coreml.convert(model, {b: batches[b] for b in group}, group[0], precision="fp16", about=about)
            return group, mlmodel, time.perf_counter() - started
        try:
            groups = [converted(sizes)]
        except coreml.NoFlexibleBatch as exc:
            notes.append(f"{name}: one Core ML package per batch size; it does not convert with several in one "
                         f"({exc.reason}).")
            groups = []
            for b in sizes:
                try:
                    groups.append(converted([b]))
                except UserError as failed:
                    rows.append(_row(name, "Core ML (every compute unit)", "coreml", "all", b, reason=str(failed)))
        except UserError as exc:
            return [_row(name, "Core ML (every compute unit)", "coreml", "all", b, reason=str(exc)) for b in sizes], \
                placement, notes
        for g, (group, mlmodel, convert_s) in enumerate(groups):
            for how in (None, *compress):
                if stop():
                    return rows, placement, notes
                label = "Core ML" if how is None else f"Core ML, weights {how}"
                target = Path(tmp) / f"{g}-{how or 'fp16'}.mlpackage"
                try:
                    check, extra = coreml.write(mlmodel, target, {b: batches[b] for b in group}, precision="fp16",
                                                compress=how)
                except UserError as exc:
                    rows.extend(_row(name, f"{label} (every compute unit)", "coreml", "all", b, reason=str(exc))
                                for b in group)
                    continue
                packed = extra.get("compression")
                size = (f"{fmt_bytes(packed['bytes'])} against {fmt_bytes(packed['uncompressed_bytes'])}" if packed
                        else fmt_bytes(coreml.package_bytes(target)))
                if how is None and coreml.runs_here() and g == 0:
                    placement = _placement(target)
                if not coreml.runs_here():  # one row a batch size: every compute unit waits for macOS alike
                    shared = f"one package for batch {', '.join(map(str, group))}, " if len(group) > 1 else ""
                    rows.extend(_row(name, f"{label} (every compute unit)", "coreml", "all", b, convert_s=convert_s,
                                     reason=f"Core ML runs a package only on macOS: converted here ({shared}{size}, "
                                            f"{convert_s:.1f} s), not run") for b in group)
                    continue
                units = COMPUTE_UNITS if how is None else (("ALL", f"{label}, all units"),)
                for b in group:
                    for unit, unit_label in units:
                        if stop():
                            return rows, placement, notes
                        rows.append(_coreml_row(name, unit_label, unit, b, target, batches[b][0], batches[b][1],
                                                convert_s, how or "fp16"))
    return rows, placement, notes


def _placement(target) -> dict:
    from . import coreml_plan

    try:
        placement = coreml_plan.placement(target)
        placement["sentence"] = coreml_plan.placement_sentence(placement)
        return placement
    except Exception as exc:  # an older macOS, a package Core ML cannot plan
        return {"reason": f"Core ML could not say where it runs each operation ({error_line(exc, 160)})"}


def _coreml_row(name, label, unit, b, target, x, reference, convert_s, precision="fp16") -> dict:
    from . import coreml

    meter = _meter("mps")  # Apple silicon's counters: CPU, GPU, Neural Engine and DRAM, wherever Core ML runs it
    try:
        predictor, load_s = coreml.predictor(target, unit)
        first, times, out, span = _timed(lambda: predictor(x), lambda: None, meter)
    except Exception as exc:
        return _row(name, label, "coreml", unit, b, convert_s=convert_s,
                    reason=f"Core ML could not run it ({error_line(exc, 200)})")
    finally:
        meter.close()
    return _row(name, label, "coreml", unit, b, first_s=first, times=times, load_s=load_s, convert_s=convert_s,
                check=agreement(reference, out, precision), energy=_energy(meter, span, len(times) * b))


COMPUTE_PARTS = ("cpu", "gpu", "ane")  # summed into a row's energy per sample (DRAM is listed, not added)


def _meter(kind: str, place=None):
    """The energy meter of a row's device (machine/energy: NVML, RAPL, Apple's IOReport through zeus)."""
    from ...machine import devices as machine
    from ...machine.energy.meter import meter_for

    return meter_for(kind, place.index if place is not None else None,
                     machine.cuda_uuid(place) if place is not None else None)


def _energy(meter, span, samples: int) -> dict:
    """A row's energy per sample over its timed calls: the CPU, GPU and Neural Engine parts the meter reads, each
    in millijoules a sample, and their sum; or why not measured. What the counters read includes the idle power of
    what they cover (a whole board, a CPU package) and other programs' share."""
    info = meter.describe()
    if span is None or span.energy_j is None or not span.parts or samples <= 0:
        return {"energy_reason": info.get("reason") or "the energy counter could not be read over the timed calls",
                "energy_source": info.get("source")}
    parts = {part: joules * 1000 / samples for part, joules in span.parts.items()}
    return {"energy_mj_per_sample": sum(parts[p] for p in COMPUTE_PARTS if p in parts), "energy_parts_mj": parts,
            "energy_measure": info.get("measure"), "energy_source": info.get("source"), "energy_reason": "",
            "energy_s": span.seconds}


def _row(model, label, runtime, where, batch, *, first_s=None, times=None, load_s=None, convert_s=None,
         check=None, reason="", energy=None) -> dict:
    row = {"model": model, "label": label, "runtime": runtime, "where": where, "batch_size": batch,
           "load_s": load_s, "convert_s": convert_s, "first_s": first_s, "latency_ms": None, "latency_iqr_ms": None,
           "samples_per_s": None, "repetitions": 0, "stability": None, "max_abs_err": None, "max_rel_err": None,
           "top1_agreement": None, "agrees": None, "reason": reason, "energy_mj_per_sample": None,
           "energy_parts_mj": {}, "energy_measure": None, "energy_source": None, "energy_s": None,
           "energy_reason": "not run" if not times else "", **(energy or {})}
    if times:
        ms = sorted(t * 1000 for t in times)
        median = statistics.median(ms)
        q = statistics.quantiles(ms, n=4) if len(ms) >= 2 else [median, median, median]
        row.update(latency_ms=median, latency_iqr_ms=q[2] - q[0], samples_per_s=batch / (median / 1000),
                   repetitions=len(ms), stability="noisy" if (q[2] - q[0]) / median > NOISY else "stable")
    if check is not None:
        row.update(max_abs_err=check["max_abs_err"], max_rel_err=check["max_rel_err"],
                   top1_agreement=check["top1_agreement"], agrees=check["ok"])
    return row


def sentence(result: dict) -> str:
    """The verdict in words: the fastest place at the largest batch per model, against PyTorch on the CPU."""
    parts = []
    for name in result["models"]:
        measured = [r for r in result["rows"] if r["model"] == name and r["latency_ms"]]
        if not measured:
            continue
        largest = max(r["batch_size"] for r in measured)
        at = [r for r in measured if r["batch_size"] == largest]
        ranked = sorted(at, key=lambda r: r["latency_ms"])
        best = ranked[0]
        cpu = next((r for r in at if r["runtime"] == "pytorch" and r["where"] == "cpu"), None)
        tied = [r for r in ranked[1:] if not separated(best, r, "latency_ms", "latency_iqr_ms")]
        speed = f", {cpu['latency_ms'] / best['latency_ms']:.1f}x PyTorch on the CPU" if cpu and cpu is not best else ""
        agree = "" if best["agrees"] is None else (
            f", top-1 agreement {best['top1_agreement']:.0%}" if best["agrees"] else ", but its outputs do NOT agree")
        mj = best.get("energy_mj_per_sample")
        energy = f", {mj:.3g} mJ a sample ({best.get('energy_measure')})" if isinstance(mj, (int, float)) else ""
        most = max(measured, key=lambda r: r.get("samples_per_s") or 0)
        more = (f"; the most samples a second: batch {most['batch_size']} on {most['label']}"
                if most is not best and (most.get("samples_per_s") or 0) > (best.get("samples_per_s") or 0) else "")
        if tied:  # their middle halves overlap: no "fastest" on that
            parts.append(f"{name}: at batch {largest}, no clear fastest between {best['label']} and "
                         f"{', '.join(r['label'] for r in tied)} ({best['latency_ms']:.2f} ms a batch and "
                         f"{', '.join(_ms(r) for r in tied)} ms: their middle halves overlap{agree}{energy}){more}")
        else:
            parts.append(f"{name}: fastest at batch {largest} is {best['label']} ({best['latency_ms']:.2f} ms a "
                         f"batch{speed}{agree}{energy}){more}")
    said = "; ".join(parts) + "." if parts else "Nothing could be measured."
    for name, p in (result.get("placement") or {}).items():
        if p.get("sentence"):
            said += f" {name}: {p['sentence']}"
    if not result["coreml_runs_here"] and any(r["runtime"] == "coreml" and r["convert_s"] for r in result["rows"]):
        said += " Core ML rows: converted here, run only on macOS."
    if result.get("stopped"):
        said += " Stopped before the benchmark ended."
    return said


def _ms(row: dict) -> str:
    return f"{row['latency_ms']:.2f}"


__all__ = ["COMPUTE_UNITS", "DEFAULT_BATCHES", "TOLERANCE", "bench", "sentence"]


def run_tool(_config, payload: dict, *, progress=None, should_stop=None, checkpoint=None) -> dict:
    """The benchmark as the tool table carries it out in a run process (tools/registry.py)."""
    names = payload.get("models")
    if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
        raise UserError("The deploy benchmark needs a list of model names.")
    return bench(names, batch_sizes=payload.get("batch_sizes"), devices=payload.get("devices"),
                 weights=payload.get("weights") or None, compress=payload.get("compress") or (),
                 progress=progress, should_stop=should_stop, checkpoint=checkpoint)


def from_checkpoint(answer, how: str, said: str) -> dict:
    """A stopped or dead benchmark's checkpoint is its answer so far (ShapeError when it is not an object)."""
    from ...basics.shape import Obj

    return Obj().check(answer)
