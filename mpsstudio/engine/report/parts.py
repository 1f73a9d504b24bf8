"""Parts of a report, from what the engine computed: a comparison of devices (analysis/compare, verdict), a
comparison by what differs (analysis/contrast), a run, and each tool result kind (tools/toolview's tables, the
result's own sentence). Nothing is re-derived here."""

from __future__ import annotations

from collections.abc import Sequence

from ... import __version__
from ..analysis import contrast as contrasts
from ..analysis.compare import Comparison, compare, interval_name, short_machine
from ..analysis.differences import environment_items
from ..analysis.scaling import scalings
from ..run.script.words import script_lines
from ..analysis.verdict import headline, verdicts
from ..basics.formatting import SPREAD_WORDS, fmt_rate, fmt_timestamp, instant, is_finite, plural, printable
from ..basics.results import now_iso
from ..basics.results import RunResult
from ..history.columns import BY_KEY, CLI_BENCH_COLUMNS, cell_text
from ..tools import registry, toolview
from . import Chart, Part, Report, Table

RUN_COLUMNS = ("machine", *CLI_BENCH_COLUMNS[:7], "peak_memory_bytes", "final_loss", "status")


def made_by() -> str:
    return f"Made with MPS Studio {__version__} on {fmt_timestamp(now_iso())}."


def _runs_table(runs: Sequence[RunResult], all_runs: Sequence[RunResult]) -> Table:
    from ..analysis.compare import speedup_map

    speedups = speedup_map(compare(list(all_runs)))
    keys = [k for k in RUN_COLUMNS if k != "machine" or len({r.machine for r in runs}) > 1]
    rows = [[cell_text(k, r, speedups) for k in keys] for r in runs]
    return Table([BY_KEY[k].title for k in keys], rows, [BY_KEY[k].numeric for k in keys],
                 f"{SPREAD_WORDS} (Samples/s). Samples/s and memory are measured; s/epoch with \u2248 is estimated.")


def comparison_part(c: Comparison, inspections: Sequence[dict] = ()) -> Part:
    """Devices compared: each device's speedup over its own machine's CPU with its interval."""
    entries = c.entries
    many = len(c.machines()) > 1
    labels = [f"{e.device} \u2014 {short_machine(e.machine)}" if many else e.device for e in entries]
    by_speedup = any(e.speedup is not None for e in entries)
    values = [e.speedup if by_speedup else e.samples_per_s for e in entries]
    chart = Chart(labels, values, "speedup over the same machine's CPU (\u00d7)" if by_speedup else "samples/s",
                  [e.low for e in entries] if by_speedup else [], [e.high for e in entries] if by_speedup else [],
                  1.0 if by_speedup else None, ["noisy" if e.noisy else "" for e in entries])
    methods = {name for name in (interval_name(e.method) for e in entries) if name is not None}
    table = _runs_table(c.all_runs, c.all_runs)
    if methods:
        table = table.with_legend(table.legend + " Intervals: " + "; ".join(sorted(methods)) + ".")
    return Part(f"Devices compared: {c.title()}", headline(c), verdicts(c, inspections), [table], chart,
                environment_items(c.runs[0].env), fmt_timestamp(max((r.created_at for r in c.all_runs), key=instant)))


def contrast_part(c: contrasts.Contrast, diagnoses: Sequence[dict] = ()) -> Part:
    """Runs compared by what differs: each one's ratio to the baseline with its interval, and the verdict."""
    table = contrasts.table(c)
    labels = ["baseline"] + [", ".join(d.words("other") for d in v.diffs if d.cause) or "repeat" for v in c.rows]
    chart = Chart(labels, [1.0, *(v.ratio for v in c.rows)], "samples/s over the baseline's (\u00d7)",
                  [None, *(v.low for v in c.rows)], [None, *(v.high for v in c.rows)], 1.0,
                  ["noisy" if c.baseline.summary.stability == "noisy" else ""]
                  + ["noisy" if v.noisy else "" for v in c.rows])
    envs = [dict(environment_items(r.env)) for r in c.runs]
    names = list(dict.fromkeys(k for env in envs for k in env))
    columns = [f"run {r.id[:8]}" + (" (baseline)" if i == 0 else "") for i, r in enumerate(c.runs)]
    scripts = [f"Run {r.id[:8]} ({r.config.device}): {printable(line)}" for r in c.runs for line in script_lines(r)]
    return Part(c.title(), contrasts.headline(c), [*c.sentences(diagnoses), *scripts],
                [table.with_legend(contrasts.LEGEND)],
                chart, [(k, *(env.get(k, "\u2014") for env in envs)) for k in names],
                fmt_timestamp(c.baseline.created_at), columns)


