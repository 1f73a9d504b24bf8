"""A front end's journal of each run in progress, so that a front end ended outright (SIGKILL, the system's
out-of-memory killer, a crash of the app itself) does not lose the run: the next start keeps it as "interrupted".

While a run goes, the front end that started it appends every event its process sends (checked, as received) to
`<data dir>/running/<pid>-<id>.journal`: one JSON line naming the front end and the run's config, then the events,
each pickled and framed by its length. When the run ends and has been handed on, the journal is removed. At the
next start `interrupted()` finds journals whose front end is gone (its pid is not running, or names a process
started later) and rebuilds each run from its events as a run that died is rebuilt (recorder.py);
`keep_interrupted` hands each to the front end's save, then removes its journal. Only this app's classes are unpickled (messages.load), every event
is checked again, and a journal cut short mid-write keeps what was written before the cut.
"""

from __future__ import annotations

import json
import os
import pickle
import struct
import time
import uuid
from collections.abc import Callable
from pathlib import Path

from ..basics.config import RunConfig
from ..basics.errors import UserError
from ..basics.events import Ended, Event, Notice, Started
from ..basics.formatting import one_line, plural, printable
from ..basics.results import RunResult, now_iso

FOLDER = "running"
FORMAT = "mpsstudio.journal"
_FRAME = struct.Struct("<I")
MAX_EVENT_BYTES = 64 * 1024**2
MAX_JOURNAL_BYTES = 1024**3
INTERRUPTED = ("MPS Studio ended while this run was in progress (it was killed, or the computer stopped), so the "
               "run could not finish; what it measured until then is kept.")


def folder() -> Path:
    from ..basics.paths import data_dir

    return data_dir() / FOLDER


def _started_at(pid: int) -> float | None:
    try:
        import psutil

        return psutil.Process(pid).create_time()
    except Exception:
        return None


class Journal:
    """The journal of one run in progress; writing it never stops the run (a full disk turns it off)."""

    def __init__(self, config: RunConfig, where: Path | None = None):
        where = where if where is not None else folder()
        self.path = where / f"{os.getpid()}-{uuid.uuid4().hex[:12]}.journal"
        self._file = None
        try:
            where.mkdir(parents=True, exist_ok=True)
            head = {"format": FORMAT, "version": 1, "pid": os.getpid(), "started_at": _started_at(os.getpid()),
                    "created_at": now_iso(), "config": config.to_dict()}
            self._file = open(self.path, "xb")
            self._file.write(json.dumps(head, allow_nan=False).encode() + b"\n")
            self._file.flush()
        except (OSError, ValueError, TypeError):
            self.close()

    def add(self, event: Event) -> None:
        if self._file is None or isinstance(event, (Ended, Notice)):  # an Ended run is handed on whole; a notice is
            return  # not kept
        try:
            data = pickle.dumps(event, protocol=4)
            self._file.write(_FRAME.pack(len(data)) + data)
            self._file.flush()  # in the system's hands: a killed front end loses nothing written
        except (OSError, ValueError, pickle.PicklingError):
            self.close()

    def close(self) -> None:
        """The run was handed on (or the journal cannot be written): remove it."""
        f, self._file = self._file, None
        if f is not None:
            try:
                f.close()
            except OSError:
                pass
        forget(self.path)


def forget(path: Path) -> None:
    try:
        path.unlink()
    except OSError:
        pass


def _owner_running(head: dict) -> bool:
    pid, started = head.get("pid"), head.get("started_at")
    if isinstance(pid, bool) or not isinstance(pid, int) or pid <= 0:
        return False
    if isinstance(started, bool) or not isinstance(started, (int, float)):
        return False  # no start time to tell its front end from a process that reused the pid: taken as gone
    now = _started_at(pid)
    return now is not None and abs(now - started) < 1.0  # a reused pid is another process


