"""Reports to paste: a comparison of devices, a comparison by what differs (environments, settings, chosen runs), a
run, and every tool result kind, as GitHub-flavoured Markdown (Copy as Markdown) or one self-contained HTML file
with its chart as inline SVG (Export Report…; opens offline in Safari and Chrome). Both front ends and
`mpsstudio report` render the same `Report`: the engine's own sentences, tables and legends, never re-derived.

- parts.py  builds a Part from a comparison, a contrast, a run or a tool result
- svg.py    the chart of a part (bars with interval whiskers) as SVG
- render.py Markdown and HTML

A report names no absolute path, user name or host name: `scrub` turns paths into their file names and the names
into neutral words, in every text of the report. Imports no torch and no Qt.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from ..basics.scrub import scrub, secrets  # the report's own words for them
from ..basics.formatting import Chart, Table


@dataclass
class Part:
    """One thing reported: a heading, the answer at a glance, its sentences, tables, a chart, the environment."""

    heading: str
    headline: str = ""
    sentences: list[str] = field(default_factory=list)
    tables: list[Table] = field(default_factory=list)
    chart: Chart | None = None
    environment: Sequence[tuple[str, ...]] = field(default_factory=list)  # (what, its value for each column)
    when: str = ""
    environment_columns: list[str] = field(default_factory=lambda: ["value"])


@dataclass
class Report:
    title: str
    parts: list[Part]
    made_by: str = ""
    hosts: list[str] = field(default_factory=list)  # host names of the runs reported: never written (scrubbed)


def scrubbed(report: Report, hosts=()) -> Report:
    """The report with every text passed through `scrub`."""
    hidden = secrets([*hosts, *report.hosts])

    def s(text: str) -> str:
        return scrub(text, hidden)

    parts = []
    for p in report.parts:
        chart = p.chart
        if chart is not None:
            chart = Chart([s(x) for x in chart.labels], chart.values, s(chart.unit), chart.lows, chart.highs,
                          chart.reference, [s(x) for x in chart.notes])
        parts.append(Part(s(p.heading), s(p.headline), [s(x) for x in p.sentences],
                          [Table([s(h) for h in t.headers], [[s(c) for c in row] for row in t.rows], t.numeric,
                                 s(t.legend)) for t in p.tables],
                          chart, [tuple(s(x) for x in row) for row in p.environment], s(p.when),
                          [s(x) for x in p.environment_columns]))
    return Report(s(report.title), parts, s(report.made_by))  # no host list: nothing left to hide
