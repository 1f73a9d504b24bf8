"""Another Python environment for a run (RunConfig.python: a venv's or conda env's `python`, with its own torch):
checked once, then the run's process is that interpreter running this engine's own code.

- `check(path)` starts the interpreter once (a time limit) and imports what a run process imports: this engine's
  run path, with *that* environment's torch, numpy, psutil and platformdirs. One sentence when it cannot: no such
  file, not a Python, too old a Python, no torch, a torch outside SUPPORTED_TORCH, a library missing, a torch that
  fails to load. The answer is cached per path and modification time.
- `ForeignProcess` is what RunProcess needs of a multiprocessing.Process, for a child started as
  `PATH -c BOOT ROOT FD FD`: ROOT is a folder holding only a link to this engine's package (never this
  environment's site-packages: the child must load its own torch), FD the run's pipe and its output pipe. The
  child takes its settings from the pipe and goes on as any run process (child.foreign_main).

This module imports no torch.
"""

from __future__ import annotations

import atexit
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from ..basics.errors import UserError
from ..basics.formatting import one_line, printable
from ..machine.apple import MPS_MACOS_BY_TORCH, torch_release

FRESH_S = 60.0  # before a run: a check older than this is done again
CHECK_TIMEOUT_S = 120.0  # a first `import torch` from a cold disk can take a minute
MIN_PYTHON = (3, 10)
# ((2, 6), (2, 15)): the releases the Apple ledger covers (benchmarks/apple_ledger.py --torch-table)
SUPPORTED_TORCH = (MPS_MACOS_BY_TORCH[0][0], MPS_MACOS_BY_TORCH[-1][0])
ENGINE_NEEDS = ("numpy", "psutil", "platformdirs")

# The child's first words: its own sys.path (never '' or the caller's folder), this engine first, then the run.
BOOT = ("import sys; sys.path[:] = [sys.argv[1]] + [p for p in sys.path if p not in ('', '.')]; "
        "from mpsstudio.engine.process.child import foreign_main; foreign_main(int(sys.argv[2]), int(sys.argv[3]))")

# What the check runs in the other interpreter: its versions, then what a run process imports.
_CHECK = r"""
import json, sys
sys.path[:] = [sys.argv[1]] + [p for p in sys.path if p not in ('', '.')]
out = {"python": "%d.%d.%d" % sys.version_info[:3], "prefix": sys.prefix}
if sys.version_info < tuple(json.loads(sys.argv[2])):
    print(json.dumps(out)); sys.exit(0)
try:
    import torch
except ModuleNotFoundError as exc:
    out["missing"] = exc.name
    print(json.dumps(out)); sys.exit(0)
except BaseException as exc:
    out["torch_error"] = "%s: %s" % (type(exc).__name__, exc)
    print(json.dumps(out)); sys.exit(0)
out["torch"] = str(getattr(torch, "__version__", "?"))
out["torch_git"] = str(getattr(getattr(torch, "version", None), "git_version", None) or "") or None
for name in json.loads(sys.argv[3]):
    try:
        __import__(name)
    except BaseException:
        out["missing"] = name
        print(json.dumps(out)); sys.exit(0)
try:
    import mpsstudio.engine.process.child, mpsstudio.engine.run.session
except BaseException as exc:
    out["engine_error"] = "%s: %s" % (type(exc).__name__, exc)
print(json.dumps(out))
"""


@dataclass(frozen=True)
class Interpreter:
    """A checked Python environment: its path, Python and torch versions, and its folder's name (what reports show)."""

    path: str
    python: str
    torch: str
    torch_git: str | None
    name: str

    def label(self) -> str:
        """"torch 2.13.0 · Python 3.11.7 (torch213)"."""
        return f"torch {self.torch} · Python {self.python} ({self.name})"


_checked: dict[tuple, tuple[Interpreter, float]] = {}
_lock = threading.Lock()


