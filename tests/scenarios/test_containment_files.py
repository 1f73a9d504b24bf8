"""Containment's files (issue 26), without a run process: a run's captured output (capped, kept in the log folder),
the pending results beside a locked history, and the journal a killed front end leaves. Each kind of damaged file
gets one sentence and loses nothing already kept."""

from __future__ import annotations

import json
import os
import pickle
import sqlite3
import struct
import time

import pytest

from mpsstudio.engine.basics.formatting import fmt_bytes
from mpsstudio.engine.history import pending
from mpsstudio.engine.history.store import RunStore, ToolRecord, keep_run, keep_tool
from mpsstudio.engine.process import journal, output
from tests.support.runs import good_run
from tests.support.journals import gone_pid, journal_events, journal_of


def _output(data: bytes, keep: int) -> output.Output:
    r, w = os.pipe()
    out = output.Output(r, keep=keep)
    for start in range(0, len(data), 1000):
        os.write(w, data[start:start + 1000])
    os.close(w)
    out.close()
    return out


def test_output_keeps_its_first_and_last_bytes_and_counts_the_rest():
    data = b"".join(f"line {i}\n".encode() for i in range(20_000))  # ~190 KB
    out = _output(data, keep=4096)
    assert out.total == len(data)
    assert out.head == data[:4096] and out.tail == data[-4096:]
    assert out.dropped == len(data) - 8192
    text = out.text()
    assert f"\n[... {fmt_bytes(out.dropped)} of output dropped here ...]\n" in text
    assert out.last_lines(2) == ["line 19998", "line 19999"]


def test_output_that_fits_is_kept_whole_in_the_log_folder_and_old_files_are_pruned(monkeypatch):
    monkeypatch.setattr(output, "KEPT_FILES", 2)
    for i in range(3):
        out = _output(b"hello\nworld\n", keep=4096)
        sentence = out.keep_for(f"run{i}/../x")  # not a path: only letters, digits, - and _
        time.sleep(0.01)
    from mpsstudio.engine.basics.paths import log_dir

    runs = sorted(p.name for p in (log_dir() / "runs").glob("*.txt"))
    assert len(runs) == 2 and "run2x.txt" in runs
    assert sentence.startswith("The run's process wrote 12 B of output (2 lines): ") and sentence.endswith("run2x.txt.")
    assert _output(b"", keep=10).keep_for("quiet") == ""  # nothing written, nothing said


