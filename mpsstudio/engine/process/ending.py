"""SIGTERM and SIGHUP to a front end: raised as `Terminated` (a KeyboardInterrupt) in the main thread, so every path
that keeps a run on Ctrl-C keeps it on these too. Used by the CLI around a command and by the window (which closes,
keeping the run, instead of dying with it)."""

from __future__ import annotations

import contextlib
import signal
from typing import Any
import threading
from collections.abc import Callable, Iterator

from ..basics.errors import Terminated

_held: list[list[int]] = []  # one list per holding_signals() section entered, of the signals it caught


@contextlib.contextmanager
def holding_signals() -> Iterator[None]:
    """Keep something (a run being saved, a pending file being written) without being cut off: Ctrl-C, SIGTERM and
    SIGHUP arriving inside are held and raised (KeyboardInterrupt / Terminated) as the section ends. Outside the
    main thread it changes nothing (signals are delivered to the main thread only)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    caught: list[int] = []
    _held.append(caught)

    def on_interrupt(signum, frame):
        caught.append(signum)
    old_int = None
    if signal.getsignal(signal.SIGINT) is signal.default_int_handler:  # Ctrl-C raises here (not one that ignores it)
        try:
            old_int = signal.signal(signal.SIGINT, on_interrupt)
        except (ValueError, OSError):
            old_int = None
    try:
        yield
    finally:
        _held.remove(caught)
        if old_int is not None:
            try:
                signal.signal(signal.SIGINT, old_int)
            except (ValueError, OSError, TypeError):
                pass
    if caught:
        signum = caught[0]
        if signum == signal.SIGINT:
            raise KeyboardInterrupt
        raise Terminated(signum)


ENDING_SIGNALS = tuple(s for s in (getattr(signal, "SIGTERM", None), getattr(signal, "SIGHUP", None)) if s)


@contextlib.contextmanager
def ending_signals(on_signal: Callable[[int], None] | None = None) -> Iterator[None]:
    """While inside: SIGTERM / SIGHUP raise Terminated in the main thread (or call `on_signal(signum)` instead);
    only the first counts (a second, while the run is being kept, is ignored); the handlers before are restored
    after. Outside the main thread, where Python cannot set handlers, nothing changes."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    saved: dict[int, Any] = {}  # what signal.signal gave back: a handler, SIG_DFL, or None

    def handler(signum, frame):
        for sig in saved:
            signal.signal(sig, signal.SIG_IGN)  # keeping the run must not be cut short by a second signal
        if _held:  # in the middle of keeping something (holding_signals): raised when that is done
            _held[-1].append(signum)
            return
        if on_signal is not None:
            on_signal(signum)
        else:
            raise Terminated(signum)
    for sig in ENDING_SIGNALS:
        try:
            saved[sig] = signal.signal(sig, handler)
        except (ValueError, OSError):
            pass
    try:
        yield
    finally:
        for sig, old in saved.items():
            try:
                signal.signal(sig, old)
            except (ValueError, OSError, TypeError):
                pass
