"""A tool's section of a report (its tables and chart) comes from its row in tools/registry.TABLE: a tool added as
its module and its row is in reports (and in the Tools tab, tests/gui/tools/test_panel.py) with nothing else."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from mpsstudio.engine.report import parts
from mpsstudio.engine.tools import registry
from tests.support.paths import DATA

CORPUS = DATA / "tool_results"


def _result(kind: str) -> dict:
    return {k: v for k, v in json.loads((CORPUS / f"{kind}.json").read_text()).items() if k not in ("kind", "id")}


@pytest.mark.parametrize("tool", [t for t in registry.TABLE if t.stored], ids=lambda t: t.name)
def test_every_stored_tool_has_a_section_with_a_table(tool):
    assert tool.section, f"{tool.name}: no section, so a report of it would show its sentence alone"
    files = sorted(CORPUS.glob(f"{tool.name}*.json"))
    assert files, f"tests/data/tool_results has no {tool.name} result"
    for path in files:
        tables, _chart = tool.call("section", _result(path.stem))
        assert tables and all(t.rows for t in tables), path.name


def test_the_sections_load_no_torch():
    """A report and the Tools tab are drawn in the window's process, which does not load torch for them."""
    code = ("import json, sys\nfrom mpsstudio.engine.tools import registry\n"
            f"for path in sorted(__import__('pathlib').Path({str(CORPUS)!r}).glob('*.json')):\n"
            "    data = json.loads(path.read_text())\n"
            "    registry.TOOLS[data['kind']].call('section', data)\n"
            "print('torch' in sys.modules)")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip() == "False"


def test_a_new_tool_is_reported_from_its_row_alone(monkeypatch):
    row = registry.Tool("echo", "Echo", section="toolview:max_batch_section")
    monkeypatch.setitem(registry.TOOLS, "echo", row)
    result = {**_result("max-batch"), "sentence": "An echo of a search."}
    part = parts.tool_part("echo", result)
    assert part.sentences == ["An echo of a search."]
    assert part.tables[0].headers[0] == "batch" and len(part.tables[0].rows) == len(result["probes"])
    assert part.chart is not None and part.chart.labels[0] == "batch 1"
    assert parts.tool_part("no-such-tool", result).tables == []  # an unknown kind: its sentence alone
