"""The measuring tools a run process can carry out (process.run_tool), and the check of what it sends back.

`run` executes in the child; `checked` in the parent, on a dict that came over the pipe from a process that ran
a user's model, an imported file or a stored row: its kind's declared shape (records/: only plain JSON values,
within size limits, every field a view reads of the right type and range). This module imports no torch (the parent
may not have loaded it).
"""

from __future__ import annotations

from collections.abc import Callable

from ..basics.config import RunConfig
from ..basics.errors import UserError

TOOLS = ("max-batch", "inspect", "devices", "export", "deploy-bench", "diagnose")


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
                                 progress=progress, should_stop=should_stop, checkpoint=checkpoint)
    if not isinstance(payload, dict) or not isinstance(payload.get("config"), dict):
        raise UserError(f"The {name} tool needs a run configuration.")
    config = RunConfig.from_dict(payload["config"])
    if name == "diagnose":
        from .diagnose import diagnose

        names = payload.get("devices") or [config.device]
        if not isinstance(names, list) or not all(isinstance(d, str) for d in names):
            raise UserError("The diagnosis needs a list of device names.")
        return diagnose(config, names, layers=bool(payload.get("layers")), after_steps=payload.get("after_steps", 0),
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
                                 batch_sizes=payload.get("batch_sizes") or None, progress=progress,
                                 staged=bool(payload.get("staged")))
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
    from ..basics.shape import List, Obj, ShapeError
    from .records import BATCH, Probe

    try:
        if name == "max-batch":
            answer = Obj(need={"resume": List(Probe.declared_shape(), max=1_000), "probing": BATCH}).check(answer)
            probes, batch = answer["resume"], answer["probing"]
            died = {"batch_size": batch, "fits": False, "samples_per_s": None, "step_ms": None, "memory": None,
                    "memory_measure": None, "why": "process died", "reason": f"its process died ({said})"}
            return {"resume": [*probes, died], "how": how}
        if name == "deploy-bench":  # its checkpoint is the answer so far, a stopped benchmark's
            return Obj().check(answer)
        if name == "diagnose":
            def fill(v):
                if isinstance(v, str):
                    return v.replace("{how}", said)
                if isinstance(v, list):
                    return [fill(x) for x in v]
                return {k: fill(x) for k, x in v.items()} if isinstance(v, dict) else v
            return fill(Obj().check(answer))
    except ShapeError:
        raise UserError(f"{how} What it had found could not be read.") from None
    raise UserError(how)


STORED = ("sweep", "max-batch", "inspect", "export", "deploy-bench", "diagnose", "tune")  # the kinds the history keeps


def validated(name: str, result) -> dict:
    """`result` of tool `name` as its declared shape (records/) has it, with the words re-derived from its numbers;
    ShapeError naming the field otherwise."""
    from ..basics.shape import ShapeError
    from .records import SHAPES

    if name not in SHAPES:
        raise ShapeError("", f"is of a kind no tool makes ({name[:40]!r})")
    try:
        result = SHAPES[name].check(result)
    except RecursionError:
        raise ShapeError("", "is nested too deep") from None
    if name == "inspect":  # the words follow the numbers, on every read (a file cannot make them disagree)
        from .toolview import inspect_sentence

        result["sentence"] = inspect_sentence(result)
    if name == "tune":  # rows that agree, then the recommendation and its sentence from their numbers, on every read
        from .tune.report import contradiction, rederived as tune_rederived

        found = contradiction(result)
        if found:
            raise ShapeError(*found)
        result = tune_rederived(result)
    if name == "diagnose":  # each bound and sentence from its figures, on every read
        from .diagnose.view import rederived

        result = rederived(result)
    return result


def checked(name: str, result, where: str | None = None) -> dict:
    """`result` of tool `name` as the front ends may read it (validated); UserError naming the field when it is not.
    `where` says where it came from ("The file x.json"); by default the tool's process."""
    from ..basics.shape import ShapeError

    try:
        return validated(name, result)
    except ShapeError as exc:
        source, verb = (where, "holds") if where else (f"The {name} tool's process", "sent")
        article = "an" if name[:1] in "aeiou" else "a"
        raise UserError(f"{source} {verb} {article} {name} result whose {exc.path or 'content'} {exc.why}, so it was "
                        "not kept.") from None
