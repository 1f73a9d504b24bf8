"""Tool results as the tools make them."""

from __future__ import annotations

from mpsstudio.engine.basics.config import RunConfig
from mpsstudio.engine.tools.deploy import deploybench


def deploy_result() -> dict:
    """A deploy benchmark's result as the tool makes it (its own row and sentence functions), one measured row."""
    rows = [deploybench._row("mlp", "PyTorch, cuda:0", "pytorch", "cuda:0", 8, first_s=0.2, times=[0.001] * 9,
                             energy={"energy_mj_per_sample": 3.5, "energy_parts_mj": {"gpu": 3.0, "cpu": 0.5},
                                     "energy_measure": "measured", "energy_source": "NVML", "energy_reason": "",
                                     "energy_s": 1.0}),
            deploybench._row("mlp", "Core ML (every compute unit)", "coreml", "all", 8, convert_s=1.0,
                             reason="Core ML runs a package only on macOS: converted here, not run")]
    result = {"models": ["mlp"], "batch_sizes": [8], "rows": rows, "notes": [], "stopped": False, "placement": {},
              "env": {"machine_label": "Linux, NVIDIA H100"}, "coreml_runs_here": False}
    result["sentence"] = deploybench.sentence(result)
    return result



def inspect_result(ok=True, fallback=True):
    err = 1e-7 if ok else 0.2
    return {"tool": "inspect", "device": "mps", "precision": "fp32", "config": RunConfig(device="mps").to_dict(),
            "env": {"machine_label": "Apple M2 Pro, macOS 14.5"}, "probe": {"ok": True, "detail": "fine"},
            "parity": {"loss_rel_err": err, "logits_max_rel_err": err, "worst_rel_err": err, "tolerance": 1e-2,
                       "loss_cpu_rel_err": 1e-7, "logits_cpu_rel_err": 1e-7, "loss_ok": ok, "logits_ok": ok,
                       "ok": ok, "precision": "fp32", "batch_size": 8, "cpu_factor": 4.0,
                       "grads": [{"name": "0.weight", "max_rel_err": err, "cpu_rel_err": 1e-7, "ok": ok}]},
            "fallback_ops": [{"op": "aten::nonzero", "count": 3, "share": 0.25}] if fallback else [],
            "fallback_applies": True, "op_count": 90, "ops_batch_size": 64, "sentence": "the engine's sentence"}



def sweep_result(hostname: str = "") -> dict:
    """A batch-size sweep's result as the tool makes it (sweep.analyse over runs), cpu and mps, on `hostname` when
    given (what a shared copy must not carry)."""
    from mpsstudio.engine.tools import sweep
    from tests.support.runs import point

    res = [point("cpu", b, 400.0 * b ** 0.45) for b in (1, 2, 4, 8, 16)]
    res += [point("mps", b, 60.0 * b) for b in (1, 2, 4, 8, 16)]
    result = sweep.analyse(res, RunConfig(model="resnet18", dataset="cifar10"))
    result["env"] = {"machine_label": "M3 Max (macOS 15.5)", **({"hostname": hostname} if hostname else {})}
    return result
