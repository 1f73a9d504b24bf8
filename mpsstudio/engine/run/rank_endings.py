"""How a run on several GPUs ended, in one sentence: the first rank that failed, the first that ended without a word
(how torchrun saw it end), the rank that stopped answering at a collective, torchrun ended during the run, or
torchrun ended before the ranks started. run/distributed.py gathers what the ranks and torchrun said; this says it."""

from __future__ import annotations

import re
import signal

from ..basics.formatting import one_line, printable

# how a collective that waited for a rank that stopped answering reads (gloo's and NCCL's words)
WAITED = re.compile(r"timed out|timeout|connection closed by peer|connection reset|broken pipe|"
                    r"NCCL communicator was aborted|DistBackendError|watchdog", re.I)


def plain(error: str) -> str:
    """A collective's error without its source paths and our preamble: "Timed out waiting 5000ms for recv"."""
    text = re.sub(r"\[[^\]]*[/\\][^\]]*\]\s*", "", error).removeprefix("The run stopped with an error: ")
    return one_line(text, 160)


def first_cause(n: int, said: dict, lost: list, failed_first: list, order: list, conns: dict, timeout_s: float,
                output: list[str]) -> str:
    """One sentence naming the rank the run failed by, "" when none failed. `said`: rank -> (status, error) as each
    said it ended; `lost`: ranks whose connection closed without a word; `order`: ("failed" | "lost", rank) as
    they came (what came first is the cause)."""
    roots = [r for r in failed_first if not WAITED.search(said[r][1])]
    if roots:
        r = roots[0]
        return f"Rank {r} of {n} failed: {said[r][1]}"
    waited_first = failed_first and (not lost or order.index(("failed", failed_first[0]))
                                     < order.index(("lost", lost[0])))
    if lost and not waited_first:
        r = lost[0]
        return (f"Rank {r} of {n} ended without a word ({exit_of(r, output)}); the other ranks were ended. Its last "
                "output is in the run's output.")
    if failed_first:  # only collectives that waited: the ranks that said nothing hung
        waited = failed_first[0]
        silent = [r for r in sorted(conns) if r not in said] or lost
        who = (f"rank {', '.join(map(str, silent))} stopped answering" if silent else
               "a rank stopped answering")
        return (f"{who[0].upper()}{who[1:]}: rank {waited} of {n} waited {timeout_s:g} s for it at a collective (the "
                f"ranks' timeout, --rank-timeout) and the run was ended ({plain(said[waited][1])}).")
    return ""


def exit_of(rank: int, output: list[str]) -> str:
    """How torchrun saw the rank end ("killed by signal 9 (SIGKILL)"), from its failure report."""
    text = "\n".join(output)
    for match in re.finditer(r"rank\s*:\s*(\d+)[^\n]*\n\s*exitcode\s*:\s*(-?\d+)", text):
        if int(match.group(1)) == rank:
            code = int(match.group(2))
            if code < 0:
                try:
                    return f"killed by signal {-code} ({signal.Signals(-code).name})"
                except ValueError:
                    return f"killed by signal {-code}"
            return f"exit code {code}"
    return "its process crashed or was killed"


def launcher_ended(code: int | None, world: int) -> str:
    """The sentence of a run whose launcher (torchrun) ended before its ranks said how the run ended."""
    if code is not None and code < 0:
        try:
            how = f"was killed by signal {-code} ({signal.Signals(-code).name})"
        except ValueError:
            how = f"was killed by signal {-code}"
    elif code is not None:
        how = f"exited with code {code}"
    else:
        how = "stopped answering"
    return (f"torchrun, which started the {world} ranks, {how} during the run; the ranks were ended with it and what "
            "rank 0 measured until then is kept.")


def launch_failed(output: list[str]) -> str:
    """torchrun's reason: its last line naming an error (a rendezvous it could not reach, say), else its last words,
    without file paths."""
    lines = [line.strip() for line in output if line.strip() and not line.lstrip().startswith(("*", "File "))]
    errors = [line for line in lines if re.search(r"\w(Error|Exception)\b", line)]
    last = errors[-1:] or lines[-1:]
    said = one_line(printable(plain(last[0])), 240) if last else "nothing"
    return (f"torchrun ended before the ranks started (it said: {said}); check --gpus and the rendezvous options.")
