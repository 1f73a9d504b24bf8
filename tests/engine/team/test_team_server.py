"""A team's history on a real MLflow tracking server (`mlflow server` on 127.0.0.1, tests/support/mlflow_server.py):
runs pushed are found through MLflow's own search API with their params, interval metrics and fingerprint tags;
pushing again changes nothing; a second history pulls them and compares the two machines' runs; the server killed
in the middle of a push and started again: every run there exactly once; a wrong token: one sentence."""

from __future__ import annotations

import base64
import json
import urllib.request

import pytest

import urllib.parse

from mpsstudio import cli
from mpsstudio.engine.basics.errors import UserError
from mpsstudio.engine.history.store import RunStore, ToolRecord
from mpsstudio.engine.team import credentials, mlflow_run, pull, push
from mpsstudio.engine.team.server import Server
from tests.support import mlflow_server, postgres
from tests.support.fake_keychain import mac_keychain
from tests.support.results import sweep_result
from tests.support.runs import noisy_rates, run_with

pytestmark = [pytest.mark.long,
              pytest.mark.skipif(mlflow_server.executable() is None, reason="no mlflow: `make mlflow-server`")]


def _runs(machine: str, rates: list[float], seed: int = 0):
    """Finished mps runs of one setup on `machine`, one a day, each of 20 windows around its rate."""
    return [run_with("mps", noisy_rates(rate, 0.02, n=20, seed=seed + i), machine=machine, model="resnet18",
                     dataset="cifar10", created=f"2026-12-0{i + 1}T10:00:00+00:00") for i, rate in enumerate(rates)]


def _search(url: str, body: dict) -> dict:
    request = urllib.request.Request(url + "/api/2.0/mlflow/runs/search", data=json.dumps(body).encode(),
                                     method="POST", headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=10) as answer:
        return json.loads(answer.read())


def _experiment(url: str, name: str) -> str:
    query = urllib.parse.urlencode({"experiment_name": name})
    with urllib.request.urlopen(f"{url}/api/2.0/mlflow/experiments/get-by-name?{query}", timeout=10) as answer:
        return json.loads(answer.read())["experiment"]["experiment_id"]


@pytest.fixture(params=["sqlite", "postgresql"])
def server(request, tmp_path):
    """A real server on its default SQLAlchemy store (a SQLite file), and on PostgreSQL (a private cluster of
    Debian's PostgreSQL, tests/support/postgres.py) where the machine has it and MLflow's environment psycopg."""
    database = None
    if request.param == "postgresql":
        if postgres.binaries() is None or not mlflow_server.has_module("psycopg"):
            pytest.skip("no PostgreSQL here (Debian's postgresql) or no psycopg beside mlflow (make mlflow-server)")
        database = postgres.Postgres(tmp_path / "pg", mlflow_server.free_port()).start()
    found = mlflow_server.MlflowServer(tmp_path, database.uri if database else None).start()
    yield found
    found.kill()
    if database is not None:
        database.stop()


