"""A tracking server that answers what MLflow's API does not, or refuses: one sentence each, nothing taken into the
local history, no secret kept (tests/support/fake_mlflow.py); a server that is down: the runs wait in the history's
queue, said; Bencher's metric format checked field by field; addresses that carry a secret refused."""

from __future__ import annotations

import json

import pytest

from mpsstudio import cli
from mpsstudio.engine.basics.errors import UserError
from mpsstudio.engine.history.store import RunStore
from mpsstudio.engine.team import bmf, pull, push
from mpsstudio.engine.team.server import Server, check_url
from tests.support.fake_mlflow import FakeServer
from tests.support.mlflow_server import free_port
from tests.support.runs import noisy_rates, run_with


def _store(tmp_path, n=2):
    store = RunStore(tmp_path / "runs.sqlite3")
    runs = [run_with("mps", noisy_rates(100.0 * (i + 1), 0.02, n=12, seed=i), machine="M3 (macOS 15.5)",
                     created=f"2026-12-0{i + 1}T10:00:00+00:00") for i in range(n)]
    for r in runs:
        store.save(r)
    return store, runs


def _experiment_then(answer):
    """A server that answers as MLflow's does at first (a search of experiments, experiment "1") and then every
    other call with `answer(request)`."""
    def respond(request):
        if "experiments/get-by-name" in request.path:
            request.answer(200, {"experiment": {"experiment_id": "1", "name": "x"}})
        elif "experiments/search" in request.path:
            request.answer(200, {"experiments": []})
        else:
            answer(request)
    return respond


@pytest.mark.parametrize("answer, said", [
    (lambda r: r.answer(200, b"<html>not json</html>"), "with something that is not JSON"),
    (lambda r: r.answer(200, [1, 2, 3]), "JSON that is not an object"),
    (lambda r: r.answer(200, {"runs": "lots"}), "runs that are not objects"),
    (lambda r: r.answer(200, {"runs": [], "run": {"info": {"run_id": 7}}}), "no run_id"),
    (lambda r: r.answer(200, b"{" + b'"a": [' * 100_000 + b"]" * 100_000 + b"}"), "not JSON"),
    (lambda r: r.answer(200, b'{"runs": [], "x": "' + b"a" * (9 * 1024 * 1024) + b'"}'), "more than 8 MiB"),
    (lambda r: r.answer(200, b'{"runs": NaN}'), "not JSON"),
])
def test_each_malformed_answer_to_a_push_is_one_sentence_and_the_runs_wait(tmp_path, answer, said):
    store, runs = _store(tmp_path)
    with FakeServer(_experiment_then(answer)) as fake:
        with pytest.raises(UserError, match=said) as caught:
            push.push(store, fake.url, [r.id for r in runs])
    assert "\n" not in str(caught.value) and "Traceback" not in str(caught.value)
    assert str(caught.value).endswith("; 2 runs wait in the history for the next push.")
    assert {w.run_id for w in store.queue.waiting(fake.url)} == {r.id for r in runs}  # nothing lost


@pytest.mark.parametrize("answer, said", [
    (lambda r: r.answer(404, b"<html>Not Found</html>"), "does not answer as an MLflow tracking server does"),
    (lambda r: r.answer(200, b"<html>a web page</html>"), "with something that is not JSON"),
    (lambda r: r.answer(401, b"You are not authenticated."), "asks for credentials"),
])
def test_an_address_that_is_not_mlflows_queues_nothing(tmp_path, answer, said):
    """A typo, a web page, a refusal of who we are: said before anything waits, so the history keeps no queue for an
    address that will never take it."""
    store, runs = _store(tmp_path)
    with FakeServer(answer) as fake:
        with pytest.raises(UserError, match=said):
            push.push(store, fake.url + "/ajax-api", [r.id for r in runs])
    assert store.queue.waiting() == []


@pytest.mark.parametrize("page, said", [
    ({"runs": [{"info": "x"}]}, "without the info"),
    ({"runs": [{}] * 501}, "a list of at most 500 runs"),
    ({"runs": [], "next_page_token": "same"}, "page token that does not page on"),
    ({"runs": [{"info": {"artifact_uri": "s3://bucket/x"}, "data": {"tags": []}}]}, "without its MPS Studio JSON"),
    ({"runs": [{"info": {"artifact_uri": "mlflow-artifacts:/1/r/artifacts"},
                "data": {"tags": [{"key": "mpsstudio.run_id", "value": "abc"}]}}]}, "not an export of it"),
])
def test_each_hostile_answer_to_a_pull_is_one_sentence_and_the_history_is_unchanged(tmp_path, page, said):
    store, runs = _store(tmp_path)
    before = sorted(r.id for r in store.all())

    def respond(request):
        if "runs/search" in request.path:
            request.answer(200, page)
        elif "mlflow-artifacts" in request.path:
            request.answer(200, b'{"format": "something else"}')
        else:
            request.answer(200, {"experiment": {"experiment_id": "1"}})

    with FakeServer(_experiment_then(respond)) as fake:
        with pytest.raises(UserError, match=said):
            pull.pull(store, fake.url, "mpsstudio · x")
    assert sorted(r.id for r in store.all()) == before


