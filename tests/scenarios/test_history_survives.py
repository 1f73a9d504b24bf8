"""A history that survives anything: locked, read-only and damaged files, bad rows, large imports."""

from __future__ import annotations

import os
import sqlite3
import stat

import pytest

from mpsstudio import cli
from mpsstudio.engine.basics.errors import UserError
from mpsstudio.engine.history.runfiles import export_json
from mpsstudio.engine.history.recovery import recover
from mpsstudio.engine.history.store import DamagedHistory, RunStore
from tests.support.runs import good_run
from tests.support.paths import ROOT


pytestmark = pytest.mark.skipif(os.name != "posix", reason="file modes and locks as on macOS and Linux")


@pytest.fixture
def history(tmp_path, monkeypatch):
    folder = tmp_path / "data"
    monkeypatch.setenv("MPSSTUDIO_DATA_DIR", str(folder))
    store = RunStore()
    for i in range(3):
        store.save(good_run(f"{i}" * 32, device="cpu"))
    store.close()
    return folder / "runs.sqlite3"


def damage(path):
    """4 KiB of noise in the middle of the file, as a failing disk or a bad copy leaves it."""
    with sqlite3.connect(path) as db:
        db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    data = bytearray(path.read_bytes())
    middle = len(data) // 2
    data[middle:middle + 4096] = os.urandom(min(4096, len(data) - middle))
    path.write_bytes(bytes(data))


def test_a_locked_history_waits_then_keeps_the_run_beside_it_until_the_next_start(history, tmp_path, capsys,
                                                                                   monkeypatch):
    from mpsstudio.engine.history import schema

    monkeypatch.setattr(schema, "LOCK_WAIT_S", 0.2)
    holder = sqlite3.connect(history)
    holder.execute("BEGIN EXCLUSIVE")
    try:
        out = tmp_path / "out.json"
        code = cli.main(["bench", "--model", "mlp", "--dataset", "synthetic", "--steps", "3", "--warmup", "1",
                         "--batch-size", "8", "--json", str(out)])
        captured = capsys.readouterr()
        assert len(RunStore(history).all()) == 3  # not in the history yet (readers are not blocked in WAL mode)
    finally:
        holder.rollback()
        holder.close()
    assert code == 0, captured.err  # kept: beside the history
    assert "in use by another program" in captured.err and "Traceback" not in captured.err
    [pending] = list((history.parent / "pending").iterdir())
    assert str(pending) in captured.err and "added to the history the next time" in captured.err
    assert "Samples/s" in captured.out  # the table is still printed
    assert out.is_file()  # and --json still written
    assert cli.main(["history"]) == 0  # the next start adds it and says so
    assert "Added 1 result that could not be saved earlier" in capsys.readouterr().err
    store = RunStore(history)
    assert len(store.all()) == 4 and store.all()[-1].status == "finished" and store.all()[-1].origin == "local"
    assert not list((history.parent / "pending").iterdir())


def test_a_read_only_history_is_listed_and_says_new_runs_are_not_kept(history, capsys):
    folder = history.parent
    for p in folder.iterdir():
        p.chmod(stat.S_IRUSR)
    folder.chmod(stat.S_IRUSR | stat.S_IXUSR)
    try:
        if os.access(history, os.W_OK):
            pytest.skip("running as a user who can write anyway (root)")
        store = RunStore()
        assert store.read_only and len(store.all()) == 3
        with pytest.raises(UserError, match="read-only, so new runs are not kept"):
            store.save(good_run("z" * 32))
        assert cli.main(["history"]) == 0
        assert "read-only; new runs will not be kept" in capsys.readouterr().err
    finally:
        folder.chmod(stat.S_IRWXU)
        for p in folder.iterdir():
            p.chmod(stat.S_IRUSR | stat.S_IWUSR)


def test_a_read_only_file_opens_read_only(history, monkeypatch):
    """Root ignores file modes, so this checks the decision itself: a file we may not write is opened with
    mode=ro, never written to (opening it writes nothing)."""
    before = history.read_bytes()
    monkeypatch.setattr(os, "access", lambda path, mode: mode != os.W_OK)
    store = RunStore()
    assert store.read_only and [r.id[0] for r in store.all()] == ["0", "1", "2"]
    with pytest.raises(UserError, match="read-only"):
        store.save(good_run("z" * 32))
    store.close()
    assert history.read_bytes() == before


