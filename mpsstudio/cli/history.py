"""`mpsstudio history`: the stored runs and their comparisons; import, delete, notes, a run's loss curve as CSV,
JSON export, and recovery of a damaged history."""

from __future__ import annotations

import sys

from ..engine.basics.errors import UserError
from ..engine.basics.formatting import plural, printable, runs_and_results
from . import team
from .common import EXIT_OK, check_json_path, find_run, format_table, grid


IMPORT_WAIT_S = 30.0  # an import waits this long for a history another program holds, then says it is busy


def waiting(write):
    """`write()` to the history, waiting up to IMPORT_WAIT_S for another program that holds it (said once); the
    history's HistoryBusy when it is held still (the command exits EXIT_BUSY: not bad input, try again)."""
    import time

    from ..engine.basics.errors import HistoryBusy

    deadline, said = time.monotonic() + IMPORT_WAIT_S, False
    while True:
        try:
            return write()
        except HistoryBusy:
            if time.monotonic() >= deadline:
                raise
            if not said:
                print(f"mpsstudio: the history is in use by another program; waiting up to {IMPORT_WAIT_S:g} s...",
                      file=sys.stderr)
                said = True


def cmd_history(args) -> int:
    from ..engine.history import store as history
    from ..engine.history.columns import CLI_BENCH_COLUMNS, CLI_HISTORY_COLUMNS
    from ..engine.analysis.compare import compare
    from ..engine.history.runfiles import import_json
    from ..engine.analysis.verdict import verdicts

    check_json_path(args.json, [args.import_file] if args.import_file else [])
    if args.baseline is not None and not args.baseline.strip():
        raise UserError("--baseline needs a run id; `mpsstudio history` lists them.")
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
    store = waiting(history.RunStore) if args.import_file or args.pull else history.RunStore()
    if team.wanted(args):
        return team.cmd_team(args, store)
    if args.tools:
        return print_tools(store)
    if args.import_file and tool is not None:
        if waiting(lambda: store.add_imported_tool(tool)):
            print(f"imported the {tool.kind} result from {printable(args.import_file)} (id {tool.id})",
                  file=sys.stderr)
        else:  # what is kept stays as it is, as with runs
            print(f"the {tool.kind} result in {printable(args.import_file)} is already in the history; it stays as "
                  "it was", file=sys.stderr)
    elif args.import_file:
        added, known = waiting(lambda: store.add_imported(imported))
        note = f" ({known} already in the history)" if known else ""
        print(f"imported {plural(added, 'run')} from {printable(args.import_file)}{note}", file=sys.stderr)
    if args.delete:  # runs and tool results alike, by id
        runs, tools = store.delete_any(args.delete)
        asked = len(dict.fromkeys(args.delete))
        said = runs_and_results(runs, tools)
        print(f"deleted {said}" + (f" ({asked - runs - tools} not found)" if runs + tools < asked else ""),
              file=sys.stderr)
    if args.note:
        run_id, text = args.note
        run_id = find_run(store.summaries(), run_id).id  # the whole id, or a unique start of it (8 characters)
        store.set_note(run_id, text)
        print(f"kept the note on run {printable(run_id)[:64]}" if text else "removed the note", file=sys.stderr)
    if args.steps:
        from ..engine.history.runfiles import export_steps_csv

        run_id, out = args.steps
        from .common import check_output

        check_output(out, "--steps' FILE")
        run = store.get(find_run(store.summaries(), run_id).id)
        if run is None:
            raise UserError(f"Run {printable(run_id)[:64]} cannot be read any more; `mpsstudio history` lists them.")
        rows = export_steps_csv(run, out)
        print(f"wrote {plural(rows, 'step')} of run {printable(run_id)[:64]} to {printable(out)}", file=sys.stderr)
        return EXIT_OK
    if store.read_only:
        print(f"mpsstudio: the run history at {store.path} is read-only; new runs will not be kept.", file=sys.stderr)
    results = store.all() if args.json else store.summaries()  # the table needs no steps or windows
    inspections = [t.result for t in store.tools(kinds=("inspect",)) if not t.problem]  # the verdicts' findings
    from ..engine.history.library import RunLibrary

    waits = RunLibrary(store).waiting_words()  # what waits for a team's server, with the command that sends it
    for notice in [*store.pending_notices, *store.notices, *store.tool_notices, *([waits] if waits else [])]:
        print(f"mpsstudio: {notice}", file=sys.stderr)
    if args.json:
        from ..engine.history.runfiles import export_json

        export_json(results, args.json, inspections)
        print(f"wrote {plural(len(results), 'run')} to {printable(args.json)}", file=sys.stderr)
    if not results:
        print("No runs in the history yet; run `mpsstudio bench` or `mpsstudio demo` to make one.")
        return EXIT_OK
    if args.compare is not None or args.baseline:
        diagnoses = [t.result for t in store.tools(kinds=("diagnose",)) if not t.problem]
        return print_contrasts(results, args.compare or [], args.baseline, diagnoses)
    print(format_table(results, CLI_HISTORY_COLUMNS))
    for c in compare(results):
        print(f"\n{printable(c.title())}")
        keys = ("machine", *CLI_BENCH_COLUMNS) if len(c.machines()) > 1 else None
        print(format_table(c.all_runs, keys))
        for sentence in verdicts(c, inspections):
            print(printable(sentence))
    return EXIT_OK


