"""`mpsstudio diagnose` (issue 28): why a run is slow, where its memory goes, and which layer computes wrong.

For each device of a config, in a run's own process (process.run_tool) and apart from any measured run:
- the step's anatomy and its bound (anatomy.py; analysis/bottleneck.py names the bound in a word and a sentence);
- the device's memory after the diagnostic steps (the tensors, the driver's or reserved memory, the process);
- the preflight MPS would make (run/preflight.py): what it cannot hold, and on MPS which operations have no kernel;
- the whole-model parity against float64 on the CPU, and, when it fails or when asked (`layers`), the first leaf
  module whose output is beyond tolerance (layers.py); `after_steps`: the parity again on the model trained that
  many steps on the device.
The result is plain JSON, kept in the history as a tool result (kind "diagnose"), exported and imported like the
others; its sentences are re-derived from its numbers whenever it is read (registry.checked).
"""

from __future__ import annotations

from collections.abc import Callable

from ...basics.config import RunConfig
from ...basics.errors import UserError
from ...basics.formatting import error_line

MAX_AFTER_STEPS = 100_000


def diagnose(config: RunConfig, devices: list[str], *, layers: bool = False, after_steps: int = 0,
             progress: Callable[[str, float], None] | None = None,
             should_stop: Callable[[], bool] | None = None,
             checkpoint: Callable[[dict | None, float | None], None] | None = None) -> dict:
    """The diagnosis of `config` on each of `devices` (see the module docstring); UserError for bad input.
    `checkpoint(result, deadline_s)`: before a device's per-operation timing, the diagnosis as it stands if that
    timing never ends (the run process's parent ends the process after `deadline_s` and keeps it); `(None, None)`
    when it has ended."""
    from ...run.setup import load_data
    from ..toolkit import Stopped, tool_env

    say = progress or (lambda message, fraction: None)
    stop = should_stop or (lambda: False)
    if not devices:
        raise UserError("Name at least one device to diagnose.")
    if isinstance(after_steps, bool) or not isinstance(after_steps, int) or not 0 <= after_steps <= MAX_AFTER_STEPS:
        raise UserError(f"--after-steps must be a whole number from 0 to {MAX_AFTER_STEPS:,}.")
    configs = [config.with_device(d) for d in devices]
    for cfg in configs:
        cfg.check_runs_here()
    say("loading the data", 0.0)
    data = load_data(configs[0])
    out: dict = {"tool": "diagnose", "config": configs[0].to_dict(), "devices": [], "stopped": False,
                 "layers_asked": bool(layers), "after_steps": after_steps, "notes": []}
    from ...machine import devices as machine
    from .view import sentence

    def keep_if_ended(i: int):
        """The checkpoint of device i: the diagnosis so far with its anatomy, the later devices not diagnosed."""
        def keep(anatomy: dict | None, deadline_s: float | None, why: str) -> None:
            if checkpoint is None:
                return
            if anatomy is None:
                checkpoint(None, None)
                return
            rest = [{"device": c.device, "error": f"not diagnosed: {why}"} for c in configs[i + 1:]]
            whole = {**out, "devices": [*out["devices"], anatomy, *rest], "notes": [*out["notes"], why[0].upper()
                                                                                     + why[1:] + "."]}
            whole["env"] = tool_env(machine.resolve_device(anatomy["device"]))
            whole["sentence"] = sentence(whole)
            checkpoint(whole, deadline_s)
        return keep

    for i, cfg in enumerate(configs):
        span = (i / len(configs), (i + 1) / len(configs))
        try:
            out["devices"].append(_one(cfg, data, layers, after_steps, say, stop, span, keep_if_ended(i)))
        except Stopped:
            out["stopped"] = True
            break
        except KeyboardInterrupt:
            raise
        except BaseException as exc:  # this device cannot run it (unavailable, a dtype MPS refuses, the model's own
            # error, out of memory): the sentence a run would get, and the other devices go on
            from ...run.failures import outcome

            out["devices"].append({"device": cfg.device, "error": outcome(exc, cfg)[1] or error_line(exc, 200)})
        if stop():
            out["stopped"] = True
            break
    ran = next((d for d in out["devices"] if "error" not in d), None)
    out["env"] = tool_env(machine.resolve_device(ran["device"] if ran else "cpu"))
    out["sentence"] = sentence(out)
    return out