def check(path: str, max_age_s: float | None = None) -> Interpreter:
    """The interpreter at `path`, checked (see the module docstring); UserError with one sentence otherwise.
    `max_age_s`: an answer older than this is asked again (None: any answer of this process stands)."""
    shown = printable(path)[:200]
    target = Path(path).expanduser()
    if not target.is_file():
        raise UserError(f"No Python at {shown}: choose a python executable, such as a venv's bin/python.")
    if not os.access(target, os.X_OK):
        raise UserError(f"{shown} is not executable: choose a Python interpreter, such as a venv's bin/python.")
    key = (str(target.absolute()), target.stat().st_mtime_ns)
    with _lock:
        if key in _checked and (max_age_s is None or time.monotonic() - _checked[key][1] <= max_age_s):
            return _checked[key][0]
    answer = _ask(target, shown)
    python = answer.get("python") or "?"
    if torch_release(python) < MIN_PYTHON:  # (major, minor) of any version text
        raise UserError(f"The Python at {shown} is {python}; MPS Studio runs on Python "
                        f"{'.'.join(map(str, MIN_PYTHON))} or later: choose another environment.")
    if answer.get("missing") == "torch":
        raise UserError(f"The Python at {shown} has no PyTorch: install it there (`{shown} -m pip install torch`) "
                        "or choose another environment.")
    if answer.get("torch_error"):
        raise UserError(f"PyTorch fails to load in the Python at {shown} "
                        f"({one_line(printable(answer['torch_error']), 160)}): repair that environment or choose "
                        "another.")
    torch = str(answer.get("torch") or "?")
    low, high = SUPPORTED_TORCH
    if not low <= torch_release(torch) <= high:
        raise UserError(f"The Python at {shown} has PyTorch {printable(torch)[:30]}; MPS Studio runs on "
                        f"{low[0]}.{low[1]} to {high[0]}.{high[1]}: choose an environment with one of those.")
    if answer.get("missing"):
        name = printable(answer["missing"])[:40]
        raise UserError(f"The Python at {shown} lacks {name}, which MPS Studio's run process needs: install it there "
                        f"(`{shown} -m pip install {name}`).")
    if answer.get("engine_error"):
        raise UserError(f"MPS Studio's engine cannot load in the Python at {shown} "
                        f"({one_line(printable(answer['engine_error']), 160)}): choose another environment.")
    found = Interpreter(str(target.absolute()), python, torch, answer.get("torch_git"),
                        os.path.basename(os.path.normpath(str(answer.get("prefix") or target.parent.parent))))
    with _lock:
        _checked[key] = (found, time.monotonic())
    return found


def why_not(path: str) -> str:
    """check(path) with an answer of the last minute at most (an environment may have lost a package since it was
    chosen in Preferences; a command that checked it a moment ago is not made to wait again): "" when it can run a
    run, else the sentence saying why not, naming it."""
    try:
        check(path, max_age_s=FRESH_S)
    except UserError as exc:
        return str(exc)
    return ""


def env_name(path: str) -> str:
    """The environment's folder name from its interpreter's path (".../torch215/bin/python" -> "torch215")."""
    parent = Path(path).expanduser().absolute().parent
    return (parent.parent if parent.name in ("bin", "Scripts") else parent).name


CHECK_OUTPUT_BYTES = 256 * 1024  # what the check may print before it is taken for something that is not a Python
CHECK_DRAIN_S = 0.5  # once the interpreter has exited: how long what it left in its pipes is still read
CHECK_TOKEN_VAR = "MPSSTUDIO_CHECK_TOKEN"  # marks every process the check starts (a `setsid` child keeps it too)


def _ask(target: Path, shown: str) -> dict:
    """Run the check in the interpreter, contained as a run is: its output read as it comes and capped, its end
    taken from its exit (a child it left holding the pipes is not waited for), and everything it started ended
    with it (its process group, and any process carrying the check's mark: one that left the group with setsid).
    Each way it can go wrong is said as itself."""
    import secrets
    import select

    token = secrets.token_hex(8)
    try:
        proc = subprocess.Popen([str(target), "-c", _CHECK, engine_root(), json.dumps(MIN_PYTHON),
                                 json.dumps(ENGINE_NEEDS)], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                stdin=subprocess.DEVNULL, env={**child_environment(), CHECK_TOKEN_VAR: token},
                                start_new_session=True)
    except OSError as exc:
        raise UserError(f"{shown} cannot be started ({printable(exc.strerror or exc)}): choose a Python "
                        "interpreter, such as a venv's bin/python.") from None
    out, err = bytearray(), bytearray()
    assert proc.stdout is not None and proc.stderr is not None  # (both PIPE)
    streams = {proc.stdout.fileno(): out, proc.stderr.fileno(): err}
    deadline, exited_at, why = time.monotonic() + CHECK_TIMEOUT_S, None, ""
    try:
        while streams:
            now = time.monotonic()
            if exited_at is None and proc.poll() is not None:
                exited_at = now
            if exited_at is not None and now - exited_at > CHECK_DRAIN_S:
                break  # exited; what a leftover child still holds open is not waited for
            if now > deadline:
                why = "timeout"
                break
            ready, _, _ = select.select(list(streams), [], [], 0.05)
            for fd in ready:
                data = os.read(fd, 65536)
                if not data:
                    del streams[fd]
                    continue
                streams[fd] += data
            if len(out) + len(err) > CHECK_OUTPUT_BYTES:
                why = "flood"
                break
        if exited_at is None and not why:
            proc.wait(CHECK_DRAIN_S)
    finally:  # an answer, a flood, a hang or Ctrl-C: nothing of the check stays behind
        _end_group(proc)
        _end_marked(token)
        for stream in (proc.stdout, proc.stderr):
            if stream is not None:
                stream.close()
    if why == "flood":
        raise UserError(f"{shown} printed more than {CHECK_OUTPUT_BYTES // 1024} KiB without answering MPS Studio's "
                        "check, so it was ended: it is not a Python MPS Studio can use; choose a Python interpreter, "
                        "such as a venv's bin/python.")
    if why == "timeout":
        raise UserError(f"The Python at {shown} did not answer within {CHECK_TIMEOUT_S:g} s (it was still running: a "
                        "first import of torch from a cold disk can take a minute); try again, or choose another "
                        "environment.")
    stdout = out.decode("utf-8", "replace")
    lines = [line for line in stdout.splitlines() if line.startswith("{")]
    try:
        answer = json.loads(lines[-1]) if lines else None
    except ValueError:
        answer = None
    if isinstance(answer, dict):
        return answer
    code = proc.returncode
    ended = (f"exited with code {code}" if code is not None and code >= 0 else
             f"was killed by signal {-code}" if code is not None else "did not end")
    raise UserError(f"{shown} {ended} without answering MPS Studio's check ({_said(out, err)}): it is not a "
                    "Python MPS Studio can use; choose a Python interpreter, such as a venv's bin/python.")


