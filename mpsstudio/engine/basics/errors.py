"""Errors whose message is meant for the user, as one clear sentence."""

from __future__ import annotations

from typing import TypeVar


class UserError(Exception):
    """Bad input: the message says what is wrong and what to do, in one sentence.

    Front ends print ``str(err)`` as it is (the CLI exits 2); never a traceback.
    """


class Terminated(KeyboardInterrupt):
    """A signal asking the front end to end (SIGTERM: `kill`, a job scheduler, a logout; SIGHUP: its terminal
    closed), handled as Ctrl-C is: the run in progress is kept as cancelled, with `reason`, and the command exits
    with 128 + the signal's number (143, 129)."""

    def __init__(self, signum: int):
        super().__init__(signum)
        import signal

        self.signum = signum
        try:
            self.name = signal.Signals(signum).name
        except ValueError:
            self.name = f"signal {signum}"
        self.reason = f"Stopped by {self.name} (the front end was asked to end); what it measured until then is kept."


class HistoryBusy(UserError):
    """Another program held the run history for longer than the bounded wait (history/schema.LOCK_WAIT_S): not the
    input's fault, so a command says it and exits 75 (EX_TEMPFAIL: try again), not 2."""


T = TypeVar("T")


def present(value: T | None, missing: str) -> T:
    """`value`, which exists only after some step (a run's set-up, a script's first step): RuntimeError saying
    `missing` where asked before it (a bug in the caller, never a user's input)."""
    if value is None:
        raise RuntimeError(missing)
    return value
