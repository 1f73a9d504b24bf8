"""What a run's process writes (stdout and stderr, Python's and native code's), read by the parent through a pipe.

Nothing goes to the temp folder: a thread of the parent keeps the first and the last `KEEP_BYTES` in memory and
counts what falls between, so a model that prints a megabyte a step costs the parent at most 2 x 4 MiB per run.
When the run ends, what was kept goes to a file of the app's log folder (`runs/<run id>.txt`, the newest
`KEPT_FILES` are kept) and the run's summary says so in one sentence; after a crash, the app's log gets its last
lines. A process that writes faster than the parent reads waits for it (the pipe's back-pressure), as it would on
a terminal. This module imports no torch.
"""

from __future__ import annotations

import os
import select
import threading
import time
from pathlib import Path

from ..basics.formatting import fmt_bytes, plural

KEEP_BYTES = 4 * 1024 * 1024  # the first and the last this many bytes of a run's output are kept
LIVE_BYTES = 64 * 1024  # what a front end that shows the output as it comes may be behind by (older lines dropped)
KEPT_FILES = 50  # run output files kept in the log folder (the oldest go first)
READ_BYTES = 64 * 1024
AFTER_CLOSE_BYTES = 16 * 1024 * 1024  # read at most this much after close(): what a descendant goes on writing is not
DRAIN_S = 1.0  # at the end: the longest the parent waits for what is still in the pipe


class Output:
    """The parent's end of a run process's output pipe, read by a daemon thread from the moment it is made."""

    def __init__(self, fd: int, keep: int = KEEP_BYTES):
        self.fd, self.keep = fd, keep
        self.head = bytearray()
        self._tail = bytearray()
        self.total = 0  # bytes the process wrote
        self._live = bytearray()  # written since the last `take_live` (its newest LIVE_BYTES)
        self._lock = threading.Lock()
        self._wake_w: int | None
        self._wake_r, self._wake_w = os.pipe()  # close() wakes the reading thread through this
        self._thread = threading.Thread(target=self._read, name="mpsstudio-run-output", daemon=True)
        self._thread.start()

    def _read(self) -> None:
        after_close = 0  # bytes read since close(): a descendant that goes on writing is not read for ever
        try:
            while after_close <= AFTER_CLOSE_BYTES:
                try:
                    ready, _, _ = select.select([self.fd, self._wake_r], [], [])
                except (OSError, ValueError):
                    return
                if self.fd not in ready:  # asked to stop and the pipe is empty (a descendant of the process may
                    return                # still hold its end: it is not waited for)
                try:
                    data = os.read(self.fd, READ_BYTES)
                except OSError:
                    return
                if not data:  # every writer closed its end
                    return
                self._add(data)
                if self._wake_w is None:
                    after_close += len(data)
        finally:
            for fd in (self.fd, self._wake_r):
                try:
                    os.close(fd)
                except OSError:
                    pass

    def _add(self, data: bytes) -> None:
        with self._lock:
            self.total += len(data)
            self._live += data
            if len(self._live) > 2 * LIVE_BYTES:
                del self._live[:-LIVE_BYTES]
            room = self.keep - len(self.head)
            if room > 0:
                self.head += data[:room]
                data = data[room:]
            if data:
                self._tail += data
                if len(self._tail) > 2 * self.keep:  # trimmed now and then, not at every read
                    del self._tail[:-self.keep]

    def close(self, drain_s: float = DRAIN_S) -> None:
        """Stop reading once the pipe is empty (at most `drain_s` from now); safe to call twice."""
        with self._lock:  # two closers must not both close the descriptor (its number may be reused at once)
            wake, self._wake_w = self._wake_w, None
        if wake is not None:
            try:
                os.write(wake, b"x")
            except OSError:  # the thread has already ended
                pass
            finally:
                os.close(wake)
        self._thread.join(drain_s)

    def take_live(self, whole_lines: bool = True) -> str:
        """What the process wrote since the last call (at most its newest LIVE_BYTES), as text: its whole lines,
        the last unfinished one left for the next call unless `whole_lines` is False."""
        with self._lock:
            data = bytes(self._live)
            cut = data.rfind(b"\n") + 1 if whole_lines else len(data)
            del self._live[:cut]
        return data[:cut].decode("utf-8", "replace")

    @property
    def tail(self) -> bytes:
        with self._lock:
            return bytes(self._tail[-self.keep:])

    @property
    def dropped(self) -> int:
        with self._lock:
            return self.total - len(self.head) - min(len(self._tail), self.keep)

    def kept_bytes(self) -> bytes:
        """What was kept, as written (the file holds no more than 2 x `keep` and one line), with one line where
        bytes were dropped."""
        with self._lock:
            head, tail = bytes(self.head), bytes(self._tail[-self.keep:])
            dropped = self.total - len(head) - len(tail)
        middle = f"\n[... {fmt_bytes(dropped)} of output dropped here ...]\n".encode() if dropped else b""
        return head + middle + tail

    def text(self) -> str:
        return self.kept_bytes().decode("utf-8", "replace")

    def last_lines(self, lines: int) -> list[str]:
        with self._lock:
            recent = bytes((self.head + self._tail)[-64 * 1024:])
        return recent.decode("utf-8", "replace").splitlines()[-lines:]

    def keep_for(self, run_id: str) -> str:
        """Write what was kept to the log folder's runs/<run_id>.txt; one sentence for the run's summary ("" when
        the process wrote nothing or the file could not be written, which the sentence then says)."""
        if not self.total:
            return ""
        from ..basics.paths import log_dir

        folder = log_dir() / "runs"
        safe = "".join(c for c in run_id if c.isalnum() or c in "-_")[:80] or "run"
        path = folder / f"{safe}.txt"
        wrote = f"The run's process wrote {fmt_bytes(self.total)} of output"
        try:
            folder.mkdir(parents=True, exist_ok=True)
            part = path.with_name(path.name + ".part")
            part.write_bytes(self.kept_bytes())
            part.replace(path)
            _prune(folder)
        except OSError as exc:
            return f"{wrote}; it could not be kept ({exc.strerror or exc})."
        dropped = self.dropped
        if dropped:
            return (f"{wrote}; its first and last {fmt_bytes(self.keep)} are kept in {path} (the "
                    f"{fmt_bytes(dropped)} between them were dropped).")
        kept = self.kept_bytes()
        lines = kept.count(b"\n") + (not kept.endswith(b"\n"))
        return f"{wrote} ({plural(lines, 'line')}): {path}."