def test_runs_pushed_are_found_by_mlflows_search_once_and_a_second_history_compares_them(server, tmp_path, capsys,
                                                                                         monkeypatch):
    mine = RunStore(tmp_path / "mine.sqlite3")
    runs = _runs("M3 Max (macOS 15.5)", [1000.0, 1010.0])
    for run in runs:
        mine.save(run)
    sweep = ToolRecord(kind="sweep", result=sweep_result("alice-mbp"), created_at="2026-12-03T10:00:00+00:00")
    mine.save_tool(sweep)
    done = push.push(mine, server.url, push.everything(mine))
    assert sorted(done.sent) == sorted([*(r.id for r in runs), sweep.id]) and not done.waiting
    assert not mine.queue.waiting() and done.sentence().startswith("Pushed 2 runs and 1 tool result to ")
    again = push.push(mine, server.url, [r.id for r in runs])
    assert not again.sent and sorted(again.already) == sorted(r.id for r in runs)

    tool_exp = _experiment(server.url, "mpsstudio · sweep · resnet18 · cifar10")
    (found_tool,) = _search(server.url, {"experiment_ids": [tool_exp], "max_results": 100})["runs"]
    tool_tags = {t["key"]: t["value"] for t in found_tool["data"]["tags"]}
    assert tool_tags[mlflow_run.KIND_TAG] == "sweep" and tool_tags[mlflow_run.RUN_ID_TAG] == sweep.id
    assert tool_tags["mpsstudio.env.machine"] == "M3 Max (macOS 15.5)" and tool_tags[mlflow_run.DONE_TAG] == "1"
    query = urllib.parse.urlencode({"run_id": found_tool["info"]["run_id"]})
    with urllib.request.urlopen(f"{server.url}/api/2.0/mlflow/artifacts/list?{query}", timeout=10) as answer:
        files = {f["path"] for f in json.loads(answer.read())["files"]}
    assert files == {mlflow_run.TOOL_FILE, mlflow_run.REPORT_FILE}

    exp = _experiment(server.url, mlflow_run.experiment_name(runs[0]))
    found = _search(server.url, {"experiment_ids": [exp], "max_results": 100})["runs"]
    assert len(found) == 2  # pushed twice: each run once
    first = next(r for r in found if any(t["value"] == runs[0].id for t in r["data"]["tags"]))
    metrics = {m["key"]: m["value"] for m in first["data"]["metrics"]}
    params = {p["key"]: p["value"] for p in first["data"]["params"]}
    tags = {t["key"]: t["value"] for t in first["data"]["tags"]}
    expected = mlflow_run.throughput(runs[0])
    assert metrics["samples_per_s"] == pytest.approx(expected["median"])
    assert metrics["samples_per_s_low"] <= metrics["samples_per_s"] <= metrics["samples_per_s_high"]
    assert params["batch_size"] == str(runs[0].config.batch_size) and params["device"] == runs[0].config.device
    assert tags["mpsstudio.machine"] == "M3 Max (macOS 15.5)" and tags[mlflow_run.DONE_TAG] == "1"
    assert "interval of the median" in tags["mpsstudio.samples_per_s.interval"] or "range over" in \
        tags["mpsstudio.samples_per_s.interval"]

    (tmp_path / "theirs").mkdir()
    theirs = RunStore(tmp_path / "theirs" / "runs.sqlite3")
    for run in _runs("RTX box (Linux)", [2000.0], seed=7):
        theirs.save(run)
    assert "mpsstudio · sweep · resnet18 · cifar10" in pull.experiments(server.url)
    got_tool = pull.pull(theirs, server.url, "mpsstudio · sweep · resnet18 · cifar10")
    assert (got_tool.tools, got_tool.added) == (1, 1) and theirs.tool(sweep.id).result["points"]
    got = pull.pull(theirs, server.url, mlflow_run.experiment_name(runs[0]))
    assert (got.runs, got.added, got.known) == (2, 2, 0)
    assert pull.pull(theirs, server.url, mlflow_run.experiment_name(runs[0])).added == 0
    pulled = theirs.get(runs[0].id)
    assert pulled is not None and pulled.origin == "imported" and pulled.machine == "M3 Max (macOS 15.5)"
    assert pulled.summary.samples_per_s == pytest.approx(runs[0].summary.samples_per_s)
    theirs.close()
    monkeypatch.setenv("MPSSTUDIO_DATA_DIR", str(tmp_path / "theirs"))
    capsys.readouterr()
    assert cli.main(["history", "--compare"]) == 0
    said = capsys.readouterr().out
    assert "M3 Max (macOS 15.5)" in said and "RTX box (Linux)" in said and "[" in said, said


