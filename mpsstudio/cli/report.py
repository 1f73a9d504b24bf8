"""`mpsstudio report RUN_OR_RESULT... [--format md|html] [--out FILE]`: a report to paste (Markdown) or to send
(one HTML file) of runs and tool results: a run id (its comparisons of devices and of what differs), a tool
result's id, a JSON file MPS Studio wrote (runs or a tool result), or `latest`."""

from __future__ import annotations

import sys
from pathlib import Path

from ..engine.basics.errors import UserError
from ..engine.basics.formatting import printable
from .common import EXIT_OK, check_output, find_run

FORMATS = ("md", "html")


def cmd_report(args) -> int:
    from ..engine.basics.files import write_atomic
    from ..engine.history import store as history
    from ..engine.report import parts as reporting, scrubbed
    from ..engine.report.render import to_html, to_markdown

    fmt = args.format or ("html" if args.out and Path(args.out).suffix.lower() in (".html", ".htm") else "md")
    out = None
    if args.out is not None:  # never the history's files nor a file this report reads (check_output)
        out = check_output(args.out, "--out", [s for s in args.sources if s != "latest"])
    store = None
    parts, hosts, named = [], set(), []
    for source in args.sources:
        path = Path(source).expanduser()
        if not source.strip():
            raise UserError("Give a run id, a tool result's id, a JSON file MPS Studio wrote, or latest; not an "
                            "empty text.")
        if source != "latest" and path.exists() and not path.is_file():
            raise UserError(f"{printable(source)[:120]} is not a file (a folder or a device); give a JSON file MPS "
                            "Studio wrote, a run id, or latest.")
        if source != "latest" and (path.is_file() or path.suffix.lower() == ".json"):
            found, used = _from_file(path, source)
            named += used
        else:
            store = store or history.RunStore()
            found, used = _from_history(store, source)
            named += [r for r in used if r.id == source or (len(source) >= 4 and r.id.startswith(source))]
        parts += found
        hosts |= {r.env.get("hostname") for r in used if isinstance(r.env.get("hostname"), str)}
    parts = _named_compared(named) + parts
    inspections, diagnoses = [], []
    if store is not None:
        inspections = [t.result for t in store.tools(kinds=("inspect",)) if not t.problem]
        diagnoses = [t.result for t in store.tools(kinds=("diagnose",)) if not t.problem]
    built, seen = [], set()
    for p in parts:  # the same comparison asked for twice (two of its runs) is reported once
        part = p(inspections, diagnoses) if callable(p) else p
        key = (part.heading, part.when, tuple(part.sentences), tuple(tuple(r) for t in part.tables for r in t.rows))
        if key not in seen:
            seen.add(key)
            built.append(part)
    parts = built
    report = scrubbed(reporting.report(parts), hosts)
    text = to_html(report) if fmt == "html" else to_markdown(report)
    if out is not None:
        try:
            write_atomic(out, text)  # the resolved path: a link is written through, never replaced
        except OSError as exc:
            raise UserError(f"The report could not be written to {printable(args.out)} "
                            f"({exc.strerror or type(exc).__name__}); choose another file.") from None
        print(f"wrote the report ({len(report.parts)} part{'s' if len(report.parts) != 1 else ''}, {fmt}) to "
              f"{printable(args.out)}", file=sys.stderr)
    else:
        sys.stdout.write(text)
    return EXIT_OK


def _from_file(path: Path, shown: str):
    from ..engine.history.runfiles import holds_runs, import_json, import_tool_json
    from ..engine.report import parts as reporting

    if not path.is_file():
        raise UserError(f"No file {printable(shown)[:120]}; give a run id, a tool result's id, a JSON file MPS "
                        "Studio wrote, or latest.")
    if holds_runs(path):
        try:
            runs = import_json(path)
        except UserError as exc:  # the import's words, said of a report
            text = str(exc).replace("so nothing was imported", "so it cannot be reported")
            raise UserError(text.replace("; nothing was imported", "; it cannot be reported")) from None
        if not runs:
            raise UserError(f"{printable(path.name)} holds no runs to report; choose another file.")
        return _run_parts(runs, runs), runs
    import json

    record = import_tool_json(path)
    doc = json.loads(path.read_text(encoding="utf-8"))  # read and checked just above
    when = record.created_at if isinstance(doc, dict) and doc.get("created_at") else ""  # else: when imported
    return [reporting.tool_part(record.kind, record.result, when)], []


def _named_compared(named) -> list:
    """Two or more runs named: they are compared with each other by what differs (the oldest the baseline), as
    `history --compare` does, before each one's own parts."""
    from ..engine.analysis import contrast
    from ..engine.report import parts as reporting

    runs = list({r.id: r for r in named}.values())
    if len(runs) < 2:
        return []
    return [lambda ins, dia, c=contrast.of_runs(runs): reporting.contrast_part(c, dia)]


def _run_parts(chosen, all_runs):
    """Every comparison holding one of `chosen` (once each), or the runs alone; built when the inspections are known."""
    from ..engine.analysis import contrast
    from ..engine.analysis.compare import compare
    from ..engine.report import parts as reporting

    out, seen = [], set()
    ids = {r.id for r in chosen}
    for c in compare(list(all_runs)):
        if any(r.id in ids for r in c.all_runs):
            out.append(lambda ins, dia, c=c: reporting.comparison_part(c, ins))
            seen |= {r.id for r in c.all_runs}
    for c in contrast.contrasts(list(all_runs)):
        if any(r.id in ids for r in c.runs):
            out.append(lambda ins, dia, c=c: reporting.contrast_part(c, dia))
            seen |= {r.id for r in c.runs}
    from ..engine.analysis.scaling import scalings

    for found in scalings(list(all_runs)):
        if any(r.id in ids for r in found.runs):
            out.append(lambda ins, dia, found=found: reporting.scaling_part(found))
            seen |= {r.id for r in found.runs}
    for r in chosen:
        if r.id not in seen:
            out.append(lambda ins, dia, r=r: reporting.run_parts(r, [r])[0])
    return out


def _from_history(store, source: str):
    from ..engine.report import parts as reporting

    runs = store.summaries()
    tools = [t for t in store.tools() if not t.problem]
    if source == "latest":
        from ..engine.basics.formatting import instant

        newest_run = max(runs, key=lambda r: instant(r.created_at), default=None)
        newest_tool = max(tools, key=lambda t: instant(t.created_at), default=None)
        if newest_run is None and newest_tool is None:
            raise UserError("The history holds no run or tool result yet; run `mpsstudio bench` first.")
        if newest_tool is not None and (newest_run is None or
                                       instant(newest_tool.created_at) > instant(newest_run.created_at)):
            return [reporting.tool_part(newest_tool.kind, newest_tool.result, newest_tool.created_at)], []
        return _run_parts([newest_run], runs), runs
    tool = [t for t in tools if t.id == source] or ([t for t in tools if t.id.startswith(source)]
                                                     if len(source) >= 4 else [])
    if len(tool) == 1:
        return [reporting.tool_part(tool[0].kind, tool[0].result, tool[0].created_at)], []
    run = find_run(runs, source)
    return _run_parts([run], runs), runs
