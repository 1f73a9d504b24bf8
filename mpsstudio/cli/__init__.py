"""`mpsstudio <subcommand>`: the headless front end over the same engine the window uses.

Exit codes: 0 success, 1 a run failed, 2 bad input (one line on stderr, never a traceback), 130 interrupted (Ctrl-C),
143 / 129 stopped by SIGTERM / SIGHUP (handled as Ctrl-C: the run in progress kept as cancelled).
(`mpsstudio` with no subcommand opens the window: see launcher.py.) One module per group of subcommands: bench
(bench, demo, run), launch (launch-benchmark), tools (sweep, max-batch, inspect), tune, deploy (export, deploy-bench),
diagnose, history, report, info (devices, models, datasets, doctor); what they share is in common (arguments to a
config, tables, exit codes) and runs (the runs a subcommand makes: a progress line each, kept as each ends), the
arguments in parser.
"""

from __future__ import annotations

import sys
from typing import Sequence

from ..engine.basics.errors import HistoryBusy, UserError
from ..engine.basics.formatting import printable
from ..engine.tools.registry import TABLE
from . import bench, deploy, diagnose, history, info, launch, report, tools, tune
from .bench import model_paths
from .common import (EXIT_BAD_INPUT, EXIT_BUSY, EXIT_CANNOT_TELL, EXIT_INTERRUPTED, EXIT_OK, EXIT_RUN_FAILED, fit_tables_to_terminal, format_table,
                     interrupted)
from .parser import build_parser
from .runs import keep_interrupted_runs

__all__ = ["EXIT_BAD_INPUT", "EXIT_CANNOT_TELL", "EXIT_INTERRUPTED", "EXIT_OK", "EXIT_RUN_FAILED", "build_parser", "format_table", "main",
           "model_paths"]

OWN_COMMANDS = {
    "bench": bench.cmd_bench, "demo": bench.cmd_demo, "launch-benchmark": launch.cmd_launch_benchmark,
    "sweep": tools.cmd_sweep, "inspect": tools.cmd_inspect,
    "history": history.cmd_history, "devices": info.cmd_devices, "models": info.cmd_models,
    "datasets": info.cmd_datasets, "doctor": info.cmd_doctor, "export": deploy.cmd_export,
    "deploy-bench": deploy.cmd_deploy_bench, "diagnose": diagnose.cmd_diagnose, "run": bench.cmd_run,
    "tune": tune.cmd_tune, "report": report.cmd_report,
}
# A tool with a subcommand and no command of its own above is the CLI's generic one (its row says how: max-batch).
COMMANDS = {**OWN_COMMANDS, **{t.name: tools.cmd_tool for t in TABLE if t.help and t.name not in OWN_COMMANDS}}


KEEPS_RUNS = ("bench", "demo", "launch-benchmark", "history", "run")  # these first keep what a killed front end left


def main(argv: Sequence[str] | None = None) -> int:
    """Run one subcommand; bad input is one line on stderr and exit 2."""
    argv = list(sys.argv[1:] if argv is None else argv)
    script_args: list[str] = []
    if argv[:1] == ["run"] and "--" in argv:  # `mpsstudio run SCRIPT [options] -- the script's own arguments`
        at = argv.index("--")
        argv, script_args = argv[:at], argv[at + 1:]
    try:
        args = build_parser().parse_args(argv)
    except SystemExit as exc:  # --help, or a bad argument already reported in one line
        return int(exc.code or 0)
    args.script_args = script_args
    fit_tables_to_terminal(getattr(args, "wide", False))
    if args.command is None:
        print("mpsstudio: name a subcommand (see 'mpsstudio --help'), or run `mpsstudio` alone to open the window.",
              file=sys.stderr)
        return EXIT_BAD_INPUT
    from ..engine.process.ending import ending_signals

    try:
        with ending_signals():  # SIGTERM / SIGHUP: as Ctrl-C, the run in progress kept
            if args.command in KEEPS_RUNS and not getattr(args, "no_save", False):
                keep_interrupted_runs()
            return COMMANDS[args.command](args)
    except HistoryBusy as exc:  # not the input's fault: another program holds the history; try again later
        print(f"mpsstudio: {printable(exc)}", file=sys.stderr)
        return EXIT_BUSY
    except UserError as exc:
        print(f"mpsstudio: {printable(exc)}", file=sys.stderr)  # a name from a folder may hold escape codes
        return EXIT_BAD_INPUT
    except KeyboardInterrupt as exc:
        code, words = interrupted(exc)
        print(f"mpsstudio: {words}.", file=sys.stderr)
        return code
