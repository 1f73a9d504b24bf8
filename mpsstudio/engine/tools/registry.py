"""The measuring tools a run process can carry out (process.run_tool), and the check of what it sends back.

`run` executes in the child; `checked` in the parent, on a dict that came over the pipe from a process that ran
a user's model: only plain JSON values, within size limits, with the fields the front ends read of the right
types. This module imports no torch (the parent may not have loaded it).
"""

from __future__ import annotations

import math
from collections.abc import Callable

from ..basics.config import RunConfig
from ..basics.errors import UserError

TOOLS = ("max-batch", "inspect", "devices", "export", "deploy-bench", "diagnose")
MAX_DEPTH = 8
MAX_ITEMS = 100_000
MAX_TEXT = 20_000


def run(name: str, payload: dict, *, progress: Callable[[str, float], None] | None = None,
        should_stop: Callable[[], bool] | None = None,
        checkpoint: Callable[[dict | None, float | None], None] | None = None) -> dict:
    """Carry out one tool in this process (a run's process); UserError (one sentence) for bad input.
    `checkpoint(result, deadline_s)`: the tool's answer should it not end within `deadline_s` (a step that can hang
    in native code); `(None, None)` withdraws it (process.run_tool ends the process and takes that answer)."""
    if name == "devices":
        from ..machine import devices, probe

        return {"checks": {d: c.to_dict() for d, c in probe.check_all(devices.discover_devices()).items()}}
    if name == "deploy-bench" and isinstance(payload, dict):
        from . import deploybench

        names = payload.get("models")
        if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
            raise UserError("The deploy benchmark needs a list of model names.")
        return deploybench.bench(names, batch_sizes=payload.get("batch_sizes"), devices=payload.get("devices"),
                                 weights=payload.get("weights") or None, compress=payload.get("compress") or (),
                                 progress=progress, should_stop=should_stop)
    if not isinstance(payload, dict) or not isinstance(payload.get("config"), dict):
        raise UserError(f"The {name} tool needs a run configuration.")
    config = RunConfig.from_dict(payload["config"])
    if name == "diagnose":
        from .diagnose import diagnose

        devices = payload.get("devices") or [config.device]
        if not isinstance(devices, list) or not all(isinstance(d, str) for d in devices):
            raise UserError("The diagnosis needs a list of device names.")
        return diagnose(config, devices, layers=bool(payload.get("layers")), after_steps=payload.get("after_steps", 0),
                        progress=progress, should_stop=should_stop, checkpoint=checkpoint)
    if name == "max-batch":
        from . import maxbatch

        return maxbatch.search(config, memory_limit=payload.get("memory_limit"),
                               cap=payload.get("cap", maxbatch.DEFAULT_CAP), progress=progress,
                               should_stop=should_stop, resume=payload.get("resume"), checkpoint=checkpoint)
    if name == "inspect":
        from . import inspection

        return inspection.inspect(config, progress=progress, should_stop=should_stop)
    if name == "export":
        from ..basics.formatting import error_line
        from . import export

        try:
            return export.export(config, str(payload.get("format")), str(payload.get("out")),
                                 weights=payload.get("weights") or None,
                                 precision=str(payload.get("precision", "fp32")),
                                 batch_size=payload.get("batch_size", 1),
                                 model_given=bool(payload.get("model_given", True)),
                                 compress=payload.get("compress") or None,
                                 batch_sizes=payload.get("batch_sizes") or None, progress=progress)
        except UserError:
            raise
        except Exception as exc:  # a library's own failure: one sentence, nothing half-written (export.py)
            raise UserError(f"The export failed ({error_line(exc, 300)}); nothing was written.") from None
    raise UserError(f"Unknown tool {name!r}; the tools are {', '.join(TOOLS)}.")


def ended(name: str, answer, how: str) -> dict:
    """A tool's answer from the checkpoint it sent before a step it might not survive, when its process died or
    passed the checkpoint's deadline (`how`, one sentence): the diagnosis as it stood, how it ended said in place of
    its "{how}"; for max-batch, the probes to resume from in a fresh process, the one it died in failed (`resume`).
    UserError when the tool sends no checkpoints or this one cannot be read."""
    said = how.rstrip(".")
    said = said[:1].lower() + said[1:]
    try:
        answer = plain(answer)
        if not isinstance(answer, dict):
            raise ValueError("not an object")
        if name == "max-batch":
            probes, batch = answer.get("resume"), answer.get("probing")
            _need(isinstance(probes, list) and len(probes) <= 1000 and _whole(batch, False) and batch >= 1)
            for p in probes:
                _check_probe(p)
            died = {"batch_size": batch, "fits": False, "samples_per_s": None, "step_ms": None, "memory": None,
                    "memory_measure": None, "why": "process died", "reason": f"its process died ({said})"}
            return {"resume": [*probes, died], "how": how}
        if name == "diagnose":
            def fill(v):
                if isinstance(v, str):
                    return v.replace("{how}", said)
                if isinstance(v, list):
                    return [fill(x) for x in v]
                return {k: fill(x) for k, x in v.items()} if isinstance(v, dict) else v
            return fill(answer)
    except (ValueError, KeyError, TypeError, AttributeError):
        raise UserError(f"{how} What it had found could not be read.") from None
    raise UserError(how)


