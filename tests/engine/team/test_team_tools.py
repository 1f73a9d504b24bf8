"""Tool results (a sweep here) on the team's server: pushed as MLflow runs of their own (params = what the tool was
asked, the fingerprint as tags, the result's JSON and its report as artifacts, nothing naming the machine), pulled
back into another history (all or none, with the runs), hostile answers about them refused in one sentence; the
server's experiments listed for a pull; `history --tools` lists the ids a push takes."""

from __future__ import annotations

import json

import pytest

from mpsstudio import cli
from mpsstudio.engine.basics.errors import UserError
from mpsstudio.engine.history.store import RunStore, ToolRecord
from mpsstudio.engine.team import mlflow_run, mlflow_tool, pull, push
from tests.support.fake_mlflow import FakeServer
from tests.support.results import sweep_result
from tests.support.runs import noisy_rates, run_with

HOST = "alice-macbook-pro"


def _store(tmp_path, name="runs.sqlite3"):
    store = RunStore(tmp_path / name)
    run = run_with("mps", noisy_rates(800.0, 0.02, n=12), machine="M3 Max (macOS 15.5)", env={"hostname": HOST},
                   created="2026-12-01T10:00:00+00:00")
    store.save(run)
    sweep = ToolRecord(kind="sweep", result=sweep_result(HOST), created_at="2026-12-02T10:00:00+00:00")
    store.save_tool(sweep)
    return store, run, sweep


def test_a_tool_result_goes_out_as_its_own_mlflow_run_with_nothing_naming_the_machine(tmp_path):
    store, run, sweep = _store(tmp_path)
    item = mlflow_tool.outgoing(store.tool(sweep.id))
    assert item.experiment == "mpsstudio · sweep · resnet18 · cifar10" and item.metrics == [] and item.finished
    tags = {t["key"]: t["value"] for t in item.tags}
    params = {p["key"]: p["value"] for p in item.params}
    assert tags[mlflow_run.KIND_TAG] == "sweep" and tags[mlflow_run.RUN_ID_TAG] == sweep.id
    assert tags["mpsstudio.env.machine"] == "M3 Max (macOS 15.5)" and params["tool"] == "sweep"
    assert params["model"] == "resnet18" and "batch_size" not in params  # the config's 64 was not what it measured
    assert params["measured.batch_size"] == "1, 2, 4, 8, 16" and params["measured.device"] == "cpu, mps"
    assert set(item.files) == {mlflow_run.TOOL_FILE, mlflow_run.REPORT_FILE}
    doc = json.loads(item.files[mlflow_run.TOOL_FILE])
    assert doc["kind"] == "sweep" and doc["id"] == sweep.id and doc["points"]
    report = item.files[mlflow_run.REPORT_FILE].decode()
    assert report.startswith("<!DOCTYPE html>") and "Batch-size sweep" in report and "resnet18" in report
    run_item = mlflow_run.outgoing(store.get(run.id))
    assert {t["key"]: t["value"] for t in run_item.tags}[mlflow_run.KIND_TAG] == "run"
    for part in [*item.files.values(), *run_item.files.values(), json.dumps([item.tags, item.params,
                                                                             run_item.tags, run_item.params]).encode()]:
        assert HOST.encode() not in part


def test_history_tools_lists_the_ids_a_push_takes_and_a_push_refuses_an_unknown_one(tmp_path, capsys, monkeypatch):
    store, run, sweep = _store(tmp_path)
    assert push.everything(store) == [run.id, sweep.id]
    store.close()
    monkeypatch.setenv("MPSSTUDIO_DATA_DIR", str(tmp_path))
    assert cli.main(["history", "--tools"]) == 0
    out = capsys.readouterr().out
    assert sweep.id in out and "sweep" in out and "resnet18" in out
    assert cli.main(["history", "--push", "http://127.0.0.1:1", "nope"]) == 2
    err = capsys.readouterr().err
    assert "No run or tool result nope" in err and "history --tools" in err and "Traceback" not in err


def _server_of(store, run, sweep):
    """A fake server that holds what `store` pushed: the run and the sweep, their JSON as artifacts."""
    files = {"r1": mlflow_run.outgoing(store.get(run.id)).files, "t1": mlflow_tool.outgoing(sweep).files}
    entries = [{"info": {"run_id": key, "artifact_uri": f"mlflow-artifacts:/1/{key}/artifacts"},
                "data": {"tags": [{"key": mlflow_run.RUN_ID_TAG, "value": ident},
                                  {"key": mlflow_run.KIND_TAG, "value": kind}]}}
               for key, ident, kind in (("r1", run.id, "run"), ("t1", sweep.id, "sweep"))]
    state = {"files": files, "entries": entries}

    def respond(request):
        if "experiments/get-by-name" in request.path:
            request.answer(200, {"experiment": {"experiment_id": "1", "name": "x"}})
        elif "experiments/search" in request.path:
            request.answer(200, {"experiments": [{"experiment_id": "0", "name": "Default"},
                                                 {"experiment_id": "1", "name": "mpsstudio · sweep · resnet18"}]})
        elif "runs/search" in request.path:
            request.answer(200, {"runs": state["entries"]})
        elif "mlflow-artifacts/artifacts/1/" in request.path:
            key, name = request.path.split("/artifacts/1/")[1].split("/artifacts/")
            request.answer(200, state["files"][key][name])
        else:
            request.answer(404, {"error_code": "ENDPOINT_NOT_FOUND"})
    return respond, state