def _prune(folder: Path) -> None:
    """Keep the newest KEPT_FILES output files."""
    try:
        files = sorted((p for p in folder.glob("*.txt") if p.is_file()), key=lambda p: p.stat().st_mtime)
    except OSError:
        return
    for old in files[:-KEPT_FILES]:
        try:
            old.unlink()
        except OSError:
            pass


TEMP_PREFIX = "mpsstudio-run-"


def run_temp_folder() -> str | None:
    """A temp folder for one run process (`mpsstudio-run-<front end pid>-*`), None when none can be made."""
    import tempfile

    try:
        return tempfile.mkdtemp(prefix=f"{TEMP_PREFIX}{os.getpid()}-")
    except OSError:
        return None


def remove_temp_folder(path: str | None) -> None:
    if path:
        import shutil

        shutil.rmtree(path, ignore_errors=True)


def remove_old_temp_files(older_than_s: float = 3600.0) -> int:
    """Remove what a front end killed outright left in the temp folder: the temp folders of its run processes
    (`mpsstudio-run-<pid>-*`, once that pid is not running), and the `mpsstudio-run-*.txt` output files of versions
    before this one (not one written to in the last hour: a run of an older version may still be going). Only this
    user's entries, never through a link."""
    import tempfile

    removed = 0
    now = time.time()
    try:
        entries = list(Path(tempfile.gettempdir()).glob(f"{TEMP_PREFIX}*"))
    except OSError:
        return 0
    for path in entries:
        try:
            st = path.lstat()
            if path.is_symlink() or st.st_uid != os.getuid():
                continue
            if path.is_dir():
                owner = path.name[len(TEMP_PREFIX):].split("-", 1)[0]
                if not owner.isdigit() or _pid_running(int(owner)):
                    continue
                remove_temp_folder(str(path))
            elif path.is_file() and path.suffix == ".txt" and now - st.st_mtime >= older_than_s:
                path.unlink()
            else:
                continue
            removed += 1
        except (OSError, AttributeError, ValueError):
            continue
    return removed


def _pid_running(pid: int) -> bool:
    try:
        os.kill(pid, 0)
        return True
    except ProcessLookupError:
        return False
    except (PermissionError, OSError):
        return True
