"""`mpsstudio tune`: the best settings for this model on these devices (engine tools/tune/), on the command line:
the ranked table, the recommendation with its interval, `--json FILE`, and the result kept in the history."""

from __future__ import annotations

import os
import sys

from ..engine.basics.formatting import plural, printable
from .common import EXIT_OK, EXIT_RUN_FAILED, available_devices, interrupted
from .tools import finish_tool, tool_prelude, print_table, show_progress


def train_samples(cfg) -> int | None:
    from ..engine.data.datasets import list_datasets
    from ..engine.run.guards import train_samples as of_config

    info = next((d for d in list_datasets() if d.name == str(cfg.dataset).lower()), None)
    return of_config(cfg, info)


def grid_of(args, cfg, devices: list[str]):
    """The candidates the options describe (the window's sheet gives the same options to tune.plan)."""
    from ..engine.tools import sweep, tune

    return tune.plan(cfg, devices, batch_sizes=sweep.parse_batch_sizes(args.batch_sizes),
                     precisions=tune.parse_precisions(args.precisions), channels_last=args.try_channels_last,
                     compile=args.try_compile,
                     threads=tune.parse_threads(args.thread_counts),
                     train_samples=train_samples(cfg), cores=os.cpu_count(),
                     tf32=tune.parse_tf32(getattr(args, "tf32_values", None)))


def cmd_tune(args) -> int:
    from ..engine.process import series
    from ..engine.run import session
    from ..engine.tools import toolview, tune

    cfg = tool_prelude(args)
    budget_s = tune.parse_budget(args.budget)
    rounds = tune.parse_rounds(args.rounds)
    steps = args.steps if args.steps is not None else tune.DEFAULT_STEPS
    warmup = args.warmup if args.warmup is not None else tune.DEFAULT_WARMUP
    tune.parse_threads(args.thread_counts)  # before any work: one sentence for a bad list
    tune.parse_tf32(args.tf32_values)
    names = args.devices.split(",") if args.devices is not None else available_devices()
    plan = session.plan(cfg, names)
    for line in plan.skipped:
        print(line, file=sys.stderr)
    g = grid_of(args, cfg, [c.device for c in plan.configs])
    runnable = len([c for c in g.candidates if c.key not in g.refused])
    print(f"tuning {cfg.model} on {', '.join(g.baselines)}: {plural(runnable, 'candidate')} ({len(g.refused)} "
          f"cannot run here), within {budget_s / 60:g} minute{'' if budget_s == 60 else 's'}",
          file=sys.stderr)
    stopped: list[KeyboardInterrupt] = []  # Ctrl-C, SIGTERM, SIGHUP: what the tune measured so far is kept

    def check_failed(c, sentence: str) -> None:
        print(f"mpsstudio: the parity check of {c.precision} on {c.device} did not run: {sentence}", file=sys.stderr)
    result = series.tune(cfg, g, budget_s=budget_s, steps=steps, warmup=warmup, max_rounds=rounds,
                         should_stop=lambda: bool(stopped), say=lambda line: print(line, file=sys.stderr, flush=True),
                         point_kwargs={"progress": show_progress, "timeout_s": min(args.timeout or float("inf"),
                                                                                max(60.0, budget_s))},
                         tool_kwargs={"timeout_s": args.timeout}, on_check_failed=check_failed,
                         interrupted=stopped.append)
    print_table(toolview.tune_table(result))
    print(f"{toolview.TUNE_LEGEND}\n\n{printable(result['sentence'])}")  # on screen first, whatever the files do
    finish_tool("tune", result, args)
    if stopped:
        code, words = interrupted(stopped[0])
        print(f"mpsstudio: {words}; what the tune measured so far is kept.", file=sys.stderr)
        return code
    measured = any(r["status"] == "measured" for r in result["candidates"])
    return EXIT_OK if measured else EXIT_RUN_FAILED