def test_a_damaged_history_is_found_at_open_left_untouched_and_recovered_on_request(history, capsys):
    damage(history)
    damaged = history.read_bytes()
    with pytest.raises(DamagedHistory):
        RunStore()
    assert history.read_bytes() == damaged  # untouched
    assert cli.main(["bench", "--model", "mlp", "--dataset", "synthetic", "--steps", "2", "--warmup", "0",
                     "--batch-size", "8"]) == 1
    captured = capsys.readouterr()
    assert "is damaged; it was left as it is" in captured.err and "Traceback" not in captured.err
    assert history.read_bytes() == damaged
    assert cli.main(["history", "--recover"]) == 0
    err = capsys.readouterr().err
    assert "Recovered" in err and "damaged file is kept as" in err
    kept = next(history.parent.glob("runs.damaged-*.sqlite3"))
    assert kept.read_bytes() == damaged  # the user's file, kept as it was
    assert RunStore().all() is not None  # a working history again


def test_recover_twice_never_overwrites_a_kept_file_and_a_healthy_history_is_left_alone(history):
    with pytest.raises(UserError, match="is not damaged; nothing was changed"):
        recover(history)
    damage(history)
    first_damaged = history.read_bytes()
    found = recover(history)
    kept = found.kept
    assert kept.read_bytes() == first_damaged and found.runs + found.lost == 3
    damage(history)
    kept_again = recover(history).kept  # within the same second: another name, the first one intact
    assert kept_again != kept and kept.read_bytes() == first_damaged


def test_opening_and_listing_a_current_history_writes_nothing(history):
    with sqlite3.connect(history) as db:
        db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    before = history.read_bytes()
    store = RunStore()
    assert len(store.all()) == 3
    assert store.delete(["no-such-id", "no-such-id"]) == 0
    assert store.add_imported([]) == (0, 0)
    store.close()
    assert history.read_bytes() == before


def test_a_read_only_wal_history_without_its_shared_memory_file_is_still_read(history, monkeypatch):
    """In a read-only folder SQLite cannot make the -shm file a WAL history needs; immutable=1 reads it."""
    from mpsstudio.engine.history import schema

    real = schema.connect

    def no_shm(target, uri=False):
        if uri and "immutable=1" not in target:
            raise sqlite3.OperationalError("unable to open database file")
        return real(target, uri)
    monkeypatch.setattr(schema, "connect", no_shm)
    monkeypatch.setattr(os, "access", lambda path, mode: mode != os.W_OK)
    store = RunStore()
    assert store.read_only and len(store.all()) == 3


def test_the_window_starts_with_a_damaged_history_and_offers_recovery(history, qtbot):
    pytest.importorskip("pytestqt")
    from mpsstudio.gui.window import MainWindow

    damage(history)
    w = MainWindow()
    qtbot.addWidget(w)
    w.show()
    assert "is damaged" in w.banner.text() and w.banner.action.isVisible()
    assert str(w.store.path) == ":memory:"
    w.banner.action.click()  # off the GUI thread, the banner saying how far it is
    qtbot.waitUntil(lambda: "Recovered" in w.banner.text(), timeout=30_000)
    assert str(w.store.path) == str(history)
    w.close()


@pytest.mark.parametrize("how", ["not a database", "truncated", "zeroed header"])
def test_recovering_a_file_with_nothing_readable_answers_at_once(history, capsys, how):
    """The commonest damage leaves nothing to copy: said at once (it once tried 10,000,000 rowids, ~7 minutes)."""
    import time

    data = history.read_bytes()
    history.write_bytes({"not a database": b"these are not the bytes of a database\n" * 2000,
                         "truncated": data[:50], "zeroed header": bytes(100) + data[100:]}[how])
    started = time.monotonic()
    assert cli.main(["history", "--recover"]) == 0
    assert time.monotonic() - started < 5
    err = capsys.readouterr().err
    assert "Nothing in the damaged history could be read" in err and "a fresh history takes its place" in err
    assert RunStore().all() == []


