"""One table shape for every front end: the tools' views (tools/toolview.py, tools/diagnose/view.py), a contrast's
rows, the report's tables, the CLI's grid and the window's table widgets all pass a `Table`. No torch."""

from __future__ import annotations

from dataclasses import dataclass, field, replace


@dataclass(frozen=True)
class Table:
    """Cells as the user reads them (text with units, a dash for a value not measured), a header per column and
    whether the column is numeric (right-aligned); the legend says what the numbers are, under the table."""

    headers: list[str]
    rows: list[list[str]] = field(default_factory=list)
    numeric: list[bool] = field(default_factory=list)
    legend: str = ""

    def __post_init__(self):
        if len(self.numeric) != len(self.headers):
            raise ValueError(f"a table of {len(self.headers)} columns has {len(self.numeric)} alignments")
        for row in self.rows:
            if len(row) != len(self.headers):
                raise ValueError(f"a table of {len(self.headers)} columns has a row of {len(row)} cells")

    def with_legend(self, legend: str) -> Table:
        return replace(self, legend=legend)
