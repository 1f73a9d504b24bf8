"""`mpsstudio history`: the stored runs and their comparisons; import, delete, notes, a run's loss curve as CSV,
JSON export, and recovery of a damaged history."""

from __future__ import annotations

import sys

from ..engine.basics.errors import UserError
from ..engine.basics.formatting import plural, printable
from .common import EXIT_OK, check_json_path, format_table


def cmd_history(args) -> int:
    from ..engine.history import store as history
    from ..engine.history.columns import CLI_BENCH_COLUMNS, CLI_HISTORY_COLUMNS
    from ..engine.analysis.compare import compare
    from ..engine.history.runfiles import import_json
    from ..engine.analysis.verdict import verdicts

    check_json_path(args.json)
    if args.recover:
        from ..engine.history.recovery import recover

        print(recover().sentence(), file=sys.stderr)
    tool = None
    if args.import_file:  # runs, or a tool's result (its --json, the window's Export JSON…)
        from ..engine.history.runfiles import holds_runs, import_tool_json

        if holds_runs(args.import_file):
            imported = import_json(args.import_file)  # checked whole before the history is opened for writing
        else:
            tool = import_tool_json(args.import_file)
    store = history.RunStore()
    if args.import_file and tool is not None:
        if store.add_imported_tool(tool):
            print(f"imported the {tool.kind} result from {printable(args.import_file)} (id {tool.id})",
                  file=sys.stderr)
        else:  # what is kept stays as it is, as with runs
            print(f"the {tool.kind} result in {printable(args.import_file)} is already in the history; it stays as "
                  "it was", file=sys.stderr)
    elif args.import_file:
        added, known = store.add_imported(imported)
        note = f" ({known} already in the history)" if known else ""
        print(f"imported {plural(added, 'run')} from {printable(args.import_file)}{note}", file=sys.stderr)
    if args.delete:  # runs and tool results alike, by id
        runs, tools = store.delete_any(args.delete)
        asked = len(dict.fromkeys(args.delete))
        said = " and ".join(p for p in (plural(runs, "run") if runs or not tools else "",
                                        plural(tools, "tool result") if tools else "") if p)
        print(f"deleted {said}" + (f" ({asked - runs - tools} not found)" if runs + tools < asked else ""),
              file=sys.stderr)
    if args.note:
        run_id, text = args.note
        if store.get(run_id) is None:
            raise UserError(f"No run with id {printable(run_id)[:64]} in the history; `mpsstudio history` lists them.")
        store.set_note(run_id, text)
        print(f"kept the note on run {printable(run_id)[:64]}" if text else "removed the note", file=sys.stderr)
    if args.steps:
        from ..engine.history.runfiles import export_steps_csv

        run_id, out = args.steps
        run = store.get(run_id)
        if run is None:
            raise UserError(f"No run with id {printable(run_id)[:64]} in the history; `mpsstudio history` lists them.")
        rows = export_steps_csv(run, out)
        print(f"wrote {plural(rows, 'step')} of run {printable(run_id)[:64]} to {printable(out)}", file=sys.stderr)
        return EXIT_OK
    if store.read_only:
        print(f"mpsstudio: the run history at {store.path} is read-only; new runs will not be kept.", file=sys.stderr)
    results = store.all() if args.json else store.summaries()  # the table needs no steps or windows
    inspections = [t.result for t in store.tools(kinds=("inspect",)) if not t.problem]  # the verdicts' findings
    for notice in [*store.pending_notices, *store.notices, *store.tool_notices]:
        print(f"mpsstudio: {notice}", file=sys.stderr)
    if args.json:
        from ..engine.history.runfiles import export_json

        export_json(results, args.json, inspections)
        print(f"wrote {plural(len(results), 'run')} to {printable(args.json)}", file=sys.stderr)
    if not results:
        print("No runs in the history yet; run `mpsstudio bench` or `mpsstudio demo` to make one.")
        return EXIT_OK
    print(format_table(results, CLI_HISTORY_COLUMNS))
    for c in compare(results):
        print(f"\n{printable(c.title())}")
        keys = ("machine", *CLI_BENCH_COLUMNS) if len(c.machines()) > 1 else None
        print(format_table(c.all_runs, keys))
        for sentence in verdicts(c, inspections):
            print(printable(sentence))
    return EXIT_OK