def test_output_that_cannot_be_kept_says_so(monkeypatch, tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("")
    monkeypatch.setenv("MPSSTUDIO_LOG_DIR", str(blocker))  # a file where the folder should be
    sentence = _output(b"x" * 100, keep=10).keep_for("r")
    assert sentence.startswith("The run's process wrote 100 B of output; it could not be kept (")


def test_what_killed_front_ends_left_in_the_temp_folder_is_removed_but_nothing_in_use(monkeypatch, tmp_path):
    import tempfile

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    old, new, odd = (tmp_path / f"mpsstudio-run-{n}.txt" for n in ("old", "new", "x"))
    for p in (old, new):
        p.write_text("")
    os.utime(old, (time.time() - 7200, time.time() - 7200))  # an output file of an earlier version, an hour old
    odd.mkdir()  # a folder whose name names no process: left alone
    dead = tmp_path / f"mpsstudio-run-{gone_pid()}-abc"  # a run process's temp folder; its front end is gone
    (dead / "sub").mkdir(parents=True)
    (dead / "sub" / "model-scratch.bin").write_bytes(b"x" * 100)
    mine = output.run_temp_folder()  # this front end's: in use
    assert os.path.basename(mine).startswith(f"mpsstudio-run-{os.getpid()}-")
    assert output.remove_old_temp_files() == 2
    assert not old.exists() and not dead.exists() and new.exists() and odd.exists() and os.path.isdir(mine)
    output.remove_temp_folder(mine)
    assert not os.path.exists(mine)


def test_the_kept_output_file_is_capped_in_bytes_whatever_the_bytes():
    from mpsstudio.engine.basics.paths import log_dir

    out = _output(b"\xff" * 50_000, keep=4096)  # not UTF-8: kept as written, not tripled by replacement characters
    assert "(the 40.8 KiB between them were dropped)" in out.keep_for("binary")
    assert (log_dir() / "runs" / "binary.txt").stat().st_size <= 2 * 4096 + 100


# -- pending results: the history locked past its wait ----------------------------------------------------------

@pytest.fixture
def locked(tmp_path, monkeypatch):
    from mpsstudio.engine.history import schema

    monkeypatch.setattr(schema, "LOCK_WAIT_S", 0.1)
    path = tmp_path / "runs.sqlite3"
    RunStore(path).close()
    holder = sqlite3.connect(path)
    holder.execute("BEGIN EXCLUSIVE")
    yield path
    holder.rollback()
    holder.close()


def test_a_run_and_a_tool_result_wait_beside_a_locked_history_and_are_added_at_the_next_open(locked):
    store = RunStore(locked)
    run = good_run()
    said = keep_run(run, store)
    assert "in use by another program for more than 0.1 s" in said and "pending" in said
    record = ToolRecord(kind="sweep", result={"not": "checked until it is read back"})
    assert "the sweep result was written to" in keep_tool(record, store)
    assert len(list((locked.parent / "pending").glob("*.json"))) == 2
    assert len(store.all()) == 0
    second = RunStore(locked)  # still locked: they wait
    assert second.pending_notices == [f"2 pending results in {locked.parent / 'pending'} could not be added yet: "
                                      "the history is in use by another program; they are added at the next start."]


def test_a_pending_run_already_in_the_history_leaves_it_as_it_is(tmp_path):
    history = tmp_path / "runs.sqlite3"
    store = RunStore(history)
    run = good_run()
    store.save(run)
    store.set_note(run.id, "an important note")
    changed = good_run()
    changed.status, changed.error = "failed", "a later copy"
    pending.write(history, "run", changed.to_dict(), changed.id)
    again = RunStore(history)
    [kept] = again.all()
    assert kept.status == "finished" and kept.note == "an important note"
    assert not list((tmp_path / "pending").iterdir())


def test_pending_files_are_merged_and_a_damaged_one_is_set_aside_with_a_sentence(tmp_path):
    history = tmp_path / "runs.sqlite3"
    run = good_run()
    pending.write(history, "run", run.to_dict(), run.id)
    folder = history.parent / "pending"
    (folder / "run-garbage.json").write_bytes(b"\xff\xfe not json")
    (folder / "run-foreign.json").write_text(json.dumps({"format": "something else"}))
    (folder / "run-bad.json").write_text(json.dumps({"format": pending.FORMAT, "kind": "run", "run": {"id": 3}}))
    store = RunStore(history)
    [kept] = store.all()
    assert kept.id == run.id and kept.origin == "local"
    assert store.pending_notices[0] == ("Added 1 result that could not be saved earlier (the history was in use by "
                                        "another program).")
    assert store.pending_notices[1].startswith(f"3 pending results in {folder} could not be read and were left there "
                                               "as .unreadable")
    assert sorted(p.name for p in folder.iterdir()) == ["run-bad.json.unreadable", "run-foreign.json.unreadable",
                                                        "run-garbage.json.unreadable"]
    assert RunStore(history).pending_notices == []  # said once


# -- the journal of a run in progress ------------------------------------------------------------------------------


def test_a_journal_whose_front_end_is_gone_is_kept_as_an_interrupted_run(tmp_path):
    journal_of(tmp_path, journal_events(), pid=gone_pid())
    kept = []
    notes = journal.keep_interrupted(lambda r: kept.append(r) or "", lambda i: False, where=tmp_path)
    [run] = kept
    assert run.status == "interrupted" and run.id == "a" * 32 and run.error == journal.INTERRUPTED
    assert run.losses == [2.0, 1.9, 1.8, 1.7] and len(run.windows) == 1
    assert notes == ["1 run in progress when MPS Studio last ended is kept as interrupted, with what it measured "
                     "until then."]
    assert list(tmp_path.iterdir()) == []  # its journal is gone once it is kept


def test_a_journal_of_a_running_front_end_or_a_run_already_kept_is_left_or_dropped(tmp_path):
    mine = journal_of(tmp_path, journal_events())  # this process: still running it
    assert journal.keep_interrupted(lambda r: pytest.fail("kept"), lambda i: False, where=tmp_path) == []
    assert mine.path.exists()
    mine.close()
    assert not mine.path.exists()
    journal_of(tmp_path, journal_events(), pid=gone_pid())  # saved just before the front end died
    assert journal.keep_interrupted(lambda r: pytest.fail("kept twice"), lambda i: True, where=tmp_path) == []
    assert list(tmp_path.iterdir()) == []


def test_a_journal_cut_short_or_damaged_keeps_what_came_before(tmp_path):
    j = journal_of(tmp_path, journal_events(), pid=gone_pid())
    with open(j.path, "ab") as f:
        f.write(struct.pack("<I", 1000) + b"only part of it")  # killed mid-write
    [(run, _)], notes = journal.interrupted(tmp_path)
    assert len(run.windows) == 1 and notes == []
    other = journal_events()[0]
    other.run_id = "b" * 32  # another run (two journals of one run keep the fuller: test_tool_files_safe)
    j2 = journal_of(tmp_path, [other], pid=gone_pid())
    evil = pickle.dumps(os.system)  # a frame that would call something: refused, what came before is kept
    with open(j2.path, "ab") as f:
        f.write(struct.pack("<I", len(evil)) + evil)
    runs, _ = journal.interrupted(tmp_path)
    assert sorted(len(r.windows) for r, _ in runs) == [0, 1]


@pytest.mark.parametrize("content, why", [
    (b"not json\n", "its first line is not JSON"),
    (b'{"format": "mpsstudio.journal", "config": {"batch_size": "many"}}\nFRAME', "Batch size must be a whole number"),
    (b'["a list"]\n', "it is not a run's journal"),
])
def test_a_journal_that_is_not_one_is_set_aside_with_one_sentence(tmp_path, content, why):
    started = pickle.dumps(journal_events()[0])
    (tmp_path / "1-x.journal").write_bytes(content.replace(b"FRAME", struct.pack("<I", len(started)) + started))
    runs, notes = journal.interrupted(tmp_path)
    assert runs == [] and len(notes) == 1 and why in notes[0] and "1-x.journal.unreadable" in notes[0]
    assert (tmp_path / "1-x.journal.unreadable").exists()


def test_a_journal_that_never_got_its_start_says_there_was_nothing_to_keep(tmp_path):
    journal_of(tmp_path, [], pid=gone_pid())
    cut = tmp_path / "2-y.journal"
    cut.write_bytes(b'{"format": "mpsst')  # killed while writing its first line (a minute ago)
    os.utime(cut, (time.time() - 120, time.time() - 120))
    fresh = tmp_path / "3-z.journal"
    fresh.write_bytes(b'{"format": "mpsst')  # being written now by a front end that is starting a run
    notes = journal.keep_interrupted(lambda r: pytest.fail("kept"), lambda i: False, where=tmp_path)
    assert notes == ["A run of mlp on cpu was starting when MPS Studio last ended; it had measured nothing, so "
                     "there was nothing to keep."]
    assert [p.name for p in tmp_path.iterdir()] == ["3-z.journal"]


# -- signals while something is being kept ------------------------------------------------------------------------

def test_a_signal_while_a_run_is_being_kept_waits_until_it_is_kept():
    import signal

    from mpsstudio.engine.basics.errors import Terminated
    from mpsstudio.engine.process.ending import ending_signals, holding_signals

    done = []
    with pytest.raises(Terminated) as caught:
        with ending_signals():
            with holding_signals():
                os.kill(os.getpid(), signal.SIGTERM)
                time.sleep(0.05)
                done.append("kept")  # not cut short
    assert done == ["kept"] and caught.value.signum == signal.SIGTERM
    before = signal.signal(signal.SIGINT, signal.default_int_handler)  # (a background job's is SIG_IGN)
    try:
        with pytest.raises(KeyboardInterrupt):
            with holding_signals():
                os.kill(os.getpid(), signal.SIGINT)  # Ctrl-C too
                time.sleep(0.05)
                done.append("kept again")
        assert done == ["kept", "kept again"]
        assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
    finally:
        signal.signal(signal.SIGINT, before)


def test_a_child_that_answers_and_exits_while_the_parent_waits_is_not_taken_for_dead():
    """The answer arrives just after the parent's wait ran out, and the child has exited by the time the parent
    looks at it: the answer is read (found as a flaky max-batch test: "exited with code 0 before its work was
    done")."""
    import multiprocessing

    from mpsstudio.engine.process import handles

    parent, child = multiprocessing.Pipe()

    class LateConn:  # the first wait runs out just before the message lands
        def __init__(self, conn):
            self.conn, self.waits = conn, 0

        def poll(self, timeout=0):
            self.waits += 1
            return False if self.waits == 1 else self.conn.poll(timeout)

        def __getattr__(self, name):
            return getattr(self.conn, name)

    class Exited:
        exitcode = 0

    proc = handles.RunProcess.__new__(handles.RunProcess)
    proc.conn, proc.process, proc.ready = LateConn(parent), Exited(), False
    child.send(("tooled", {"answer": 42}))
    child.close()
    assert proc.receive(0.01) is None  # not EOFError: something is still to be read
    assert proc.receive(0.01) == ("tooled", {"answer": 42})
    with pytest.raises(EOFError):
        proc.receive(0.01)