def interrupted(where: Path | None = None) -> tuple[list[tuple[RunResult, Path]], list[str]]:
    """The runs of journals whose front end is gone, rebuilt, each with its journal (forget it once the run is
    kept); and one sentence per journal that could not be used (renamed .unreadable) or held nothing to keep."""
    where = where if where is not None else folder()
    try:
        paths = sorted(p for p in where.glob("*.journal") if p.is_file() and not p.is_symlink())
    except OSError:
        return [], []
    runs, notes = [], []
    for path in paths:
        try:
            head, events = _read(path)
            result = _rebuilt(head, events) if head is not None else None
        except (OSError, ValueError, UserError) as exc:
            notes.append(f"A run in progress when MPS Studio last ended could not be read ({one_line(str(exc), 120)});"
                         f" its journal was kept as {printable(path.name)}.unreadable.")
            try:
                path.replace(path.with_name(path.name + ".unreadable"))
            except OSError:
                pass
            continue
        if head is None:  # cut before its first line was whole: removed once it is clearly not being written
            try:
                if time.time() - path.stat().st_mtime > 60:
                    forget(path)
            except OSError:
                pass
            continue
        if _owner_running(head):
            continue
        if result is None:
            cfg = head["config"]
            notes.append(f"A run of {printable(str(cfg.get('model')))} on {printable(str(cfg.get('device')))} was "
                         "starting when MPS Studio last ended; it had measured nothing, so there was nothing to keep.")
            forget(path)
            continue
        runs.append((result, path))
    return _fullest(runs), notes


def _fullest(runs: list[tuple[RunResult, Path]]) -> list[tuple[RunResult, Path]]:
    """One run per id: where two journals hold the same run (a copied journal, a front end restarted on it), the
    one that measured the most (windows, then steps) is kept and the others forgotten."""
    best: dict[str, tuple[RunResult, Path]] = {}
    for result, path in runs:
        held = best.get(result.id)
        size = (len(result.windows), len(result.losses))
        if held is None or size > (len(held[0].windows), len(held[0].losses)):
            if held is not None:
                forget(held[1])
            best[result.id] = (result, path)
        else:
            forget(path)
    return list(best.values())


def keep_interrupted(keep: Callable[[RunResult], str], known: Callable[[str], bool],
                     where: Path | None = None) -> list[str]:
    """Keep every run a gone front end left in progress (`keep(run)`: the front end's save, returning what to tell
    the user; `known(id)`: the history already holds it, as when the front end ended just after saving it) and
    forget its journal; what to tell the user, one sentence each. A run that could not be kept stays for the next
    start."""
    from ..basics.errors import UserError

    runs, notes = interrupted(where)
    kept = 0
    for result, path in runs:
        if known(result.id):
            forget(path)
            continue
        try:
            said = keep(result)
        except UserError as exc:
            notes.append(f"A run interrupted when MPS Studio last ended could not be kept yet ({exc}); it is tried "
                         "again at the next start.")
            continue
        forget(path)
        kept += 1
        if said:
            notes.append(said)
    if kept:
        notes.insert(0, f"{plural(kept, 'run')} in progress when MPS Studio last ended "
                     f"{'is' if kept == 1 else 'are'} kept as interrupted, with what {'it' if kept == 1 else 'they'} "
                     "measured until then.")
    return notes


def _rebuilt(head: dict, events: list[Event]) -> RunResult | None:
    """The interrupted run from its events, checked as an imported run is (None when it had not started)."""
    from ..analysis.runcheck import checked_result
    from ..analysis.summary import Recorder

    if not any(isinstance(e, Started) for e in events):
        return None
    try:
        recorder = Recorder(RunConfig.from_dict(head["config"]))
        for event in events:
            recorder.add(event)
        result = recorder.finish("interrupted", INTERRUPTED)
    except Exception as exc:  # settings that are not a run's (the check below names the field when it can)
        raise ValueError(f"its run's settings cannot be read ({type(exc).__name__})") from None
    if isinstance(head.get("created_at"), str):
        result.created_at = head["created_at"]  # when it ran, not when it was found (checked next)
    return checked_result(result, "its journal")


def _read(path: Path) -> tuple[dict | None, list[Event]]:
    """The journal's head and its readable events; ValueError when it is not a journal at all."""
    from .messages import checked_event, load

    if path.stat().st_size > MAX_JOURNAL_BYTES:
        raise ValueError("it is larger than a run's journal can be")
    with open(path, "rb") as f:
        line = f.readline(1024**2)
        if not line.endswith(b"\n"):
            return None, []  # cut before its first line was whole: the run had not started
        try:
            head = json.loads(line)
        except (ValueError, RecursionError) as exc:
            raise ValueError("its first line is not JSON") from exc
        if not isinstance(head, dict) or head.get("format") != FORMAT or not isinstance(head.get("config"), dict):
            raise ValueError("it is not a run's journal")
        events = []
        while True:
            size = f.read(_FRAME.size)
            if len(size) < _FRAME.size:
                break
            (n,) = _FRAME.unpack(size)
            if n > MAX_EVENT_BYTES:
                break
            data = f.read(n)
            if len(data) < n:  # cut short mid-write: what came before is kept
                break
            try:
                events.append(checked_event(load(data)))
            except Exception:  # a damaged or foreign frame: what came before is kept
                break
    return head, events
