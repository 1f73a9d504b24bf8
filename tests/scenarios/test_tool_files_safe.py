"""Tool results as safe as runs (issue 35), the smaller cases: an export never written over its own weights, nor left
behind by a stop that came at its last moment; a full disk said so; Ctrl-C while a run process starts; pending
files and journals of the same result; tool files imported twice; empty lists on the command line."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
from pathlib import Path

import pytest

from mpsstudio import cli
from mpsstudio.engine.history import pending
from mpsstudio.engine.history.rows import ToolRecord
from mpsstudio.engine.history.store import RunStore
from mpsstudio.engine.process import journal
from tests.support.paths import DATA as TESTS_DATA

DATA = TESTS_DATA / "tool_results"
SWEEP = json.loads((DATA / "sweep.json").read_text())
INSPECT = json.loads((DATA / "inspect.json").read_text())


def _body(doc: dict) -> dict:
    return {k: v for k, v in doc.items() if k not in ("kind", "id", "created_at")}


# ---------------------------------------------------------------- export


def test_an_export_is_never_written_over_the_weights_it_is_made_from(tmp_path, capsys):
    from mpsstudio.engine.models import registry as models
    from mpsstudio.engine.models import saved

    spec = models.input_spec_for("mlp", models.get_model_info("mlp").default_spec)
    weights = tmp_path / "trained.pt"
    saved.save(models.build_model("mlp", spec), weights, {
        "model": "mlp", "num_classes": spec.num_classes, "classes": [str(i) for i in range(spec.num_classes)],
        "input": {"kind": "image", "channels": spec.channels, "height": spec.height, "width": spec.width},
        "normalization": {"mean": [0.5], "std": [0.25], "scale": "pixels / 255"}, "dataset": "shapes"})
    before = weights.read_bytes()
    code = cli.main(["export", "--weights", str(weights), "--format", "torchscript", "--out", str(weights)])
    assert code == cli.EXIT_BAD_INPUT
    assert "--out trained.pt is the weights file the export is made from; choose another path" in \
        capsys.readouterr().err
    os.link(weights, tmp_path / "other.pt")  # the same file by another name
    assert cli.main(["export", "--weights", str(weights), "--format", "torchscript", "--out",
                     str(tmp_path / "other.pt")]) == cli.EXIT_BAD_INPUT
    assert weights.read_bytes() == before


def test_an_export_stopped_at_its_last_moment_does_not_land(tmp_path, monkeypatch, capsys):
    """The child finishes the file; the parent is interrupted before it has the answer: nothing lands at --out, an
    earlier file there stays, and nothing staged is left beside it."""
    from mpsstudio.engine import process

    out = tmp_path / "m.pt"
    out.write_bytes(b"an earlier export")
    real = process.run_tool

    def finished_then_interrupted(*args, **kwargs):
        real(*args, **kwargs)  # the export ran to the end, staged beside --out ...
        assert any(p.name.startswith(".m.pt.") for p in tmp_path.iterdir())
        raise KeyboardInterrupt  # ... and Ctrl-C came before its answer was read
    monkeypatch.setattr(process, "run_tool", finished_then_interrupted)
    code = cli.main(["export", "--model", "mlp", "--format", "torchscript", "--out", str(out)])
    assert code == 130
    assert out.read_bytes() == b"an earlier export" and sorted(p.name for p in tmp_path.iterdir()) == ["m.pt"]


def test_an_export_lands_only_when_its_answer_is_in(tmp_path, capsys):
    out = tmp_path / "m.pt"
    assert cli.main(["export", "--model", "mlp", "--format", "torchscript", "--out", str(out)]) == cli.EXIT_OK
    assert out.is_file() and sorted(p.name for p in tmp_path.iterdir()) == ["m.pt"]
    assert f"to {out}" in capsys.readouterr().out


# ---------------------------------------------------------------- a full disk, Ctrl-C at a start


def test_a_full_disk_is_said_so_when_sqlite_calls_it_a_disk_i_o_error(tmp_path, monkeypatch):
    import shutil

    from mpsstudio.engine.history import schema

    monkeypatch.setattr(shutil, "disk_usage", lambda p: shutil._ntuple_diskusage(10 << 30, 10 << 30, 44 << 10))
    said = schema.explain(sqlite3.OperationalError("disk I/O error"), tmp_path / "runs.sqlite3")
    assert str(said) == f"The disk holding the run history at {tmp_path / 'runs.sqlite3'} is full; free some space " \
                        "and try again."
    monkeypatch.setattr(shutil, "disk_usage", lambda p: shutil._ntuple_diskusage(10 << 30, 1 << 30, 9 << 30))
    assert "cannot be used (disk I/O error)" in str(schema.explain(sqlite3.OperationalError("disk I/O error"),
                                                                  tmp_path / "runs.sqlite3"))


@pytest.mark.spawn  # the app's way: a forked child would have its forkserver's dispositions, not the front end's
@pytest.mark.skipif(not Path("/proc/self/status").exists(), reason="reads the signal mask from /proc")
def test_a_run_process_starts_with_ctrl_c_ignored(monkeypatch):
    """Ctrl-C reaches every process of the terminal's group: a run process still starting (before its setsid)
    once printed a traceback of its start-up. It starts with SIGINT ignored, kept across its exec; the front end
    alone answers Ctrl-C (and ends it)."""
    from mpsstudio.engine.process import handles

    before = signal.getsignal(signal.SIGINT)
    proc = handles.RunProcess()
    try:
        assert proc.wait_ready(60)  # its start-up over (Python kept the ignored disposition)
        status = Path(f"/proc/{proc.pid}/status").read_text()
        ignored = int(next(line.split()[1] for line in status.splitlines() if line.startswith("SigIgn:")), 16)
        assert ignored & (1 << (signal.SIGINT - 1))
        assert signal.getsignal(signal.SIGINT) is before  # the front end's own handler is back
        assert signal.SIGINT not in signal.pthread_sigmask(signal.SIG_BLOCK, set())
    finally:
        proc.end()


# ---------------------------------------------------------------- pending files, journals, imports


def test_pending_tool_results_without_an_id_are_each_kept(tmp_path):
    history = tmp_path / "runs.sqlite3"
    folder = history.parent / "pending"
    folder.mkdir()
    for i in (1, 2):
        (folder / f"tool-{i}.json").write_text(json.dumps({"format": pending.FORMAT, "version": 1, "kind": "tool",
                                                           "tool": {"kind": "sweep", "result": _body(SWEEP)}}))
    store = RunStore(history)
    assert len(store.tools()) == 2 and not list(folder.iterdir())
    assert store.pending_notices == ["Added 2 results that could not be saved earlier (the history was in use by "
                                     "another program)."]


def test_a_pending_tool_result_already_kept_is_counted_as_such(tmp_path):
    history = tmp_path / "runs.sqlite3"
    store = RunStore(history)
    store.save_tool(ToolRecord(kind="sweep", result=_body(SWEEP), id="s1"))
    store.close()
    pending.write(history, "tool", {"id": "s1", "kind": "sweep", "result": _body(SWEEP)}, "s1")
    pending.write(history, "tool", {"id": "s1", "kind": "inspect", "result": _body(INSPECT)}, "s1-inspect")
    again = RunStore(history)
    assert sorted(t.kind for t in again.tools()) == ["inspect", "sweep"]  # the inspect gets an id of its own
    assert again.pending_notices == ["Added 1 result that could not be saved earlier (the history was in use by "
                                     "another program); 1 was in it already."]


def test_two_journals_of_one_run_keep_the_fuller(tmp_path):
    from tests.support.journals import journal_events, gone_pid, journal_of

    events = journal_events()
    window = events[1]
    short = journal_of(tmp_path, events, pid=gone_pid())
    full = journal_of(tmp_path, [*events, *[window] * 5], pid=gone_pid())
    assert short.path != full.path
    kept = []
    journal.keep_interrupted(lambda r: kept.append(r) or "", lambda i: False, where=tmp_path)
    [run] = kept
    assert len(run.windows) == 6 and list(tmp_path.iterdir()) == []


def test_a_tool_file_imported_twice_is_kept_once_with_or_without_an_id(tmp_path, capsys):
    with_id = tmp_path / "with-id.json"
    cli_json = tmp_path / "cli.json"
    assert cli.main(["max-batch", "--model", "mlp", "--dataset", "synthetic", "--device", "cpu", "--max-batch", "2",
                     "--json", str(cli_json)]) == cli.EXIT_OK
    doc = json.loads(cli_json.read_text())
    assert doc["kind"] == "max-batch" and RunStore().tool_kind(doc["id"]) == "max-batch"  # --json carries its id
    with_id.write_text(json.dumps(doc))
    no_id = tmp_path / "no-id.json"
    no_id.write_text(json.dumps(_body(SWEEP) | {"kind": "sweep"}))
    for path in (cli_json, with_id, no_id, no_id):
        assert cli.main(["history", "--import", str(path)]) == cli.EXIT_OK
    assert sorted(t.kind for t in RunStore().tools()) == ["max-batch", "sweep"]


def test_a_file_whose_id_is_a_kept_result_of_another_kind_is_kept_beside_it(tmp_path, capsys):
    store = RunStore()
    store.save_tool(ToolRecord(kind="sweep", result=_body(SWEEP), id="same-id"))
    path = tmp_path / "inspect.json"
    path.write_text(json.dumps({**INSPECT, "id": "same-id"}))
    assert cli.main(["history", "--import", str(path)]) == cli.EXIT_OK
    assert "imported the inspect result" in capsys.readouterr().err
    assert sorted(t.kind for t in RunStore().tools()) == ["inspect", "sweep"]


@pytest.mark.parametrize("argv, said", [
    (["deploy-bench", "--models", ""], "--models names no model"),
    (["deploy-bench", "--batch-sizes", ""], "--batch-sizes must be whole numbers"),
    (["deploy-bench", "--devices", ""], "no device cannot run here"),
    (["export", "--model", "mlp", "--format", "coreml", "--out", "m.mlpackage", "--batch-sizes", ""],
     "--batch-sizes must be whole numbers"),
    (["diagnose", "--devices", ""], "--devices takes cpu, mps, cuda or cuda:N"),
])
def test_an_empty_list_is_refused_never_taken_as_the_default(capsys, argv, said):
    assert cli.main(argv) == cli.EXIT_BAD_INPUT
    assert said in capsys.readouterr().err