def test_a_pull_brings_runs_and_tool_results_together_and_again_adds_nothing(tmp_path):
    mine, run, sweep = _store(tmp_path)
    respond, _ = _server_of(mine, run, sweep)
    (tmp_path / "b").mkdir()
    theirs = RunStore(tmp_path / "b" / "runs.sqlite3")
    with FakeServer(respond) as fake:
        got = pull.pull(theirs, fake.url, "mpsstudio · sweep · resnet18")
        assert (got.runs, got.tools, got.added, got.known) == (1, 1, 2, 0)
        assert got.sentence().startswith("Pulled 1 run and 1 tool result of 'mpsstudio · sweep · resnet18'")
        again = pull.pull(theirs, fake.url, "mpsstudio · sweep · resnet18")
        assert (again.added, again.known) == (0, 2)
        assert pull.experiments(fake.url) == ["mpsstudio · sweep · resnet18", "Default"]
    kept = theirs.tool(sweep.id)
    assert kept is not None and not kept.problem and kept.kind == "sweep"
    assert kept.result["points"] == json.loads(json.dumps(sweep.result["points"]))
    assert kept.result["imported_from"] == f"mpsstudio · sweep · resnet18 on {fake.url}"
    assert theirs.get(run.id) is not None


@pytest.mark.parametrize("spoil, said", [
    (lambda s: s["files"]["t1"].update({mlflow_run.TOOL_FILE: b'{"kind": "sweep", "points": 3}'}),
     "gave the sweep result .* as JSON that is not an export of it"),
    (lambda s: s["entries"][1]["data"]["tags"].__setitem__(1, {"key": mlflow_run.KIND_TAG, "value": "rocket"}),
     "a pushed result of kind 'rocket'"),
    (lambda s: s["entries"][1]["data"]["tags"].__setitem__(1, {"key": mlflow_run.KIND_TAG, "value": "tune"}),
     "as JSON of another result"),
    (lambda s: s["entries"][1]["info"].update({"artifact_uri": "mlflow-artifacts:/1/../../etc/t1/artifacts"}),
     "without its MPS Studio JSON"),
])
def test_a_hostile_answer_about_a_tool_result_is_one_sentence_and_nothing_is_pulled(tmp_path, spoil, said):
    mine, run, sweep = _store(tmp_path)
    respond, state = _server_of(mine, run, sweep)
    spoil(state)
    (tmp_path / "b").mkdir()
    theirs = RunStore(tmp_path / "b" / "runs.sqlite3")
    with FakeServer(respond) as fake:
        with pytest.raises(UserError, match=said) as caught:
            pull.pull(theirs, fake.url, "x")
    assert "\n" not in str(caught.value)
    assert theirs.all() == [] and theirs.tools() == []  # the run that was fine is not kept either: all or none


def test_the_listing_of_experiments_refuses_what_is_not_mlflows_and_the_cli_says_how_to_pull(tmp_path, capsys,
                                                                                            monkeypatch):
    for page in ({"experiments": "many"}, {"experiments": [{"name": 7}]}, {"experiments": [{"name": "x" * 300}]},
                 {"experiments": [], "next_page_token": "t"}):
        with FakeServer(lambda r, page=page: r.answer(200, page)) as fake:
            with pytest.raises(UserError):
                pull.experiments(fake.url)
    monkeypatch.setenv("MPSSTUDIO_DATA_DIR", str(tmp_path))
    with FakeServer(lambda r: r.answer(200, {"experiments": [{"name": "mpsstudio · a"}]})) as fake:
        assert cli.main(["history", "--pull", fake.url]) == 0
    said = capsys.readouterr()
    assert said.out.strip() == "mpsstudio · a" and "--experiment NAME" in said.err


def test_two_copies_of_one_result_from_pushes_that_raced_are_read_once(tmp_path):
    """Two machines holding the same run that pushed at once can leave two MLflow runs of it: a pull reads the one
    every reader chooses alike (pull.once_each), so the experiment stays pullable."""
    mine, run, sweep = _store(tmp_path)
    respond, state = _server_of(mine, run, sweep)
    state["files"]["t0"] = state["files"]["t1"]
    copy = json.loads(json.dumps(state["entries"][1]))
    copy["info"].update({"run_id": "t0", "artifact_uri": "mlflow-artifacts:/1/t0/artifacts"})
    state["entries"].append(copy)
    (tmp_path / "b").mkdir()
    theirs = RunStore(tmp_path / "b" / "runs.sqlite3")
    with FakeServer(respond) as fake:
        got = pull.pull(theirs, fake.url, "x")
        assert (got.runs, got.tools, got.added) == (1, 1, 2)
        assert not any("/1/t1/" in p for p in fake.paths)  # the copy with the smaller MLflow id ("t0") was read
    assert pull.once_each([{"info": {"run_id": "b"}, "data": {"tags": [{"key": mlflow_run.RUN_ID_TAG, "value": "x"}]}},
                           {"info": {"run_id": "a"}, "data": {"tags": [{"key": mlflow_run.RUN_ID_TAG, "value": "x"}]}}]
                          ) == [{"info": {"run_id": "a"}, "data": {"tags": [{"key": mlflow_run.RUN_ID_TAG,
                                                                              "value": "x"}]}}]