def plain(value, depth: int = 0):
    """`value` when it holds only JSON values within the limits; ValueError otherwise."""
    if depth > MAX_DEPTH:
        raise ValueError("nested too deep")
    if value is None or isinstance(value, bool):
        return value
    if isinstance(value, int):
        if abs(value) > 2**63:
            raise ValueError("an integer out of range")
        return value
    if isinstance(value, float):
        return value
    if isinstance(value, str):
        if len(value) > MAX_TEXT:
            raise ValueError("a text too long")
        return value
    if isinstance(value, list):
        if len(value) > MAX_ITEMS:
            raise ValueError("a list too long")
        return [plain(v, depth + 1) for v in value]
    if isinstance(value, dict):
        if len(value) > MAX_ITEMS or not all(isinstance(k, str) for k in value):
            raise ValueError("an object with non-text keys or too many of them")
        return {k: plain(v, depth + 1) for k, v in value.items()}
    raise ValueError(f"a value of type {type(value).__name__}")


def _number(v, allow_none: bool = True) -> bool:
    if v is None:
        return allow_none
    return isinstance(v, (int, float)) and not isinstance(v, bool) and (math.isfinite(v) or math.isinf(v))


def _whole(v, allow_none: bool = True) -> bool:
    if v is None:
        return allow_none
    return isinstance(v, int) and not isinstance(v, bool) and v >= 0


def _need(condition) -> None:
    if not condition:
        raise ValueError("a field of the wrong type")


def _check_max_batch(r: dict) -> None:
    _need(_whole(r.get("largest_batch")) and _whole(r.get("fastest_batch")))
    _need(isinstance(r.get("probes"), list))
    for p in r["probes"]:
        _check_probe(p)
    failed = r.get("smallest_failed")  # results of earlier versions have neither of these
    _need(failed is None or (isinstance(failed, dict) and _whole(failed.get("batch_size"), False)
                             and isinstance(failed.get("why"), str) and isinstance(failed.get("reason"), str)))
    sizes = r.get("sweep_sizes", [])
    _need(isinstance(sizes, list) and all(_whole(b, False) and b >= 1 for b in sizes))
    _need(isinstance(r.get("limit_enforced", ""), str))


def _check_probe(p) -> None:
    _need(isinstance(p, dict) and _whole(p.get("batch_size"), False) and isinstance(p.get("fits"), bool))
    _need(_number(p.get("samples_per_s")) and _whole(p.get("memory")) and isinstance(p.get("reason"), str))


def _check_parity(par) -> None:
    if par is not None:
        _need(isinstance(par, dict) and isinstance(par.get("ok"), bool) and _number(par.get("tolerance"), False))
        _need(isinstance(par.get("precision"), str))
        for key in ("loss_rel_err", "logits_max_rel_err", "worst_rel_err"):  # null: not finite (JSON has no inf)
            _need(_number(par.get(key)))
        _need(isinstance(par.get("grads"), list))
        for g in par["grads"]:
            _need(isinstance(g, dict) and isinstance(g.get("name"), str) and _number(g.get("max_rel_err")))
            _need(_number(g.get("cpu_rel_err")) and isinstance(g.get("ok", True), bool))


def _check_inspect(r: dict) -> None:
    _check_parity(r.get("parity"))
    _need(isinstance(r.get("fallback_ops"), list))
    for o in r["fallback_ops"]:
        _need(isinstance(o, dict) and isinstance(o.get("op"), str) and _whole(o.get("count"), False))
        _need(_number(o.get("share")))
    check = r.get("probe")
    _need(isinstance(check, dict) and isinstance(check.get("ok"), bool) and isinstance(check.get("detail"), str))