def test_a_server_that_is_down_leaves_the_runs_queued_and_says_so(tmp_path, capsys, monkeypatch):
    store, runs = _store(tmp_path)
    store.close()
    monkeypatch.setenv("MPSSTUDIO_DATA_DIR", str(tmp_path))
    url = f"http://127.0.0.1:{free_port()}"  # nobody listens
    assert cli.main(["history", "--push", url]) == 1
    err = capsys.readouterr().err
    assert "2 runs wait for the team's server" in err and "did not answer" in err and "Traceback" not in err
    waiting = RunStore(tmp_path / "runs.sqlite3").queue.waiting(url)
    assert [w.attempts for w in waiting] == [1, 0] and {w.run_id for w in waiting} == {r.id for r in runs}
    assert cli.main(["history"]) == 0  # the history says what waits, and how to stop it
    err = capsys.readouterr().err
    assert f"2 runs wait for the team's server at {url}: it did not answer" in err and "--drop-queue" in err
    assert cli.main(["history", "--drop-queue", url + "/"]) == 0
    assert "2 runs no longer wait for the team's server; they stay in the history." in capsys.readouterr().err
    store = RunStore(tmp_path / "runs.sqlite3")
    assert store.queue.waiting() == [] and len(store.summaries()) == 2


def test_a_5xx_or_a_slow_server_is_waited_for_and_a_4xx_refusal_names_the_run(tmp_path):
    store, runs = _store(tmp_path, n=1)
    with FakeServer(_experiment_then(lambda r: r.answer(503, {"message": "maintenance"}))) as fake:
        done = push.push(store, fake.url, [runs[0].id])
    assert done.waiting and "503" in done.waiting[0][1] and store.queue.waiting(fake.url)

    def slow(request):
        import time
        time.sleep(1.5)
        request.answer(200, {})

    with FakeServer(slow) as fake:
        done = push.push(store, fake.url, [runs[0].id], server=Server(fake.url, timeout_s=0.5))
    assert done.waiting and "did not answer" in done.waiting[0][1]

    def conflict(request):
        if "experiments/search" in request.path:
            request.answer(200, {"experiments": []})
        elif "runs/search" in request.path:
            request.answer(200, {"runs": []})
        elif "runs/create" in request.path:
            request.answer(200, {"run": {"info": {"run_id": "r1", "artifact_uri": "file:///x"}}})
        else:
            request.answer(400, {"error_code": "INVALID_PARAMETER_VALUE", "message": "Changing param values is not "
                                 "allowed"})

    with FakeServer(_experiment_then(conflict)) as fake:
        done = push.push(store, fake.url, [runs[0].id])
    assert done.waiting and "Changing param values" in done.waiting[0][1]


def test_addresses_that_would_keep_a_secret_are_refused(tmp_path):
    for bad in ("http://alice:pw@host:5000", "http://host:5000/?token=abc", "ftp://host", "not a url", "http://"):
        with pytest.raises(UserError):
            check_url(bad)
    assert check_url("https://mlflow.team.example:8443/base/") == "https://mlflow.team.example:8443/base"
    store, runs = _store(tmp_path, n=1)
    with pytest.raises(UserError, match="No run or tool result nope"):
        push.push(store, "http://127.0.0.1:1", ["nope"])


def test_bmf_export_has_bencher_fields_and_types_with_the_interval(tmp_path, capsys, monkeypatch):
    """Bencher's metric format: {benchmark name: {measure slug: {"value": number, "lower_value"?: number,
    "upper_value"?: number}}}, lower <= value <= upper; the newest run of a setup stands for it."""
    store, runs = _store(tmp_path)
    store.close()
    monkeypatch.setenv("MPSSTUDIO_DATA_DIR", str(tmp_path))
    out = tmp_path / "bmf.json"
    assert cli.main(["history", "--export-bmf", str(out)]) == 0
    doc = json.loads(out.read_text())
    assert isinstance(doc, dict) and len(doc) == 1  # both runs are one setup: the newest stands
    (name, measures), = doc.items()
    assert name == "mlp · shapes · mps · fp32 · batch 64"
    for slug, m in measures.items():
        assert slug in ("throughput", "latency", "peak-memory") and isinstance(m, dict)
        assert set(m) <= {"value", "lower_value", "upper_value"} and "value" in m
        assert all(isinstance(v, float) for v in m.values())
    t = measures["throughput"]
    assert t["lower_value"] <= t["value"] <= t["upper_value"] and t["value"] == pytest.approx(
        runs[1].summary.samples_per_s)
    assert "peak-memory" not in measures  # an MPS run's memory is not a peak
    assert bmf.document([]) == {}