def _one(cfg: RunConfig, data, layers: bool, after_steps: int, say, stop, span, checkpoint) -> dict:
    import copy

    import torch

    from ...run import preflight
    from ..opcheck import parity_of
    from ..toolkit import Setup, Stopped, build, real_batch
    from . import anatomy, layers as layer_check

    result, p = anatomy.measure(cfg, data, progress=say, stop=stop, span=span, checkpoint=checkpoint)
    dev = p.device
    result["memory"] = {k: v for k, v in dev.memory().items() if isinstance(v, int)}
    result["memory_measure"] = "allocator" if dev.kind != "cpu" else "process"
    # on MPS the run's setup made the preflight (its forecast of operations MPS lacks): kept, not made again
    result["preflight"] = {**result.get("preflight", {}), "refused": preflight.refused(p.model, data),
                           "cast": cfg.cast_float64}
    if stop():
        raise Stopped()
    setup = Setup(cfg, dev, p.tdev, data, p.model_spec, {}, p.steps.feed)
    if setup.feed.made or setup.feed.own_loss:
        from ..toolkit import not_for_own_feed

        words = not_for_own_feed(cfg.model)
        result["parity_error"] = words[0].lower() + words[1:].rstrip(".")
        return result
    x, y = real_batch(setup, 8, torch.device("cpu"))
    lo, hi = span
    say(f"{cfg.device}: parity with the CPU (float64)", lo + (hi - lo) * 0.9)
    fresh = build(setup)  # the model as built, before the diagnostic steps trained it
    # the CPU in fp16/bf16 has no other arithmetic to be judged by (its own error is the error): only NaN and Inf
    judge = _finite_only if dev.kind == "cpu" and cfg.precision in ("fp16", "bf16") else (lambda found: found)
    try:
        result["parity"] = judge(parity_of(fresh, x, y, p.tdev, cfg.precision or "fp32", cfg.tf32, dev.synchronize, dev.kind))
        if layers or not result["parity"]["ok"]:
            result["layers"] = judge(layer_check.first_wrong_layer(fresh, x, p.tdev, cfg.precision or "fp32", cfg.tf32,
                                                                   dev.kind))
        if after_steps and cfg.mode == "train":
            say(f"{cfg.device}: training {after_steps:,} steps, then parity again", lo + (hi - lo) * 0.95)
            trained = _train(p, after_steps, stop)
            result["after"] = {"steps": trained, **judge(layer_check.parity_after_training(
                p.model, x, y, p.tdev, cfg.precision or "fp32", cfg.tf32, dev.synchronize, dev.kind))}
            if not result["after"]["ok"]:
                base = copy.deepcopy(p.model).to("cpu")
                result["after_layers"] = judge(layer_check.first_wrong_layer(base, x, p.tdev, cfg.precision or "fp32", cfg.tf32,
                                                                             dev.kind))
    except Stopped:
        raise
    except UserError:
        raise
    except Exception as exc:  # a model whose parity cannot be computed (no float64 kernel for an op, say)
        result["parity_error"] = f"the parity check could not run ({error_line(exc, 200)})"
    return result


def _finite_only(found: dict) -> dict:
    """A parity or layer check judged by finiteness alone (marked `judged: "finite only"`): what the CPU computes in
    reduced precision differs from float64 by that precision's own rounding, which is no fault."""
    import math

    def finite(v) -> bool:
        return v is not None and math.isfinite(v)
    found = {**found, "judged": "finite only"}
    if "rows" in found:  # a layer check
        rows = [{**r, "ok": r.get("finite", True)} for r in found["rows"]]
        return {**found, "rows": rows, "first_wrong": None, "ok": found.get("first_nonfinite") is None}
    grads = [{**g, "ok": finite(g.get("max_rel_err"))} for g in found.get("grads") or []]
    loss_ok, logits_ok = finite(found.get("loss_rel_err")), finite(found.get("logits_max_rel_err"))
    return {**found, "grads": grads, "loss_ok": loss_ok, "logits_ok": logits_ok,
            "ok": loss_ok and logits_ok and all(g["ok"] for g in grads)}


def _train(p, steps: int, stop) -> int:
    """`steps` more training steps of the diagnosed model on its device, as a run takes them; how many ran."""
    from ..toolkit import Stopped

    step_fn = p.steps.choose()
    p.model.train(True)
    done = 0
    source = p.train
    while done < steps:
        for batch in source.epoch():
            step_fn(*batch)
            done += 1
            if done >= steps:
                break
            if done % 50 == 0 and stop():
                raise Stopped()
    p.device.synchronize()
    return done


def run_tool(config: RunConfig, payload: dict, *, progress=None, should_stop=None, checkpoint=None) -> dict:
    """The diagnosis as the tool table carries it out in a run process (tools/registry.py)."""
    names = payload.get("devices") or [config.device]
    if not isinstance(names, list) or not all(isinstance(d, str) for d in names):
        raise UserError("The diagnosis needs a list of device names.")
    return diagnose(config, names, layers=bool(payload.get("layers")), after_steps=payload.get("after_steps", 0),
                    progress=progress, should_stop=should_stop, checkpoint=checkpoint)


def from_checkpoint(answer, how: str, said: str) -> dict:
    """The diagnosis as it stood when its process died, how it ended (`said`) in place of its "{how}"."""
    from ...basics.shape import Obj

    def fill(v):
        if isinstance(v, str):
            return v.replace("{how}", said)
        if isinstance(v, list):
            return [fill(x) for x in v]
        return {k: fill(x) for k, x in v.items()} if isinstance(v, dict) else v
    return fill(Obj().check(answer))
