"""Runs and tool results are ordered by when they happened, not by their text: each keeps the offset it was written
with (an imported file from another time zone), and "2025-06-01T23:00:00+14:00" is 09:00 UTC, before 10:00 UTC."""

from __future__ import annotations

import math

from mpsstudio.engine.analysis import regression
from mpsstudio.engine.analysis.compare import compare
from mpsstudio.engine.basics.formatting import instant
from mpsstudio.engine.history.store import RunStore, ToolRecord
from tests.support.runs import plain_run

EARLY = "2025-06-01T23:00:00+14:00"  # 09:00 UTC: sorts after LATE as text
LATE = "2025-06-01T10:00:00+00:00"


def test_an_instant_is_the_clocks_not_the_texts():
    assert instant(EARLY) < instant(LATE) and EARLY > LATE
    assert instant("2025-06-01T09:00:00") == instant("2025-06-01T09:00:00+00:00")  # no zone: UTC
    assert instant("0001-01-01T00:00:00+14:00") < instant("0001-01-02T00:00:00+00:00")  # no OverflowError
    assert instant("not a date") == -math.inf and instant(None) == -math.inf


def test_the_history_lists_runs_and_tool_results_oldest_first_by_the_clock(tmp_path):
    store = RunStore(tmp_path / "h.sqlite3")
    try:
        late, early = plain_run(created=LATE, sps=100.0), plain_run(created=EARLY, sps=50.0)
        store.save(late)  # kept first: the order of keeping does not decide either
        store.save(early)
        assert [r.id for r in store.all()] == [early.id, late.id]
        assert [r.id for r in store.summaries()] == [early.id, late.id]
        result = {"devices": [], "points": [], "best": {}, "crossovers": {}, "sentence": "s"}
        store.save_tool(ToolRecord(kind="sweep", result=result, id="late", created_at=LATE))
        store.save_tool(ToolRecord(kind="sweep", result=result, id="early", created_at=EARLY))
        assert [t.id for t in store.tools()] == ["early", "late"]
    finally:
        store.close()


def test_the_newest_baseline_and_the_oldest_of_a_comparison_are_by_the_clock():
    late, early = plain_run(created=LATE, sps=100.0), plain_run(created=EARLY, sps=50.0)
    assert regression.baseline_for([late, early], late.config) is late
    assert regression.baseline_for([early, late], late.config) is late
    other = plain_run(created=LATE, sps=80.0, device="mps")
    early_cpu = plain_run(created=EARLY, sps=50.0)
    [c] = compare([other, early_cpu])
    assert c.runs[0] is early_cpu  # the older run first
