"""The measuring tools, one object each, in one table: its name and title, where it runs, whether the history
keeps its results, and the functions of its own module that carry it out in a run process, finish its answer from
a checkpoint, and re-derive its words on every read. `run`, `ended` and `checked` read the table; adding a tool is
its module (and its record under records/) plus one row here (docs/architecture.md, "Adding a tool").

`run` executes in the child; `checked` in the parent, on a dict that came over the pipe from a process that ran
a user's model, an imported file or a stored row: its kind's declared shape (records/: only plain JSON values,
within size limits, every field a view reads of the right type and range). This module imports no torch (the parent
may not have loaded it): a tool's functions are named here and imported when they are called.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ..basics.config import RunConfig
from ..basics.errors import UserError

Progress = Callable[[str, float], None]


@dataclass(frozen=True)
class Tool:
    """One measuring tool. The functions are "module:function" under engine/tools, imported when called:
    - `run(config, payload, *, progress, should_stop, checkpoint) -> dict`: carried out in a run process
      (process.run_tool); config None for a tool that takes none (`needs_config` False). None: the tool runs as a
      series of runs or points instead (process/series.py: a sweep, a tune).
    - `ended(answer, how, said) -> dict`: its answer from the checkpoint it sent before a step it might not survive.
    - `rederived(result) -> dict`: its words (and judgements) from its numbers, on every read of a stored result."""

    name: str
    title: str
    menu: str = ""  # the window's Tools menu item ("": none), in the table's order
    shortcut: str = ""  # its key ("Ctrl+Shift+B": ⌘⇧B on a Mac)
    stored: bool = True  # the history keeps its results (records.SHAPES declares them)
    run: str | None = None
    needs_config: bool = True
    ended: str | None = None
    rederived: str | None = None

    def call(self, which: str, *args: Any, **kwargs: Any) -> Any:
        target = getattr(self, which)
        module, _, function = target.partition(":")
        return getattr(importlib.import_module(f"{__package__}.{module}"), function)(*args, **kwargs)


TABLE = (
    Tool("sweep", "Batch-size sweep", "Batch-Size Sweep…", "Ctrl+Shift+B"),
    Tool("max-batch", "Largest batch", "Find Largest Batch…", "Ctrl+Shift+M", run="maxbatch:run_tool",
         ended="maxbatch:from_checkpoint"),
    Tool("inspect", "Inspection", "Inspect Model (CPU Fallback, Parity)…", "Ctrl+Shift+I", run="inspection:run_tool",
         rederived="toolview:inspect_rederived"),
    Tool("diagnose", "Diagnosis", "Diagnose (Why Slow, Memory, Wrong Layer)…", "Ctrl+Shift+G",
         run="diagnose:run_tool", ended="diagnose:from_checkpoint", rederived="diagnose.view:rederived"),
    Tool("deploy-bench", "Deploy benchmark", "Deploy Benchmark (PyTorch, Core ML)…", "Ctrl+Shift+D",
         run="deploybench:run_tool", needs_config=False, ended="deploybench:from_checkpoint"),
    Tool("tune", "Best settings", "Best Settings (Precision, Layout, Batch)…", "Ctrl+Shift+T",
         rederived="tune.report:rederived_checked"),
    Tool("export", "Export", "Export Model…", "Ctrl+Shift+E", run="export:run_tool"),
    Tool("devices", "Device check", stored=False, run="inspection:check_devices", needs_config=False),
)
TOOLS = {tool.name: tool for tool in TABLE}
IN_A_PROCESS = tuple(t.name for t in TABLE if t.run)  # what process.run_tool carries out
STORED = tuple(t.name for t in TABLE if t.stored)  # the kinds the history keeps
TITLES = {t.name: t.title for t in TABLE}


def run(name: str, payload: dict, *, progress: Progress | None = None,
        should_stop: Callable[[], bool] | None = None,
        checkpoint: Callable[[dict | None, float | None], None] | None = None) -> dict:
    """Carry out one tool in this process (a run's process); UserError (one sentence) for bad input.
    `checkpoint(result, deadline_s)`: the tool's answer should it not end within `deadline_s` (a step that can hang
    in native code); `(None, None)` withdraws it (process.run_tool ends the process and takes that answer)."""
    tool = TOOLS.get(name)
    if tool is None or tool.run is None:
        raise UserError(f"Unknown tool {str(name)[:40]!r}; the tools are {', '.join(IN_A_PROCESS)}.")
    if not isinstance(payload, dict):
        raise UserError(f"The {name} tool needs its settings.")
    config = None
    if tool.needs_config:
        if not isinstance(payload.get("config"), dict):
            raise UserError(f"The {name} tool needs a run configuration.")
        config = RunConfig.from_dict(payload["config"])
    return tool.call("run", config, payload, progress=progress, should_stop=should_stop, checkpoint=checkpoint)


def ended(name: str, answer, how: str) -> dict:
    """A tool's answer from the checkpoint it sent before a step it might not survive, when its process died or
    passed the checkpoint's deadline (`how`, one sentence): what its module's `ended` makes of it (the diagnosis as
    it stood, with how it ended in place of its "{how}"; for max-batch, the probes to resume from in a fresh process,
    the one it died in failed: `resume`). UserError when the tool sends no checkpoints or this one cannot be read."""
    from ..basics.shape import ShapeError

    tool = TOOLS.get(name)
    if tool is None or tool.ended is None:
        raise UserError(how)
    said = how.rstrip(".")
    try:
        return tool.call("ended", answer, how, said[:1].lower() + said[1:])
    except ShapeError:
        raise UserError(f"{how} What it had found could not be read.") from None


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
    tool = TOOLS[name]
    return tool.call("rederived", result) if tool.rederived else result


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