def print_tools(store) -> int:
    """`history --tools`: the kept tool results, oldest first, with the ids that --push, --delete and report take."""
    from ..engine.basics.formatting import Table, fmt_timestamp
    from ..engine.tools import toolview

    found = store.tools()
    for notice in store.tool_notices:
        print(f"mpsstudio: {notice}", file=sys.stderr)
    if not found:
        print("No tool results in the history yet; `mpsstudio sweep`, `tune`, `check` and the others keep theirs.")
        return EXIT_OK
    rows = [[t.id, fmt_timestamp(t.created_at), t.kind,
             printable(t.problem or toolview.title(t.kind, t.result))[:100]] for t in found]
    print(grid(Table(["id", "when", "kind", "what"], rows, [False] * 4)))
    return EXIT_OK


def print_contrasts(results, ids: list[str], baseline_id: str | None, diagnoses=()) -> int:
    """`history --compare [ID ...] [--baseline ID]`: the chosen runs against the baseline, or every group of runs
    that differ in one setting or in their environment."""
    from ..engine.analysis import contrast

    baseline = find_run(results, baseline_id, "baseline") if baseline_id else None
    if baseline is not None and not contrast.usable(baseline):
        raise UserError(f"Run {baseline.id[:8]} has no throughput to compare with ({baseline.status}); choose a "
                        "finished run as the baseline.")
    if ids:
        chosen = list({r.id: r for r in (find_run(results, text) for text in ids)}.values())
        if baseline is not None and all(r.id != baseline.id for r in chosen):
            chosen.insert(0, baseline)
        if len(chosen) < 2:
            raise UserError("--compare needs two or more different runs (or one and --baseline).")
        found = [contrast.of_runs(chosen, baseline)]
    else:
        found = contrast.contrasts(results, baseline.id if baseline else None)
        if baseline is not None:
            found = [c for c in found if c.baseline.id == baseline.id]
        if not found:
            print("No runs to compare by what differs: none share a setup and differ in one setting or in their "
                  "environment" + (f" with run {baseline.id[:8]}" if baseline is not None else "") + ". Give run ids "
                  "to compare any runs: `mpsstudio history --compare ID ID`.")
            return EXIT_OK
    for c in found:
        print(f"\n{c.title()}")
        table = contrast.table(c)
        print(grid(table))
        for sentence in c.sentences(diagnoses):
            print(printable(sentence))
    print(f"\n{contrast.LEGEND}.")
    return EXIT_OK
