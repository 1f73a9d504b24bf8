"""A Report as GitHub-flavoured Markdown (tables with units and intervals, the environment in a collapsed
<details> block) or as one self-contained HTML file (inline CSS, the charts as inline SVG)."""

from __future__ import annotations

import re
from html import escape

from . import Part, Report, Table
from .svg import chart_svg


_MD_SPECIAL = re.compile(r"([\\`*#<]|(?<!\w)_|_(?!\w)|\](?=\())")  # "](" would make a link; < an autolink


def _md(text: str) -> str:
    """Text from data as literal Markdown: HTML escaped, and the characters that would format it (emphasis, code,
    links, headings) escaped; "channels_last" keeps its underscore readable."""
    text = _MD_SPECIAL.sub(r"\\\1", escape(str(text), quote=False))
    return re.sub(r"&lt;(?![A-Za-z/!?])", "<", text)  # "±<1 %" stays readable: no tag starts with a digit


def _md_cell(text: str) -> str:
    text = _md(text).replace("|", "\\|").replace("\n", " ")
    return text.strip() or " "


def _md_table(t: Table) -> list[str]:
    lines = ["| " + " | ".join(_md_cell(h) for h in t.headers) + " |",
             "|" + "|".join("---:" if num else "---" for num in t.numeric) + "|"]
    lines += ["| " + " | ".join(_md_cell(c) for c in row) + " |" for row in t.rows]
    if t.legend:
        lines += ["", f"<sub>{_md(t.legend)}</sub>"]
    return lines


def _md_part(p: Part, level: str) -> list[str]:
    lines = [f"{level} {_md(p.heading)}", ""]
    if p.headline:
        lines += [f"**{_md(p.headline)}**", ""]
    for s in p.sentences:
        lines += [_md(s), ""]
    for t in p.tables:
        lines += [*_md_table(t), ""]
    if p.environment:
        lines += ["<details><summary>Environment</summary>", ""]
        lines += _md_table(Table(["", *p.environment_columns], [list(row) for row in p.environment],
                                 [False] * (1 + len(p.environment_columns))))
        lines += ["", "</details>", ""]
    return lines


def to_markdown(report: Report) -> str:
    """The report as Markdown that renders on GitHub (tables) and stays readable as text."""
    lines = [f"## {_md(report.title)}", ""] if len(report.parts) > 1 else []
    level = "###" if len(report.parts) > 1 else "##"
    for p in report.parts:
        lines += _md_part(p, level)
    if report.made_by:
        lines += [f"<sub>{_md(report.made_by)}</sub>", ""]
    return "\n".join(lines).rstrip() + "\n"


CSS = """
:root { color-scheme: light; }
body { font: 14px/1.45 -apple-system, BlinkMacSystemFont, "Segoe UI", Helvetica, Arial, sans-serif; color: #1d1d1f;
       margin: 32px auto; max-width: 980px; padding: 0 24px; background: #fff; }
h1 { font-size: 24px; margin: 0 0 20px; }
h2 { font-size: 19px; margin: 32px 0 6px; border-top: 1px solid #e5e5ea; padding-top: 18px; }
.when { color: #6e6e73; font-size: 12px; margin: 0 0 10px; }
.headline { font-size: 18px; font-weight: 600; margin: 8px 0; }
p { margin: 6px 0; }
table { border-collapse: collapse; margin: 12px 0 4px; font-size: 12.5px; }
th, td { border-bottom: 1px solid #e5e5ea; padding: 4px 10px; text-align: left; vertical-align: top; }
th { background: #f5f5f7; font-weight: 600; }
td.num, th.num { text-align: right; font-variant-numeric: tabular-nums; }
td.num { white-space: nowrap; }
.legend { color: #6e6e73; font-size: 12px; margin: 2px 0 12px; }
.chart { margin: 12px 0; overflow-x: auto; }
details { margin: 10px 0; } summary { cursor: pointer; color: #3a3a3c; }
.scroll { overflow-x: auto; }
footer { color: #6e6e73; font-size: 12px; margin-top: 36px; }
"""


def _html_table(t: Table) -> str:
    def cls(i: int) -> str:
        return ' class="num"' if i < len(t.numeric) and t.numeric[i] else ""
    head = "".join(f"<th{cls(i)}>{escape(h)}</th>" for i, h in enumerate(t.headers))
    body = "".join("<tr>" + "".join(f"<td{cls(i)}>{escape(str(c))}</td>" for i, c in enumerate(row)) + "</tr>"
                   for row in t.rows)
    legend = f'<p class="legend">{escape(t.legend)}</p>' if t.legend else ""
    return f'<div class="scroll"><table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table></div>{legend}'


def _html_part(p: Part, heading: bool = True) -> str:
    out = [f"<section><h2>{escape(p.heading)}</h2>" if heading else "<section>"]
    if p.when:
        out.append(f'<p class="when">{escape(p.when)}</p>')
    if p.headline:
        out.append(f'<p class="headline">{escape(p.headline)}</p>')
    out += [f"<p>{escape(s)}</p>" for s in p.sentences]
    if p.chart is not None and p.chart.labels:
        out.append(f'<div class="chart">{chart_svg(p.chart)}</div>')
    out += [_html_table(t) for t in p.tables]
    if p.environment:
        head = "".join(f"<th>{escape(c)}</th>" for c in ["", *p.environment_columns])
        rows = "".join(f"<tr><th>{escape(row[0])}</th>" + "".join(f"<td>{escape(v)}</td>" for v in row[1:]) + "</tr>"
                       for row in p.environment)
        out.append(f"<details><summary>Environment</summary><table><thead><tr>{head}</tr></thead>{rows}</table>"
                   "</details>")
    out.append("</section>")
    return "\n".join(out)


def to_html(report: Report) -> str:
    """One HTML file: no script, no link, no font or image to fetch (it opens offline)."""
    single = len(report.parts) == 1 and report.parts[0].heading == report.title  # said once, as the page's title
    parts = "\n".join(_html_part(p, not single) for p in report.parts)
    footer = f"<footer>{escape(report.made_by)}</footer>" if report.made_by else ""
    return (f'<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
            f'<meta name="viewport" content="width=device-width, initial-scale=1">'
            f"<title>{escape(report.title)}</title><style>{CSS}</style></head>\n<body>\n"
            f"<h1>{escape(report.title)}</h1>\n{parts}\n{footer}\n</body></html>\n")