def test_a_wrong_token_is_one_sentence_and_kept_in_no_file(tmp_path, monkeypatch):
    """A server that refuses the credentials: one sentence naming what to set; the token was sent as MLflow's
    client sends it (a bearer token) and is in no file the history wrote."""
    store, runs = _store(tmp_path, n=1)
    run = runs[0]
    secret = "s3cr3t-token-value-42"
    monkeypatch.setenv("MLFLOW_TRACKING_TOKEN", secret)
    with FakeServer(lambda handler: handler.answer(401, {"error_code": "UNAUTHENTICATED"})) as fake:
        with pytest.raises(UserError, match="refused the credentials .*MLFLOW_TRACKING_TOKEN"):
            push.push(store, fake.url, [run.id])
        assert fake.headers[0].get("Authorization") == f"Bearer {secret}"
    store.close()
    for path in tmp_path.rglob("*"):
        if path.is_file():
            assert secret.encode() not in path.read_bytes(), path


def test_a_redirect_is_not_followed_so_the_token_goes_nowhere_else(tmp_path, monkeypatch):
    monkeypatch.setenv("MLFLOW_TRACKING_TOKEN", "tok-123")
    with FakeServer(lambda r: r.answer(200, {"experiment": {"experiment_id": "1"}})) as elsewhere:
        def away(request):
            request.send_response(302)
            request.send_header("Location", elsewhere.url + "/api/2.0/mlflow/experiments/get-by-name")
            request.send_header("Content-Length", "0")
            request.end_headers()

        with FakeServer(away) as fake:
            with pytest.raises(UserError, match="302"):
                pull.pull(RunStore(tmp_path / "runs.sqlite3"), fake.url, "x")
    assert elsewhere.headers == []  # nothing, and no token, reached the other host


def test_an_answer_that_drips_forever_ends_within_its_deadline(tmp_path):
    import time

    def drip(request):
        request.send_response(200)
        request.send_header("Content-Type", "application/json")
        request.end_headers()
        try:
            for _ in range(400):
                request.wfile.write(b" ")
                request.wfile.flush()
                time.sleep(0.01)
        except OSError:
            pass

    with FakeServer(drip) as fake:
        started = time.monotonic()
        with pytest.raises(UserError, match="did not answer"):
            pull.pull(RunStore(tmp_path / "runs.sqlite3"), fake.url, "x", server=Server(fake.url, timeout_s=0.1))
    assert time.monotonic() - started < 4.0  # the drip lasts 4 s; the whole answer's deadline is 0.6 s


def test_an_answer_cut_short_waits_and_https_spoken_to_http_is_said(tmp_path):
    """A server that dies in the middle of an answer (fewer bytes than it promised) did not answer: the runs wait; a
    TLS failure will not pass by waiting: one sentence, nothing queued."""
    store, runs = _store(tmp_path, n=1)

    def short(request):
        if "experiments/search" in request.path:
            request.answer(200, {"experiments": []})
            return
        request.send_response(200)
        request.send_header("Content-Type", "application/json")
        request.send_header("Content-Length", "500")
        request.end_headers()
        request.wfile.write(b'{"experiment": {"experiment_id"')
        request.close_connection = True

    with FakeServer(short) as fake:
        done = push.push(store, fake.url, [runs[0].id])
    assert done.waiting and "cut off" in done.waiting[0][1] and store.queue.waiting(fake.url)
    with FakeServer(lambda r: r.answer(200, {})) as fake:
        url = fake.url.replace("http://", "https://")
        with pytest.raises(UserError, match="could not be reached over TLS .*http or https"):
            push.push(store, url, [runs[0].id], server=Server(url, timeout_s=3))
    assert store.queue.waiting(url) == []


@pytest.mark.parametrize("url", ["http://a..b:5000", "http://" + "a" * 5000 + ".com", "http://127.0.0.1:5099/ a b",
                                 "http://127.0.0.1:5099/\x1b[31mred", "http://127.0.0.1:0"])
def test_an_address_no_request_can_be_made_to_is_one_sentence_and_queues_nothing(tmp_path, capsys, monkeypatch, url):
    store, runs = _store(tmp_path, n=1)
    store.close()
    monkeypatch.setenv("MPSSTUDIO_DATA_DIR", str(tmp_path))
    for command in (["history", "--push", url], ["history", "--pull", url, "--experiment", "x"]):
        assert cli.main(command) == 2
        err = capsys.readouterr().err
        assert "is not a tracking server's address" in err and "Traceback" not in err and len(err) < 400
    assert RunStore(tmp_path / "runs.sqlite3").queue.waiting() == []


def test_a_short_id_as_the_progress_lines_show_it_is_taken_and_a_bad_experiment_name_refused(tmp_path):
    store, runs = _store(tmp_path)
    assert push.check_ids(store, [runs[0].id[:8]]) == [runs[0].id]
    with pytest.raises(UserError, match="No run or tool result abc"):
        push.check_ids(store, ["abc"])  # under 8 characters: no prefix match
    for name in ("  ", "x" * 300, "two\nlines"):
        with pytest.raises(UserError, match="is not an experiment name"):
            push.push(store, "http://127.0.0.1:1", [runs[0].id], experiment=name)
    assert store.queue.waiting() == []
