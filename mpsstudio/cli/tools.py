"""`mpsstudio sweep`, `max-batch` and `inspect`: the measuring tools on the command line.

Each prints a table and one sentence (the engine's), writes `--json FILE` and keeps the result in the history
unless `--no-save`. Exit codes as the rest of the CLI: 0, 1 (the tool ran but found nothing usable), 2 (bad
input), 130 (interrupted). After a comparison with an MPS run, `inspect_after` inspects it for the verdict.
"""

from __future__ import annotations

import sys
from dataclasses import replace

from ..engine.basics.errors import UserError
from ..engine.basics.formatting import printable
from ..engine.basics.formatting import Table
from ..engine.tools.records import SweepResult
from ..engine.tools.records.inspection import InspectResult
from .common import (EXIT_CANNOT_TELL, EXIT_OK, EXIT_RUN_FAILED, available_devices, check_json_path, check_timeout,
                     config_from_args, grid, interrupted)


def _default_device() -> str:
    found = available_devices()
    return next((d for d in found if d != "cpu"), "cpu")


def _checked_device(name: str | None) -> str:
    from ..engine.basics.config import DEVICE_PATTERN

    device = (name or _default_device()).strip().lower()
    if not DEVICE_PATTERN.fullmatch(device):
        raise UserError(f"The device must be cpu, mps, cuda or cuda:N, not {printable(device)!r}.")
    return device


def tool_prelude(args):
    from ..engine.models import registry as models

    check_json_path(args.json)
    check_timeout(args.timeout)
    cfg = config_from_args(args)
    models.get_model_info(cfg.model)
    if cfg.model.endswith(".py"):
        print(f"mpsstudio: {models.user_model_warning(cfg.model)}", file=sys.stderr)
    return cfg


def print_table(table: Table) -> None:
    print(grid(replace(table, rows=[[printable(c) for c in row] for row in table.rows])))


def finish_tool(kind: str, result: dict, args) -> None:
    """The history, then --json: the result is on screen first and in the history whatever happens to the file (a
    --json that cannot be written is one sentence, after the result was kept)."""
    from ..engine.history.runfiles import export_tool_json

    from ..engine.process.ending import holding_signals

    from ..engine.history.store import ToolRecord

    record = ToolRecord(kind=kind, result=result)  # its id goes into --json too: imported again, it is kept once
    with holding_signals():  # a signal while the result is being kept is raised once it is kept
        if not args.no_save:
            save_tool(kind, result, record)
        if args.json:
            try:
                export_tool_json({**result, "kind": kind, "id": record.id, "created_at": record.created_at},
                                 args.json)
            except UserError as exc:
                if args.no_save:
                    raise
                raise UserError(f"{str(exc).rstrip('.')}; the result is kept in the history.") from None


def save_tool(kind: str, result: dict, record=None) -> None:
    from ..engine.history.store import keep_tool
    from ..engine.history.store import ToolRecord

    try:
        note = keep_tool(record or ToolRecord(kind=kind, result=result))
        if note:
            print(f"mpsstudio: {printable(note)}", file=sys.stderr)
    except UserError as exc:
        print(f"mpsstudio: the {kind} result was not kept in the history: {exc}", file=sys.stderr)


def show_progress(message: str, fraction: float) -> None:
    if sys.stderr.isatty():
        print(f"\r\033[K{message}", end="", file=sys.stderr, flush=True)