def _check_devices(r: dict) -> None:
    _need(isinstance(r.get("checks"), dict))
    for check in r["checks"].values():
        _need(isinstance(check, dict) and isinstance(check.get("ok"), bool) and isinstance(check.get("detail"), str))


def _check_export(r: dict) -> None:
    _need(isinstance(r.get("format"), str) and isinstance(r.get("path"), str) and _whole(r.get("bytes"), False))
    check = r.get("check")
    _need(isinstance(check, dict) and check.get("ok") in (True, False, None) and isinstance(check.get("reason"), str))
    for key in ("max_abs_err", "max_rel_err", "top1_agreement"):
        _need(_number(check.get(key)))
    _need(isinstance(r.get("weights_note"), str) and isinstance(r.get("classes"), list))
    sizes = r.get("batch_sizes")
    _need(sizes is None or (isinstance(sizes, list) and 0 < len(sizes) <= 64 and all(_whole(b, False) for b in sizes)))
    packed = r.get("compression")
    _need(packed is None or (isinstance(packed, dict) and isinstance(packed.get("method"), str)
                             and _whole(packed.get("bytes"), False) and _whole(packed.get("uncompressed_bytes"), False)))


def _check_deploy(r: dict) -> None:
    _need(isinstance(r.get("rows"), list) and isinstance(r.get("models"), list))
    for row in r["rows"]:
        _need(isinstance(row, dict) and all(isinstance(row.get(k), str) for k in ("model", "label", "runtime",
                                                                                   "where", "reason")))
        _need(_whole(row.get("batch_size"), False) and _whole(row.get("repetitions")))
        for key in ("load_s", "convert_s", "first_s", "latency_ms", "latency_iqr_ms", "samples_per_s", "max_abs_err",
                    "max_rel_err", "top1_agreement"):
            _need(_number(row.get(key)))
        _need(row.get("agrees") in (True, False, None) and row.get("stability") in ("stable", "noisy", None))
        for key in ("energy_mj_per_sample", "energy_s"):  # absent in results from before energy was measured
            _need(_number(row.get(key)))
        parts = row.get("energy_parts_mj", {})
        _need(isinstance(parts, dict) and all(isinstance(k, str) and _number(v) for k, v in parts.items()))
        _need(all(isinstance(row.get(k), (str, type(None))) for k in ("energy_measure", "energy_source",
                                                                      "energy_reason")))
    placement = r.get("placement", {})
    _need(isinstance(placement, dict) and all(isinstance(p, dict) for p in placement.values()))
    for p in placement.values():
        _need(isinstance(p.get("reason", ""), str) and isinstance(p.get("sentence", ""), str))
        for key in ("share_of_operations", "share_of_cost"):
            _need(isinstance(p.get(key, {}), dict) and all(_number(v) for v in p.get(key, {}).values()))
        _need(isinstance(p.get("not_on_neural_engine", []), list))
    _need(isinstance(r.get("notes", []), list) and all(isinstance(n, str) for n in r.get("notes", [])))


_DIAGNOSE_MS = ("step_ms", "step_iqr_ms", "data_ms", "data_iqr_ms", "copy_ms", "copy_iqr_ms", "forward_ms",
                "forward_iqr_ms", "backward_ms", "backward_iqr_ms", "optimizer_ms", "optimizer_iqr_ms", "host_ms",
                "host_iqr_ms", "sync_wait_ms")


def _check_layers(found) -> None:
    _need(found is None or isinstance(found, dict))
    if found is None:
        return
    _need(isinstance(found.get("rows"), list) and isinstance(found.get("precision"), str))
    _need(_number(found.get("tolerance"), False) and math.isfinite(found["tolerance"]) and found["tolerance"] > 0)
    for row in [*found["rows"], *(r for r in (found.get("first_wrong"), found.get("first_nonfinite")) if r)]:
        _need(isinstance(row, dict) and isinstance(row.get("module"), str) and isinstance(row.get("type"), str))
        _need(_number(row.get("max_rel_err")) and _number(row.get("cpu_rel_err")))  # null: not finite
        _need(isinstance(row.get("ok"), bool) and isinstance(row.get("finite", True), bool))
        span = row.get("input_range")
        _need(span is None or (isinstance(span, list) and len(span) == 2 and all(_number(v, False) for v in span)))