def scaling_part(s) -> Part:
    """One setup on 1, 2, ... N GPUs (analysis/scaling.py): the verdict, the scaling table, throughput per count."""
    headers, rows = s.table()
    labels = [f"{p.gpus} GPU{'s' if p.gpus > 1 else ''}" for p in s.points] + [
        f"{r.config.device} \u2014 {short_machine(r.machine)}" for r in s.beside]
    values = [p.samples_per_s for p in s.points] + [float(r.summary.samples_per_s) for r in s.beside]
    lows = [p.iqr[0] for p in s.points] + [None] * len(s.beside)
    highs = [p.iqr[1] for p in s.points] + [None] * len(s.beside)
    chart = Chart(labels, values, "samples/s, all GPUs (median; whiskers: the middle half of the windows)", lows, highs,
                  None, ["noisy" if p.run.summary.stability == "noisy" else "" for p in s.points]
                  + [""] * len(s.beside))
    methods = [f"{p.gpus} GPUs: the all-reduce's share is the {p.communication['method']}." for p in s.points
               if p.communication]
    table = Table(headers, rows, [True, True, True, False, False, False, False],
                  "Samples/s: every GPU's samples over the slowest rank's window (median, IQR). Speedup over the one-GPU "
                  "run and efficiency (speedup / GPUs) with the 95 % window-bootstrap interval.")
    return Part(f"Scaling over GPUs: {s.title()}", s.verdict(), [*s.beside_sentences(), *methods], [table], chart,
                environment_items(s.points[-1].run.env), fmt_timestamp(max((r.created_at for r in s.runs), key=instant)))


def run_parts(run: RunResult, all_runs: Sequence[RunResult], inspections: Sequence[dict] = (),
              diagnoses: Sequence[dict] = ()) -> list[Part]:
    """A run: its device comparison and every comparison by what differs that holds it; else the run alone."""
    parts = [comparison_part(c, inspections) for c in compare(list(all_runs)) if c.entry_of(run) is not None]
    parts += [contrast_part(c, diagnoses) for c in contrasts.contrasts(all_runs, containing=run.id)]
    parts += [scaling_part(found) for found in scalings(all_runs) if run.id in {r.id for r in found.runs}]
    if parts:
        return parts
    s = run.summary
    what = (f"{run.config.device}: {fmt_rate(s.samples_per_s)} samples/s (measured)"
            if run.status == "finished" and is_finite(s.samples_per_s) else f"{run.config.device}: {run.status}")
    said = ([printable(run.error)] if run.error else []) + [printable(line) for line in script_lines(run)]
    return [Part(f"Run: {run.config.work_words}, {run.config.batch_words}, "
                 f"{run.config.precision_words} on {run.config.device}", what, said,
                 [_runs_table([run], all_runs)], None, environment_items(run.env), fmt_timestamp(run.created_at))]


def tool_part(kind: str, result: dict, created_at: str = "") -> Part:
    """A tool's result: its title, its sentence, and its row's section (the tables the window shows, a chart where it
    has one)."""
    tool = registry.TOOLS.get(kind)
    tables, chart = tool.call("section", result) if tool is not None and tool.section else ([], None)
    env: dict = result["env"] if isinstance(result.get("env"), dict) else {}
    return Part(toolview.title(kind, result), "", [str(result.get("sentence") or "")], tables, chart,
                environment_items(env), fmt_timestamp(created_at) if created_at else "")


def report(parts: list[Part], title: str | None = None, runs: Sequence[RunResult] = ()) -> Report:
    """A report of these parts (the title: the first part's heading, or how many there are); `runs`: those it
    reports, whose host names scrubbed() hides."""
    if title is None:
        title = parts[0].heading if len(parts) == 1 else f"MPS Studio: {plural(len(parts), 'result')}"
    hosts = sorted({str(r.env["hostname"]) for r in runs if isinstance(r.env.get("hostname"), str)})
    return Report(title, parts, made_by(), hosts)
