"""Startup code for the frozen (PyInstaller) app: `packaging/launcher.py` calls `main()`.

What it does, in this order, before anything imports torch:
1. `multiprocessing.freeze_support()`: a DataLoader worker started by the frozen app (macOS uses the spawn
   start method, and we keep it) runs the worker and exits here instead of opening another window.
2. Turns on PyTorch's CPU fallback for ops MPS lacks (PYTORCH_ENABLE_MPS_FALLBACK=1) unless the user set
   the variable either way, and records that the app did (MPSSTUDIO_SET_MPS_FALLBACK=1) so it can say so.
3. Crash logging to `log_file_path()` (under platformdirs' user log dir, the folder the About box and
   Preferences show): faulthandler for hard crashes, sys.excepthook / threading.excepthook for uncaught
   Python exceptions. The file is kept small (rotated once past LOG_MAX_BYTES).
4. Hands over to `mpsstudio.launcher.main` (no arguments: the window; a subcommand: the headless CLI).
"""

from __future__ import annotations

import datetime
import os
import sys
from pathlib import Path

from mpsstudio.engine.machine.apple import FALLBACK_VAR  # torch-free, like everything this module imports first

APP_NAME = "MPS Studio"
LOG_MAX_BYTES = 512 * 1024
FALLBACK_SET_BY_APP_VAR = "MPSSTUDIO_SET_MPS_FALLBACK"
START_METHOD_VAR = "MPSSTUDIO_MP_START_METHOD"  # testing only: see main()

_log_stream = None  # kept open for faulthandler, which writes to its file descriptor


def log_dir() -> Path:
    from mpsstudio.engine.basics.paths import log_dir as app_log_dir

    return app_log_dir()


def log_file_path() -> Path:
    """The crash log: `<user log dir>/mpsstudio.log` (macOS: ~/Library/Logs/MPS Studio/mpsstudio.log)."""
    from mpsstudio.engine.basics.paths import log_file

    return log_file()


def ensure_mps_fallback(environ=None) -> bool:
    """Set PYTORCH_ENABLE_MPS_FALLBACK=1 unless the user set it (to anything); True when this set it."""
    env = os.environ if environ is None else environ
    if FALLBACK_VAR in env:
        return False
    env[FALLBACK_VAR] = "1"
    env[FALLBACK_SET_BY_APP_VAR] = "1"
    return True


def _rotate(path: Path, max_bytes: int = LOG_MAX_BYTES) -> None:
    try:
        if path.stat().st_size > max_bytes:
            path.replace(path.with_name(path.name + ".1"))  # keeps one previous log
    except OSError:
        pass


def _write_exception(exc_type, exc, tb, where: str = "") -> None:
    import traceback

    stream = _log_stream
    if stream is None:
        return
    try:
        stamp = datetime.datetime.now().isoformat(timespec="seconds")
        stream.write(f"\n{stamp} uncaught exception{where}:\n")
        stream.write("".join(traceback.format_exception(exc_type, exc, tb)))
        stream.flush()
    except (OSError, ValueError):
        pass


def _excepthook(exc_type, exc, tb) -> None:
    _write_exception(exc_type, exc, tb)
    try:
        sys.__excepthook__(exc_type, exc, tb)
    except Exception:  # no usable stderr (a windowed app): the log has it
        pass


def _thread_excepthook(args) -> None:
    if args.exc_type is SystemExit:
        return
    name = getattr(args.thread, "name", "?")
    _write_exception(args.exc_type, args.exc_value, args.exc_traceback, f" in thread {name}")
    try:
        sys.stderr.write(f"Exception in thread {name} (details in {log_file_path()})\n")
    except Exception:
        pass


def setup_crash_log(path: Path | None = None) -> Path | None:
    """Open the crash log (creating its folder), enable faulthandler on it and install the hooks."""
    global _log_stream
    import faulthandler
    import threading

    try:
        path = path or log_file_path()
        path.parent.mkdir(parents=True, exist_ok=True)
        _rotate(path)
        stream = open(path, "a", encoding="utf-8", buffering=1)
    except OSError:
        return None  # a read-only home: run without a crash log rather than not at all
    _log_stream = stream
    from . import __version__

    stream.write(f"{datetime.datetime.now().isoformat(timespec='seconds')} MPS Studio {__version__} started "
                 f"(pid {os.getpid()}, {FALLBACK_VAR}={os.environ.get(FALLBACK_VAR, '')}"
                 f"{' set by the app' if os.environ.get(FALLBACK_SET_BY_APP_VAR) == '1' else ''})\n")
    faulthandler.enable(file=stream, all_threads=True)
    sys.excepthook = _excepthook
    threading.excepthook = _thread_excepthook
    return path


def _ensure_std_streams() -> None:
    """A windowed app may have no stdout/stderr (None); give print() and argparse somewhere to write."""
    for name in ("stdout", "stderr"):
        if getattr(sys, name) is None:
            setattr(sys, name, open(os.devnull, "w", encoding="utf-8"))


def _clean_argv(argv: list[str]) -> list[str]:
    """Drop the process serial number argument old macOS versions pass to apps started from Finder."""
    return [a for a in argv if not a.startswith("-psn_")]


def main() -> None:
    import multiprocessing

    multiprocessing.freeze_support()  # must come first: a spawned DataLoader worker stops here
    # macOS already starts workers with "spawn" (kept). MPSSTUDIO_MP_START_METHOD=spawn lets the Linux smoke
    # test take that same path (a worker re-launching the frozen binary), which Linux's default fork skips.
    method = os.environ.get(START_METHOD_VAR)
    if method:
        multiprocessing.set_start_method(method, force=True)
    from mpsstudio.launcher import prepare_environment

    prepare_environment()  # a PYTORCH_ENABLE_MPS_FALLBACK torch cannot read is corrected, before torch loads
    ensure_mps_fallback()  # before anything imports torch
    _ensure_std_streams()
    setup_crash_log()
    sys.argv = _clean_argv(sys.argv)
    from mpsstudio.launcher import main as launch

    sys.exit(launch())