def test_recovery_walks_past_unreadable_rows_in_seconds_and_keeps_tool_results(history):
    """A table whose rows cannot all be listed is walked by rowid, stepping over unreadable stretches."""
    import time

    from mpsstudio.engine.history.rows import ToolRecord

    store = RunStore()
    store.save_tool(ToolRecord(kind="max-batch", result={"sentence": "s", "probes": [], "largest_batch": None,
                                                         "fastest_batch": None}, id="t1"))
    store.close()
    damage(history)
    started = time.monotonic()
    found = recover(history)
    assert time.monotonic() - started < 25 and found.runs + found.lost >= 1
    assert "Recovered" in found.sentence()


def test_the_window_starts_with_a_bad_row_and_names_it(history, qtbot):
    pytest.importorskip("pytestqt")
    import json

    from mpsstudio.gui.window import MainWindow

    with sqlite3.connect(history) as db:
        db.execute("UPDATE runs SET summary_json = ? WHERE id = ?", (json.dumps({"final_loss": "abc"}), "1" * 32))
    w = MainWindow()
    qtbot.addWidget(w)
    w.show()
    assert len(w.results.results()) == 2
    assert "1 stored run could not be read" in w.banner.text()
    w.close()


def test_a_large_import_runs_off_the_gui_thread_with_progress(history, tmp_path, qtbot):
    pytest.importorskip("pytestqt")
    from mpsstudio.gui.results.panel import ResultsPanel

    path = tmp_path / "many.json"
    export_json([good_run(f"r{i:05d}", device="cuda:0") for i in range(100)], path)
    panel = ResultsPanel(RunStore())
    qtbot.addWidget(panel)
    messages = []
    panel.message.connect(messages.append)
    with qtbot.waitSignal(panel.import_finished, timeout=60_000):
        panel.files.start_import(str(path))
        # returned at once, before any of it is in the table: the work runs on its own thread, and its
        # result can only arrive through the event loop
        assert panel.files._importer is not None and panel.model.rowCount() == 3
    assert any(m.startswith("Checking many.json") for m in messages)
    assert "Imported 100 runs from many.json." in messages
    assert panel.model.rowCount() == 103


_WRITER = """
import sys
from mpsstudio.engine.history.store import RunStore
from tests.support.runs import good_run
store = RunStore(sys.argv[1])
prefix, count = sys.argv[2], int(sys.argv[3])
for i in range(count):
    store.save(good_run(f"{prefix}{i:06d}", device="cpu"))
    print(i, flush=True)
"""