def cmd_sweep(args) -> int:
    from ..engine import process
    from ..engine.basics.events import Ended
    from ..engine.process import series
    from ..engine.run import session
    from ..engine.tools import sweep, toolview

    cfg = tool_prelude(args)
    if args.mode:
        cfg = cfg.changed(mode=args.mode).validate()
    sizes = sweep.parse_batch_sizes(args.batch_sizes)
    steps = args.steps if args.steps is not None else sweep.DEFAULT_STEPS
    warmup = args.warmup if args.warmup is not None else sweep.DEFAULT_WARMUP
    names = args.devices.split(",") if args.devices is not None else available_devices()
    plan = session.plan(cfg, names)
    for line in plan.skipped:
        print(line, file=sys.stderr)
    for line in plan.notes:
        print(f"mpsstudio: {line}", file=sys.stderr)
    devices = [c.device for c in plan.configs]

    stopped: list[KeyboardInterrupt] = []  # Ctrl-C, SIGTERM, SIGHUP: the points so far are kept, as a sweep

    def point(c):
        ended = []
        try:
            return process.run_point(c, progress=show_progress, timeout_s=args.timeout,
                                     on_event=lambda e: ended.append(e.result) if isinstance(e, Ended) else None)
        except KeyboardInterrupt as exc:  # the point was kept as cancelled (its Ended event) and its process ended
            stopped.append(exc)
            return ended[-1] if ended else None
    result = series.sweep(cfg, devices, sizes, steps=steps, warmup=warmup, point=point,
                          should_stop=lambda: bool(stopped), say=lambda line: print(line, file=sys.stderr, flush=True))
    print_table(toolview.sweep_table(result))
    finish_tool("sweep", result, args)
    print(f"\n{printable(result['sentence'])}")
    if stopped:
        code, words = interrupted(stopped[0])
        print(f"mpsstudio: {words}; the points measured so far are kept as a sweep (the interrupted one as "
              "cancelled).", file=sys.stderr)
        return code
    return EXIT_OK if SweepResult.of(result).best else EXIT_RUN_FAILED


def run_one_tool(kind: str, cfg, args, doing: str, **payload) -> dict:
    """One tool in a run process, with a progress line on a terminal; UserError (one sentence) when it fails."""
    from ..engine import process

    python = payload.pop("python", None)  # where the tool runs, not what it is given: checked before it starts
    if python:
        from ..engine.process import interpreter

        why = interpreter.why_not(python)
        if why:
            raise UserError(why)
    print(f"{doing}...", file=sys.stderr)
    try:
        return process.run_tool(kind, {**({"config": cfg.to_dict()} if cfg is not None else {}), **payload},
                                progress=show_progress, timeout_s=args.timeout,
                                mps_fallback=cfg.mps_fallback if cfg is not None else True, python=python)
    finally:
        if sys.stderr.isatty():
            print("\r\033[K", end="", file=sys.stderr)


def cmd_tool(args) -> int:
    """A tool of the engine's table (tools/registry.TABLE) without a command of its own here, the largest-batch
    search among them: its setup and its options as its row says, its section's tables, --json and the history,
    its sentence; on Ctrl-C (or SIGTERM, SIGHUP) what it found so far is kept."""
    from ..engine.tools import registry

    tool = registry.TOOLS[args.command]
    names = {option.name for option in tool.options}
    if tool.setup:
        cfg = tool_prelude(args)
        if "device" in names:
            cfg = cfg.with_device(_checked_device(args.device))
        doing = tool.doing.format(model=cfg.model, device=cfg.device)
    else:  # a tool of no setup (a check of the devices)
        check_json_path(args.json, [args.baseline] if getattr(args, "baseline", None) else [])
        check_timeout(args.timeout)
        cfg, doing = None, tool.doing
    baseline = read_baseline(tool.name, args) if tool.baseline else None  # before anything runs
    values = {name: getattr(args, name) for name in names - {"baseline", "fail_over"}}
    payload = tool.call("arguments", values) if tool.arguments else {}
    try:
        result, stopped = run_one_tool(tool.name, cfg, args, doing or tool.title, **payload), None
    except KeyboardInterrupt as exc:
        partial = getattr(exc, "partial", None)  # what the tool found before it stopped (process/asks.py)
        if partial is None:
            raise
        result, stopped = partial, exc
    from ..engine.history.earlier import beside_earlier

    if baseline is not None:  # the comparison asked for, in place of the one with the last of its kind here
        result = tool.call("baseline", result, *baseline)
        result = tool.call("rederived", result) if tool.rederived else result
    else:
        result = beside_earlier(tool.name, result)  # what changed since the last of its kind here (a check)
    tables, notes = (tool.call("printed", result) if tool.printed else
                     (tool.call("section", result)[0] if tool.section else [], []))
    code = report(tool.name, result, tables, args, stopped, tool.kept, notes, note_word="")
    if code is not None:
        return code
    if tool.failed and tool.call("failed", result):
        return EXIT_RUN_FAILED
    verdict = (result.get("baseline") or {}).get("verdict") if baseline is not None else None
    return {"a real change": EXIT_RUN_FAILED, "cannot tell": EXIT_CANNOT_TELL}.get(verdict or "", EXIT_OK)