def _check_diagnose(r: dict) -> None:
    _need(isinstance(r.get("devices"), list) and len(r["devices"]) <= 16 and isinstance(r.get("config"), dict))
    for d in r["devices"]:
        _need(isinstance(d, dict) and isinstance(d.get("device"), str))
        if "error" in d:
            _need(isinstance(d["error"], str))
            continue
        _need(d.get("kind") in ("cpu", "mps", "cuda"))
        for key in _DIAGNOSE_MS:
            _need(_number(d.get(key), False) and math.isfinite(d[key]) and d[key] >= 0)
        _need(d["step_ms"] > 0)
        for key in ("batch_size", "workers"):
            _need(_whole(d.get(key), False))
        for key in ("ops", "sync_count", "distinct_ops"):  # None: the per-operation timing did not end
            _need(_whole(d.get(key)))
        for key in ("op_clock", "op_timing_error"):
            _need(d.get(key) is None or isinstance(d[key], str))
        for key in ("launch_us", "device_ms", "empty_op_us"):  # device_ms: absent from no result of this version
            _need(_number(d.get(key)) and (d.get(key) is None or (math.isfinite(d[key]) and d[key] >= 0)))
        share = d.get("fallback_share")
        _need(share is None or (_number(share, False) and 0 <= share <= 1))
        for o in d.get("sync_ops") or []:
            _need(isinstance(o, dict) and isinstance(o.get("op"), str) and _whole(o.get("count"), False))
        for o in d.get("fallback_ops") or []:
            _need(isinstance(o, dict) and isinstance(o.get("op"), str) and _number(o.get("share")))
        _need(d.get("launch_measure") in ("measured", "estimated", None))
        for key in ("layers", "after_layers"):
            _check_layers(d.get(key))
        for key in ("parity", "after"):
            _check_parity(d.get(key))
        after = d.get("after")
        _need(after is None or _whole(after.get("steps"), False))
        _need(len(d["device"]) <= 64 and d["device"].isprintable())
        _need(isinstance(d.get("memory", {}), dict) and all(_whole(v, False) for v in d.get("memory", {}).values()))
        pre = d.get("preflight", {})
        _need(isinstance(pre, dict) and all(isinstance(x, str) for x in pre.get("refused", [])))
    _need(isinstance(r.get("notes", []), list) and all(isinstance(n, str) for n in r.get("notes", [])))
    _need(isinstance(r.get("stopped", False), bool))


def _check_sweep(r: dict) -> None:
    _need(isinstance(r.get("points"), list) and isinstance(r.get("best"), dict))
    for p in r["points"]:
        _need(isinstance(p, dict) and isinstance(p.get("device"), str) and _whole(p.get("batch_size"), False))
        _need(p["batch_size"] >= 1 and (p.get("samples_per_s") is None or p["samples_per_s"] > 0))
        _need(_number(p.get("samples_per_s")) and _number(p.get("samples_per_s_iqr")) and _number(p.get("step_ms")))
    _need(isinstance(r.get("crossovers", []), list))
    for c in [*(r.get("crossovers") or []), *([r["crossover"]] if r.get("crossover") is not None else [])]:
        _need(isinstance(c, dict) and isinstance(c.get("device"), str) and _whole(c.get("batch_size")))
        _need(c["batch_size"] is None or c["batch_size"] >= 1)
        _need(_number(c.get("speedup_at_largest"), False) and isinstance(c.get("ratios"), list))
    notes = r.get("notes", [])  # sweeps of earlier versions have none
    _need(isinstance(notes, list) and all(isinstance(n, str) for n in notes))


_CHECKS = {"sweep": _check_sweep, "max-batch": _check_max_batch, "inspect": _check_inspect, "devices": _check_devices,
           "export": _check_export, "deploy-bench": _check_deploy, "diagnose": _check_diagnose}
STORED = ("sweep", "max-batch", "inspect", "export", "deploy-bench", "diagnose")  # the kinds the history keeps


def checked(name: str, result) -> dict:
    """`result` of tool `name` as the front ends may read it; UserError when it is not one (a forged answer)."""
    try:
        result = plain(result)
        if not isinstance(result, dict):
            raise ValueError("not an object")
        if name in _CHECKS and name != "devices" and not isinstance(result.get("sentence"), str):
            raise ValueError("no sentence")
        _CHECKS[name](result)
        if name == "inspect":  # the words follow the numbers, on every read (a file cannot make them disagree)
            from .toolview import inspect_sentence

            result["sentence"] = inspect_sentence(result)
        if name == "diagnose":  # each bound and sentence from its figures, on every read
            from .diagnose.view import rederived

            result = rederived(result)
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        why = f"no field {exc}" if isinstance(exc, KeyError) else str(exc)
        raise UserError(f"The {name} tool's process sent a result that could not be read ({why}); it was not "
                        "kept.") from None
    return result