def _writer(path, prefix, count):
    import subprocess
    import sys

    root = ROOT
    return subprocess.Popen([sys.executable, "-c", _WRITER, str(path), prefix, str(count)], cwd=root,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _integrity(path) -> str:
    with sqlite3.connect(path) as db:
        return db.execute("PRAGMA integrity_check").fetchone()[0]


def test_kill_9_in_the_middle_of_writes_loses_no_earlier_run(tmp_path):
    import signal
    import time

    path = tmp_path / "runs.sqlite3"
    store = RunStore(path)
    store.save(good_run("keep" + "0" * 28, device="cpu"))
    store.close()
    for attempt, delay in enumerate((0.0, 0.05, 0.2, 0.6)):
        proc = _writer(path, f"k{attempt}", 100_000)
        if delay:
            time.sleep(delay)
        else:
            proc.stdout.readline()  # right after its first commit
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
        assert _integrity(path) == "ok"
        ids = {r.id for r in RunStore(path).all()}
        assert "keep" + "0" * 28 in ids


def test_concurrent_writers_lose_nothing(tmp_path):
    path = tmp_path / "runs.sqlite3"
    RunStore(path).close()
    procs = [_writer(path, f"w{n}", 3) for n in range(3)]
    for proc in procs:
        out, err = proc.communicate(timeout=120)
        assert proc.returncode == 0, err[-2000:]
    assert _integrity(path) == "ok"
    assert len(RunStore(path).all()) == 9


def test_the_window_says_a_read_only_history_keeps_no_new_runs(history, qtbot, monkeypatch):
    pytest.importorskip("pytestqt")
    from mpsstudio.gui.window import MainWindow

    monkeypatch.setattr(os, "access", lambda path, mode: mode != os.W_OK)
    w = MainWindow()
    qtbot.addWidget(w)
    w.show()
    assert "is read-only: earlier runs are shown, new runs will not be kept" in w.banner.text()
    assert len(w.results.results()) == 3
    w.close()


def test_text_that_is_not_unicode_is_kept_as_question_marks_never_a_lost_run(history, tmp_path, capsys):
    """A lone surrogate: an undecodable byte of a Linux file name (os.fsdecode), or \\udcff typed into a file
    or a shell. SQLite cannot hold it; the run is kept with "?" in its place and nothing fails."""
    run = good_run("a" * 32, device="cpu")
    run.config = run.config.changed(dataset="/data/caf\udcff")
    run.error = "could not open caf\udcff/x.png"
    run.note = "\ud800 lone"
    store = RunStore(history)
    store.save(run)
    back = store.get(run.id)
    assert back.config.dataset == "/data/caf\udcff"  # its JSON keeps the escape; the text columns say "?"
    assert back.error == "could not open caf?/x.png" and back.note == "? lone"
    assert [r.id for r in store.summaries()].count(run.id) == 1 and not store.notices
    store.set_note(run.id, "bad \udcff byte")
    assert store.get(run.id).note == "bad ? byte"
    assert store.get("\udcff") is None and store.delete(["\udcff", run.id]) == 1
    store.set_note("\udcff", "x")  # names no run: nothing to do, nothing raised
    store.close()
    # an imported file with an escaped lone surrogate, the command line with one in an id or a note
    exported = tmp_path / "runs.json"
    other = good_run("b" * 32, device="cpu")
    other.note = "\udcff"
    export_json([other], exported)
    assert cli.main(["history", "--import", str(exported)]) == 0
    assert cli.main(["history", "--note", "b" * 32, "caf\udcff"]) == 0
    assert cli.main(["history", "--note", "\udcff", "x"]) == 2
    assert cli.main(["history", "--steps", "\udcff", str(tmp_path / "s.csv")]) == 2
    assert cli.main(["history", "--delete", "\udcff"]) == 0
    err = capsys.readouterr().err
    assert "Traceback" not in err and "No run with id ?" in err and "0 runs (1 not found)" in err
    assert RunStore(history).get("b" * 32).note == "caf?"
    assert cli.main(["history", "--steps", "b" * 32, str(tmp_path / "s.csv")]) == 0


def test_sigterm_while_a_finished_run_waits_for_a_locked_history_loses_nothing(history, capsys, monkeypatch):
    """The signal comes while the run is being kept: it is held until the run is kept (here: beside the history),
    then the command ends as SIGTERM asks."""
    import signal as signals

    from mpsstudio.engine.history import schema
    from mpsstudio.engine.history import store as store_module

    monkeypatch.setattr(schema, "LOCK_WAIT_S", 0.3)
    real = store_module.keep_run

    def signalled_then_kept(result, store=None):
        os.kill(os.getpid(), signals.SIGTERM)  # a job scheduler's SIGTERM, just as the run is saved
        return real(result, store)
    monkeypatch.setattr(store_module, "keep_run", signalled_then_kept)
    holder = sqlite3.connect(history)
    holder.execute("BEGIN EXCLUSIVE")
    try:
        code = cli.main(["bench", "--model", "mlp", "--dataset", "synthetic", "--steps", "3", "--warmup", "1",
                         "--batch-size", "8", "--devices", "cpu", "--no-inspect"])
        err = capsys.readouterr().err
    finally:
        holder.rollback()
        holder.close()
    assert code == 143, err
    assert "was written to" in err and "stopped by SIGTERM; the runs that ended are kept in the history." in err
    assert cli.main(["history"]) == 0
    assert [r.status for r in RunStore(history).all()][-1] == "finished" and len(RunStore(history).all()) == 4