def read_baseline(kind: str, args) -> tuple[dict, str, float] | None:
    """(the result, its file's name, --fail-over) of --baseline FILE: an earlier result of this tool's, read and
    checked as an import is; None without it; UserError (one sentence) for a file that is not one."""
    from pathlib import Path

    from ..engine.history.runfiles import import_tool_json
    from .common import fail_over

    if args.baseline is None:
        if args.fail_over is not None:
            raise UserError("--fail-over is the threshold of a comparison with a baseline: give --baseline FILE too.")
        return None
    if not args.baseline.strip():
        raise UserError(f"--baseline needs the JSON file of an earlier {kind} (its --json).")
    threshold = fail_over(args.fail_over)
    record = import_tool_json(Path(args.baseline).expanduser())
    if record.kind != kind:
        raise UserError(f"{printable(Path(args.baseline).name)[:80]} holds a {record.kind} result, not a {kind}; give "
                        f"the --json of an earlier {kind}.")
    return {**record.result, "created_at": record.created_at}, Path(args.baseline).name, threshold


def report(kind: str, result: dict, tables: Table | list[Table], args, stopped: KeyboardInterrupt | None, kept: str,
           notes: list[str] | None = None, note_word: str = "note: ") -> int | None:
    """A tool's tables (each legend under its table), notes, --json and history, then its sentence; the exit status
    when it was stopped (what it found is kept), None otherwise."""
    for i, table in enumerate(tables if isinstance(tables, list) else [tables]):
        if i:
            print()
        print_table(table)
        if table.legend:
            print(printable(table.legend))
    for note in notes or []:
        print(f"{note_word}{printable(note)}")
    finish_tool(kind, result, args)
    print(f"\n{printable(result['sentence'])}")
    if stopped is None:
        return None
    code, words = interrupted(stopped)
    print(f"mpsstudio: {words}; {kept} is kept.", file=sys.stderr)
    return code


def cmd_inspect(args) -> int:
    from ..engine.tools import toolview

    cfg = tool_prelude(args).with_device(_checked_device(args.device))
    result = run_one_tool("inspect", cfg, args, f"inspecting {cfg.model} on {cfg.device}")
    r = InspectResult.of(result)
    print(f"functional check: {'passed' if r.probe.ok else 'FAILED'} ({printable(r.probe.detail)})")
    if r.parity:
        par, recorded = r.parity, r.ops_batch_size
        print(f"\nparity with the CPU in float64 ({par.precision}, tolerance {par.tolerance:.0e}, on a fixed "
              f"parity batch of {par.batch_size or '?'} samples"
              + (f"; the recorded training step used batch {recorded:,}" if recorded is not None else "") + "):")
        print_table(toolview.parity_table(r))
    if r.fallback_ops:
        print()
        print_table(toolview.fallback_table(r))
    finish_tool("inspect", result, args)
    print(f"\n{printable(r.sentence)}")
    bad = not r.probe.ok or (r.parity is not None and not r.parity.ok)
    return EXIT_RUN_FAILED if bad else EXIT_OK


def inspect_after(results, *, save: bool, timeout_s: float | None = None) -> list[dict]:
    """After a comparison: inspect each finished MPS run's setup (CPU fallbacks, parity with the CPU), in a run
    process, so the verdict can name what it found. A failed inspection is one line; the runs stay as they are."""
    from ..engine import process

    found, seen = [], set()
    for r in results:
        key = (r.config.device, r.config.comparison_key())
        if r.status != "finished" or r.config.device != "mps" or r.config.framework != "torch" or key in seen:
            continue
        seen.add(key)
        print(f"inspecting {r.config.model} on {r.config.device} (CPU fallbacks, parity; --no-inspect skips it)...",
              file=sys.stderr)
        try:
            result = process.run_tool("inspect", {"config": r.config.to_dict()}, timeout_s=timeout_s,
                                        mps_fallback=r.config.mps_fallback)
        except UserError as exc:
            print(f"mpsstudio: the inspection after the {r.config.device} run did not finish: {exc}", file=sys.stderr)
            continue
        found.append(result)
        if save:
            save_tool("inspect", result)
    return found
