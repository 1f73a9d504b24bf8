"""What a run on several machines may pass to torchrun (RunConfig.torchrun), checked before torchrun starts: torchrun
would say it in a traceback, or ignore it."""

from __future__ import annotations

from .errors import UserError
from .formatting import is_finite, one_line

MAX_GPUS = 64  # ranks on one machine (torchrun's --nproc-per-node)
MIN_RANK_TIMEOUT_S, MAX_RANK_TIMEOUT_S = 1.0, 3600.0

# torchrun's options a run passes through (run on several machines; process/rank.py): --nproc-per-node is --gpus,
# restarts would hide a failed rank, and the rest (its log folders, its own entry point) are the launch's own
TORCHRUN_OPTIONS = ("--nnodes", "--node-rank", "--rdzv-backend", "--rdzv-endpoint", "--rdzv-id", "--rdzv-conf",
                    "--master-addr", "--master-port", "--local-addr")


def check_torchrun(args) -> None:
    """torchrun's options for a run (a list of texts): only TORCHRUN_OPTIONS, each value one torchrun can use, and a
    meeting point when there are several machines; UserError (one sentence) otherwise."""
    if not isinstance(args, list) or len(args) > 40 or not all(isinstance(a, str) and 0 < len(a) <= 400
                                                               for a in args):
        raise UserError("torchrun's options must be a list of at most 40 texts.")
    for arg in args:
        name = arg.split("=", 1)[0].replace("_", "-")
        if arg.startswith("-") and name not in TORCHRUN_OPTIONS:
            raise UserError(f"{_shown(arg)} is not a torchrun option MPS Studio passes on; give only "
                            f"{', '.join(TORCHRUN_OPTIONS)} (--gpus sets --nproc-per-node).")
    given = {a.split("=", 1)[0].replace("_", "-"): a.split("=", 1)[-1] for a in args if a.startswith("-")}
    _check_torchrun_values(given)
    if given.get("--nnodes", "1") not in ("1", "1:1") and not ({"--rdzv-endpoint", "--master-addr"} & set(given)):
        raise UserError("A run on several machines needs where they meet: give --rdzv-endpoint HOST:PORT (with "
                        "--rdzv-backend c10d and a shared --rdzv-id) or --master-addr and --node-rank, the same on "
                        "every machine.")


def _check_torchrun_values(given: dict) -> None:
    """torchrun's options' values, before torchrun starts (it would say so in a traceback, or ignore them)."""
    def port(text: str, what: str) -> None:
        if not (text.isascii() and text.isdigit() and 1 <= int(text) <= 65535):
            raise UserError(f"{what} must be a port from 1 to 65535, not {_shown(text)}.")
    nodes = given.get("--nnodes", "1")
    counts = nodes.split(":") if nodes.count(":") <= 1 else []
    if not counts or not all(c.isascii() and c.isdigit() and 1 <= int(c) <= 100_000 for c in counts) or \
            int(counts[0]) > int(counts[-1]):
        raise UserError(f"--nnodes is a number of machines (or MIN:MAX), not {_shown(nodes)}.")
    if "--node-rank" in given:
        rank = given["--node-rank"]
        if not (rank.isascii() and rank.isdigit() and int(rank) < int(counts[-1])):
            raise UserError(f"--node-rank is this machine's number, from 0 to {int(counts[-1]) - 1}, not "
                            f"{_shown(rank)}.")
    if "--master-port" in given:
        port(given["--master-port"], "--master-port")
    if "--rdzv-endpoint" in given:
        host, _, number = given["--rdzv-endpoint"].rpartition(":")
        if not host or not host.strip():
            raise UserError(f"--rdzv-endpoint is HOST:PORT, not {_shown(given['--rdzv-endpoint'])}.")
        port(number, "--rdzv-endpoint's port")
    if "--master-port" in given and not ({"--master-addr", "--nnodes"} & set(given)):
        raise UserError("--master-port is where the machines of a run on several meet; on one machine torchrun picks "
                        "a free port itself: drop it, or give --nnodes and --master-addr too.")



def _shown(v) -> str:
    return one_line(repr(v), 40)


def check_ranks(config) -> None:
    """--gpus, torchrun's options and the rank timeout of a RunConfig: what a run on several GPUs can be; UserError."""
    gpus = config.gpus
    if isinstance(gpus, bool) or not isinstance(gpus, int) or not 1 <= gpus <= MAX_GPUS:
        raise UserError(f"The number of GPUs must be a whole number from 1 to {MAX_GPUS:,}, not {_shown(gpus)}.")
    if not is_finite(config.rank_timeout_s) or not MIN_RANK_TIMEOUT_S <= config.rank_timeout_s <= MAX_RANK_TIMEOUT_S:
        raise UserError(f"The ranks' timeout must be between {MIN_RANK_TIMEOUT_S:g} and {MAX_RANK_TIMEOUT_S:g} "
                        f"seconds, not {_shown(config.rank_timeout_s)}.")
    check_torchrun(config.torchrun)
    if not config.distributed:
        return
    if config.is_script:
        raise UserError("--gpus runs MPS Studio's own loop on several GPUs; to measure your own script there, run "
                        "it under torchrun yourself.")
    if config.device not in ("cuda", "cpu"):
        raise UserError(f"Runs on several GPUs name the device cuda (the ranks take GPUs 0 to {config.gpus - 1}) "
                        f"or cpu (ranks sharing its cores, to try the distributed path), not "
                        f"{_shown(config.device)}; MPS has no distributed backend.")
    if config.early_stop_patience is not None or config.keep_best:
        raise UserError("Early stopping and the best epoch are for one device; drop them to train on several "
                        "GPUs.")
