"""Where Core ML plans to run a package's operations (its compute plan, macOS 14.4+): the share of operations and of
estimated cost on the Neural Engine, the GPU and the CPU, and the operators that cannot run on the Neural Engine.
coreml.py makes and checks the package; this reads Core ML's plan for it (deploy-bench's placement)."""

from __future__ import annotations

import tempfile
from pathlib import Path

from .coreml import load_coremltools


PLACES = ("neural_engine", "gpu", "cpu")


def placement(target: Path, unit: str = "ALL") -> dict:
    """Where Core ML plans to run each operation of the package with compute units `unit` (macOS 14.4+): the share
    of operations and of estimated cost on the Neural Engine, the GPU and the CPU, and the operators that cannot run
    on the Neural Engine (what a user would change to get there). `MLComputePlan` reads a compiled model
    (`compile_model` makes the .mlmodelc); constants are not operations that compute and are left out."""
    ct = load_coremltools()
    from coremltools.models.compute_plan import MLComputePlan

    with tempfile.TemporaryDirectory(prefix="mpsstudio-plan-") as folder:  # not compile_model's default: a
        compiled = ct.models.utils.compile_model(str(target), f"{folder}/model.mlmodelc")  # .mlmodelc left in TMPDIR
        return _placed(MLComputePlan.load_from_path(path=str(compiled), compute_units=getattr(ct.ComputeUnit, unit)),
                       unit)


def _placed(plan, unit: str) -> dict:
    from collections import Counter

    from coremltools.models import compute_device

    program = plan.model_structure.program
    if program is None or "main" not in program.functions:
        raise ValueError("the compiled package holds no ML program")
    kinds = ((compute_device.MLNeuralEngineComputeDevice, "neural_engine"), (compute_device.MLGPUComputeDevice, "gpu"),
             (compute_device.MLCPUComputeDevice, "cpu"))

    def kind(device) -> str:
        return next((name for cls, name in kinds if isinstance(device, cls)), "unknown")
    ops: Counter[str] = Counter()
    cost: dict[str, float] = {}
    not_on_ne: Counter[str] = Counter()
    unplaced = 0
    for op in _operations(program.functions["main"].block):
        if op.operator_name == "const":
            continue
        usage = plan.get_compute_device_usage_for_mlprogram_operation(op)
        estimate = plan.get_estimated_cost_for_mlprogram_operation(op)
        where = kind(usage.preferred_compute_device) if usage is not None else "unknown"
        ops[where] += 1
        cost[where] = cost.get(where, 0.0) + (float(estimate.weight) if estimate is not None else 0.0)
        unplaced += usage is None
        if usage is not None and not any(kind(d) == "neural_engine" for d in usage.supported_compute_devices):
            not_on_ne[op.operator_name] += 1
    total, total_cost = sum(ops.values()), sum(cost.values())
    return {"compute_units": unit, "operations": total,
            "share_of_operations": {p: ops[p] / total if total else 0.0 for p in (*PLACES, "unknown")},
            "share_of_cost": {p: cost.get(p, 0.0) / total_cost if total_cost else None for p in (*PLACES, "unknown")},
            "not_on_neural_engine": [{"op": name, "count": n} for name, n in not_on_ne.most_common()],
            "undetermined": unplaced}


def _operations(block):
    """Every operation of a block, those of nested blocks (loops, conditionals) included."""
    for op in block.operations:
        yield op
        for inner in op.blocks:
            yield from _operations(inner)


def placement_sentence(p: dict) -> str:
    """"Core ML plans 92 % of the estimated cost on the Neural Engine (41 of 45 operations); 3 operators cannot run
    there: ..."."""
    ne = p["share_of_cost"].get("neural_engine")
    on_ne = round(p["share_of_operations"]["neural_engine"] * p["operations"])
    share = f"{ne:.0%} of the estimated cost" if ne is not None else "an unknown share of the cost"
    said = (f"Core ML ({p['compute_units']}) plans {share} on the Neural Engine ({on_ne} of {p['operations']} "
            "operations)")
    blocked = p["not_on_neural_engine"]
    if blocked:
        names = ", ".join(f"{b['op']} ({b['count']})" for b in blocked[:5])
        said += f"; these operators cannot run there: {names}"
    return said + "."
