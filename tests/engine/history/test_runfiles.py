"""Imports are all or nothing: every malformed kind of file is refused in one sentence naming the run and the
field, and the history is left byte for byte as it was (the window and `history` keep working)."""

from __future__ import annotations

import copy
import hashlib
import json

import pytest

from mpsstudio import cli
from mpsstudio.engine.basics.errors import UserError
from mpsstudio.engine.history.runfiles import export_json, import_json
from mpsstudio.engine.history.store import RunStore
from tests.support.runs import good_run


def good_doc():
    return {"format": "mpsstudio.runs", "version": 1, "runs": [good_run().to_dict()], "comparisons": []}


def deep(levels: int) -> str:
    return '{"format": "mpsstudio.runs", "version": 1, "runs": [' + "[" * levels + "]" * levels + "]}"


def edit(**changes):
    """A good file with one field changed: 'config.batch_size' style keys reach into the first run."""
    def make():
        doc = good_doc()
        for dotted, value in changes.items():
            target = doc if dotted in ("format", "version", "runs", "comparisons") else doc["runs"][0]
            *parents, last = dotted.split(".")
            for key in parents:
                target = target[key]
            if value is _DELETE:
                del target[last]
            else:
                target[last] = value
        return json.dumps(doc)
    return make


_DELETE = object()

MALFORMED = {
    "not JSON": (lambda: "{not json", "is not valid JSON"),
    "empty file": (lambda: "", "is not valid JSON"),
    "a list": (lambda: "[1, 2]", "is not an MPS Studio export"),
    "no format": (edit(format=_DELETE), "is not an MPS Studio export"),
    "other format": (edit(format="something.else"), "is not an MPS Studio export"),
    "newer version": (edit(version=2), "cannot read (it reads version 1)"),
    "version as text": (edit(version="1"), "has no version number"),
    "comparisons not a list": (edit(comparisons="x"), "'comparisons' that are not a list"),
    "runs not a list": (edit(runs={"a": 1}), "has no list of runs"),
    "run not an object": (edit(runs=[5]), "invalid 'run'"),
    "model is a number": (edit(**{"config.model": 5}), "invalid 'config'"),
    "steps as text": (edit(**{"config.steps": "abc"}), "invalid 'config' (Steps must be a whole number"),
    "lr as text": (edit(**{"config.lr": "fast"}), "Learning rate must be a number"),
    "device null": (edit(**{"config.device": None}), "The device must be cpu, mps, cuda or cuda:N"),
    "precision a list": (edit(**{"config.precision": ["fp32"]}), "Unknown precision"),
    "batch size 1e30": (edit(**{"config.batch_size": 1e30}), "Batch size must be a whole number"),
    "batch size 400 digits": (lambda: edit()().replace('"batch_size": 64', '"batch_size": ' + "9" * 400),
                              "Batch size must be a whole number"),
    "lr of 400 digits": (lambda: edit()().replace('"lr": 0.01', '"lr": ' + "9" * 400), "Learning rate must be"),
    "unknown setting": (edit(**{"config.turbo": True}), "invalid 'config.turbo'"),
    "missing config": (edit(config=_DELETE), "invalid 'config' (missing)"),
    "bad status": (edit(status="exploded"), "invalid 'status'"),
    "bad id": (edit(id="../../etc"), "invalid 'id'"),
    "bad timestamp": (edit(created_at="yesterday"), "invalid 'created_at'"),
    "final loss as text": (edit(**{"summary.final_loss": "abc"}), "invalid 'summary.final_loss'"),
    "negative throughput": (edit(**{"summary.samples_per_s": -5}), "invalid 'summary.samples_per_s'"),
    "infinite warm-up": (lambda: edit()().replace('"final_loss": 0.5', '"warmup_s": Infinity'),
                         "is not an export of runs"),
    "NaN throughput": (lambda: edit()().replace('"samples_per_s": 900.0,', '"samples_per_s": NaN,', 1),
                       "is not an export of runs"),
    "loss as text": (edit(steps=[{"step": 1, "loss": "abc"}]), "invalid 'steps[0].loss'"),
    "windows a number": (edit(windows=5), "invalid 'windows'"),
    "a fractional epoch": (edit(**{"summary.best_epoch": 2.5}), "invalid 'summary.best_epoch'"),
    "env a list": (edit(env=[1]), "invalid 'env'"),
    "env nested too deep": (edit(env={"a": {"b": {"c": {"d": {"e": {"f": {"g": {"h": {"i": {"j": 1}}}}}}}}}}), "nested more than"),
    "5,000 levels of nesting": (lambda: deep(5_000), "not an export of runs"),
    "100,000 levels of nesting": (lambda: deep(100_000), "not an export of runs"),
    "second run bad": (lambda: json.dumps({**good_doc(), "runs": [good_run("b" * 32).to_dict(), {"id": "x"}]}),
                       "(run 2)"),
    "the same id twice": (lambda: json.dumps({**good_doc(), "runs": [good_run().to_dict()] * 2}), "twice"),
}