def test_a_server_killed_mid_push_gets_every_run_exactly_once_after_it_restarts(server, tmp_path, monkeypatch):
    store = RunStore(tmp_path / "runs.sqlite3")
    runs = _runs("M4 (macOS 26.1)", [500.0, 510.0, 520.0])
    for run in runs:
        store.save(run)
    calls = {"n": 0}
    real = Server.call

    def dying(self, *args, **kwargs):
        calls["n"] += 1
        if calls["n"] == 12:  # the second run's create or batches: part of it on the server
            server.kill()
        return real(self, *args, **kwargs)

    monkeypatch.setattr(Server, "call", dying)
    done = push.push(store, server.url, [r.id for r in runs])
    assert done.waiting and len(done.sent) < 3
    assert {w.run_id for w in store.queue.waiting(server.url)} == {r.id for r in runs} - set(done.sent)
    monkeypatch.setattr(Server, "call", real)
    server.start()
    finished = push.push(store, server.url, [])
    assert not finished.waiting and set(done.sent) | set(finished.sent) | set(finished.already) == {r.id for r in runs}
    exp = _experiment(server.url, mlflow_run.experiment_name(runs[0]))
    found = _search(server.url, {"experiment_ids": [exp], "max_results": 100})["runs"]
    ids = sorted(t["value"] for r in found for t in r["data"]["tags"] if t["key"] == mlflow_run.RUN_ID_TAG)
    assert ids == sorted(r.id for r in runs)  # each once
    for r in found:  # every window's metric once, though the cut-off run's batches were logged twice
        query = urllib.parse.urlencode({"run_id": r["info"]["run_id"], "metric_key": "window_samples_per_s"})
        with urllib.request.urlopen(f"{server.url}/api/2.0/mlflow/metrics/get-history?{query}", timeout=10) as got:
            history = json.loads(got.read())["metrics"]
        assert sorted(m["step"] for m in history) == list(range(20))


@pytest.mark.skipif(not mlflow_server.has_module("flask_wtf"), reason="no mlflow[auth] beside mlflow (make mlflow-server)")
def test_mlflows_basic_auth_app_takes_the_keychains_password_and_refuses_others_in_one_sentence(tmp_path, monkeypatch):
    """A real `mlflow server --app-name basic-auth`: no credentials, a wrong password, a user who may only read: one
    sentence each and the runs wait; the admin's password kept by --login's code: pushed, each once."""
    admin = "team-admin-pass-9x"
    server = mlflow_server.MlflowServer(tmp_path, admin_password=admin).start()
    keychain, _ = mac_keychain(monkeypatch)
    monkeypatch.setattr(credentials, "system_keychain", keychain)
    store = RunStore(tmp_path / "runs.sqlite3")
    runs = _runs("M2 Ultra (macOS 15.5)", [700.0, 710.0])
    for run in runs:
        store.save(run)
    try:
        with pytest.raises(UserError, match=r"asks for credentials \(401\) and none were found; keep a token"):
            push.push(store, server.url, [runs[0].id])
        credentials.remember(server.url, "not-the-password", "admin")
        with pytest.raises(UserError, match=r"refused the credentials from the keychain \(401\); keep a user and "
                                             r"password it accepts with `mpsstudio history --login .* --user NAME"):
            push.push(store, server.url, [runs[0].id])
        assert store.queue.waiting(server.url) == []  # refused before anything waits; the run stays in the history

        credentials.remember(server.url, admin, "admin")
        done = push.push(store, server.url, [runs[0].id])
        assert done.sent == [runs[0].id] and not store.queue.waiting(server.url)
        request = urllib.request.Request(
            server.url + "/api/2.0/mlflow/users/create", method="POST",
            data=json.dumps({"username": "reader", "password": "reader-pass-12345"}).encode(),
            headers={"Content-Type": "application/json", "Authorization": "Basic " + base64.b64encode(
                f"admin:{admin}".encode()).decode()})
        urllib.request.urlopen(request, timeout=10).close()
        credentials.remember(server.url, "reader-pass-12345", "reader")  # the experiment is the admin's: read only
        with pytest.raises(UserError, match=r"does not let the user of the credentials from the keychain do this "
                                             r"\(403: allowed to read, not to write\?\)") as caught:
            push.push(store, server.url, [runs[1].id])
        assert str(caught.value).endswith("; 1 run waits in the history for the next push.")
    finally:
        server.kill()
    for path in tmp_path.rglob("runs.sqlite3*"):
        assert admin.encode() not in path.read_bytes() and b"reader-pass" not in path.read_bytes()
