"""Tool results as files (issue 27: "exported to JSON, importable"): a tool's --json or the window's Export JSON…
imported into another machine's history, checked as a stored result is; one sentence for every file that is not
one."""

from __future__ import annotations

import json
import os

import pytest

from mpsstudio import cli
from mpsstudio.engine.history.store import RunStore
from tests.support.results import deploy_result


def history(capsys, *args) -> tuple[int, str]:
    code = cli.main(["history", *args])
    return code, capsys.readouterr().err


def test_a_tool_result_file_is_imported_into_the_history_once(tmp_path, capsys):
    path = tmp_path / "deploy.json"
    path.write_text(json.dumps({"kind": "deploy-bench", "id": "abc123", "created_at": "2026-11-20T10:00:00+00:00",
                                **deploy_result()}))
    code, err = history(capsys, "--import", str(path))
    assert code == 0 and "imported the deploy-bench result from" in err, err
    [record] = RunStore().tools()
    assert (record.kind, record.id, record.result["imported_from"]) == ("deploy-bench", "abc123", "deploy.json")
    assert record.result["rows"][0]["energy_mj_per_sample"] == 3.5
    code, err = history(capsys, "--import", str(path))
    assert code == 0 and "is already in the history; it stays as it was" in err and len(RunStore().tools()) == 1
    # a file naming the id of another result (of any kind) never replaces what is kept
    forged = tmp_path / "forged.json"
    forged.write_text(json.dumps({**json.loads(path.read_text()), "rows": []}))
    code, err = history(capsys, "--import", str(forged))
    assert code == 0 and "stays as it was" in err
    assert RunStore().tools()[0].result["rows"][0]["energy_mj_per_sample"] == 3.5
    legacy = tmp_path / "old.json"  # a --json written before files named their kind: known by its shape
    legacy.write_text(json.dumps(deploy_result()))
    assert history(capsys, "--import", str(legacy))[0] == 0
    assert [r.kind for r in RunStore().tools()].count("deploy-bench") == 2


@pytest.mark.parametrize("content, says", [
    ("{", "is not valid JSON (line 1)"),
    ("[1, 2]", "bad.json is not a tool result; choose a file a tool exported."),
    ('{"points": 3}', "bad.json is not the result of any MPS Studio tool"),
    ('{"format": "mpsstudio.runs", "version": 1, "runs": "x"}', "has no list of runs"),
    ('{"kind": "evil", "sentence": "x"}', "holds a result of kind 'evil', which MPS Studio does not keep"),
    ('{"kind": "deploy-bench", "sentence": "fast", "models": ["m"], "rows": [{"model": "m"}]}',
     "bad.json holds a deploy-bench result whose rows[0].label is missing, so it was not kept."),
    ("FORGED", "holds a deploy-bench result whose rows[0].latency_ms is '0.1 ms', not a number"),
    ('{"kind": "sweep", "points": "NaN"}', "holds a sweep result whose sentence is missing"),
    ('{"kind": "sweep", "sentence": "s", "best": {}, "points": "NaN"}', "whose points is 'NaN', not a list"),
])
def test_a_file_that_is_not_a_tool_result_gets_one_sentence_and_changes_nothing(tmp_path, capsys, content, says):
    path = tmp_path / "bad.json"
    if content == "FORGED":  # a latency that is text, in an otherwise real result
        doc = {"kind": "deploy-bench", **deploy_result()}
        doc["rows"][0]["latency_ms"] = "0.1 ms"
        content = json.dumps(doc)
    path.write_text(content)
    code, err = history(capsys, "--import", str(path))
    assert code == 2 and says in err and "Traceback" not in err, err
    assert RunStore().tools() == []


def test_a_file_that_is_not_a_regular_file_is_refused_before_it_is_read(tmp_path, capsys):
    """/dev/zero says it holds 0 bytes and never ends: read whole, it took all the memory."""
    code, err = history(capsys, "--import", "/dev/zero")
    assert code == 2 and "/dev/zero is not a regular file; choose a JSON file" in err
    fifo = tmp_path / "pipe.json"
    os.mkfifo(fifo)
    code, err = history(capsys, "--import", str(fifo))
    assert code == 2 and "is not a regular file" in err