def fingerprint(folder) -> dict:
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(folder.iterdir()) if p.is_file()}


@pytest.fixture
def history(tmp_path, monkeypatch):
    folder = tmp_path / "data"
    monkeypatch.setenv("MPSSTUDIO_DATA_DIR", str(folder))
    store = RunStore()
    store.save(good_run("c" * 32, device="cpu"))
    store.close()
    return folder


def test_there_are_at_least_twenty_kinds():
    assert len(MALFORMED) >= 20


@pytest.mark.parametrize("kind", list(MALFORMED))
def test_a_malformed_file_is_one_sentence_and_leaves_the_history_unchanged(kind, history, tmp_path, capsys):
    make, expected = MALFORMED[kind]
    path = tmp_path / "import.json"
    path.write_text(make())
    before = fingerprint(history)
    with pytest.raises(UserError) as err:
        import_json(path)
    assert expected in str(err.value)
    assert "\n" not in str(err.value) and len(str(err.value)) < 600
    assert cli.main(["history", "--import", str(path)]) == 2
    captured = capsys.readouterr()
    assert len(captured.err.strip().splitlines()) == 1 and "Traceback" not in captured.err
    assert fingerprint(history) == before
    assert [r.id for r in RunStore().all()] == ["c" * 32]


def test_a_good_file_imports_whole_and_never_replaces_a_run(history, tmp_path, capsys):
    path = tmp_path / "server.json"
    local = RunStore().all()[0]
    impostor = copy.deepcopy(local)
    impostor.summary = impostor.summary.replaced(samples_per_s=1.0)
    impostor.env["machine_label"] = "IMPOSTER"
    export_json([good_run(), impostor], path)
    assert cli.main(["history", "--import", str(path)]) == 0
    err = capsys.readouterr().err
    assert "imported 1 run from" in err and "1 already in the history" in err
    runs = {r.id: r for r in RunStore().all()}
    assert runs[local.id].machine != "IMPOSTER" and runs[local.id].origin == "local"
    assert runs["a" * 32].origin == "imported"
    assert cli.main(["history", "--import", str(path)]) == 0  # again: nothing new
    assert "imported 0 runs" in capsys.readouterr().err


def test_names_from_a_file_cannot_drive_the_terminal(history, tmp_path, capsys):
    run = good_run()
    run.config = run.config.changed(model="evil\x1b[2J\nfake row")
    run.env["machine_label"] = "box\r\x1b[31m"
    path = tmp_path / "evil.json"
    export_json([run], path)
    assert cli.main(["history", "--import", str(path)]) == 0
    out = capsys.readouterr().out
    assert "\x1b" not in out and "\r" not in out and "evil?[2J?fake row" in out


def test_a_bad_row_left_by_an_older_version_is_skipped_with_a_notice(history, capsys):
    import sqlite3

    with sqlite3.connect(history / "runs.sqlite3") as db:
        row = db.execute("SELECT * FROM runs").fetchone()
        bad = list(row)
        bad[0] = "d" * 32
        bad[11] = json.dumps({**json.loads(row[11]), "model": 5})  # config_json
        db.execute(f"INSERT INTO runs VALUES ({','.join('?' * len(bad))})", bad)
    store = RunStore()
    assert [r.id for r in store.all()] == ["c" * 32]
    assert "1 stored run could not be read" in store.notices[0]
    assert cli.main(["history"]) == 0
    captured = capsys.readouterr()
    assert "could not be read" in captured.err and "cpu" in captured.out
    assert cli.main(["history", "--delete", "d" * 32]) == 0
    assert RunStore().all() and not RunStore().notices


def test_a_summary_whose_windows_were_removed_shows_no_throughput(tmp_path):
    path = tmp_path / "import.json"
    path.write_text(edit(windows=[], **{"summary.windows": 4, "summary.samples_per_s": 1e9})())
    [run] = import_json(path)
    assert run.summary.samples_per_s is None and run.summary.windows == 0