def _said(out: bytes | bytearray, err: bytes | bytearray) -> str:
    """What the interpreter wrote, as the sentence quotes it: its last line if it is text, else how much it was."""
    data = bytes(err or out)
    if not data.strip():
        return "it printed nothing"
    text = data.decode("utf-8", "replace")
    shown = sum(1 for c in text if c.isprintable() or c in "\n\t")
    if shown < 0.9 * len(text):
        return f"it printed {len(data):,} bytes that are not text"
    last = text.strip().splitlines()[-1]
    return f"it said: {one_line(printable(last), 120)}"


def _end_group(proc: subprocess.Popen) -> None:
    import signal

    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError, AttributeError):
        proc.kill()
    proc.wait()


def _end_marked(token: str) -> None:
    """End every process of this user that carries the check's mark in its environment (what left the group)."""
    import psutil

    found = []
    for p in psutil.process_iter(["pid", "uids"]):
        try:
            if p.pid == os.getpid() or (hasattr(os, "getuid") and p.info["uids"] and p.info["uids"].real != os.getuid()):
                continue
            if p.environ().get(CHECK_TOKEN_VAR) == token:
                found.append(p)
        except (psutil.Error, OSError):
            continue
    for p in found:
        try:
            p.kill()
        except psutil.Error:
            pass
    deadline = time.monotonic() + 2.0
    while found and time.monotonic() < deadline:  # gone, or a zombie its new parent has not collected yet
        found = [p for p in found if _alive(p)]
        if found:
            time.sleep(0.02)


def _alive(p) -> bool:
    import psutil

    try:
        return p.is_running() and p.status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


def child_environment(environ: dict | None = None) -> dict:
    """The environment another interpreter starts with: this one's, without what would make it load this
    environment's packages (PYTHONPATH, PYTHONHOME) and, in the frozen app, with the library paths its launcher
    changed put back (PyInstaller keeps the originals in *_ORIG)."""
    env = {k: v for k, v in (os.environ if environ is None else environ).items()
           if k not in ("PYTHONPATH", "PYTHONHOME", "PYTHONSTARTUP")}
    if getattr(sys, "frozen", False):
        for name in ("LD_LIBRARY_PATH", "DYLD_LIBRARY_PATH"):
            original = env.pop(f"{name}_ORIG", None)
            if original is not None:
                env[name] = original
            else:
                env.pop(name, None)
    return env


_root: str | None = None


def engine_root() -> str:
    """A folder holding only `mpsstudio`, a link to this engine's package (the app's bundled sources when frozen),
    made once per process and removed at exit."""
    global _root
    with _lock:
        if _root is not None and os.path.isdir(_root):
            return _root
        package = _package_source()
        folder = tempfile.mkdtemp(prefix="mpsstudio-engine-")
        os.symlink(package, os.path.join(folder, "mpsstudio"), target_is_directory=True)
        atexit.register(shutil.rmtree, folder, True)
        _root = folder
        return folder


def _package_source() -> str:
    """This engine's package folder on disk: the source tree, or in the frozen app the sources it carries."""
    here = Path(__file__).resolve().parents[2]  # .../mpsstudio
    if (here / "engine" / "process" / "child.py").is_file():
        return str(here)
    bundled = Path(getattr(sys, "_MEIPASS", "")) / "engine_source" / "mpsstudio"
    if (bundled / "engine" / "process" / "child.py").is_file():
        return str(bundled)
    raise UserError("This MPS Studio carries no sources another Python could run; use the Python it comes with.")


class ForeignProcess:
    """What RunProcess needs of a multiprocessing.Process, for a child run by another interpreter."""

    def __init__(self, python: str, conn_fd: int, output_fd: int):
        self.python, self._fds = python, (conn_fd, output_fd)
        self._popen: subprocess.Popen | None = None
        self.pid: int | None = None

    def start(self) -> None:
        fd_conn, fd_out = self._fds
        self._popen = subprocess.Popen([self.python, "-c", BOOT, engine_root(), str(fd_conn), str(fd_out)],
                                       pass_fds=self._fds, stdin=subprocess.DEVNULL, env=child_environment(),
                                       close_fds=True)
        self.pid = self._popen.pid

    @property
    def exitcode(self) -> int | None:
        return None if self._popen is None else self._popen.poll()

    def is_alive(self) -> bool:
        return self._popen is not None and self._popen.poll() is None

    def join(self, timeout: float | None = None) -> None:
        if self._popen is None:
            return
        try:
            self._popen.wait(timeout)
        except subprocess.TimeoutExpired:
            pass

    def close(self) -> None:
        pass
