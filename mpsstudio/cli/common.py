"""What every subcommand shares: exit codes, one-line argument errors, the run config from arguments, checks done
before any work (--json, --timeout, sizes), the available devices, and plain-text tables."""

from __future__ import annotations

import argparse
import sys
from typing import Sequence

from ..engine.analysis.regression import DEFAULT_FAIL_OVER
from ..engine.basics.config import RunConfig
from ..engine.basics.request import RunRequest
from ..engine.basics.torchrun import check_ranks
from ..engine.basics.errors import Terminated, UserError
from ..engine.basics.files import check_writable_file
from ..engine.basics.formatting import is_finite, printable
from ..engine.basics.formatting import Table

EXIT_OK, EXIT_RUN_FAILED, EXIT_BAD_INPUT, EXIT_INTERRUPTED = 0, 1, 2, 130
EXIT_CANNOT_TELL = 3  # a regression check that cannot tell (a noisy run, one run a side): not bad input, not a pass
EXIT_BUSY = 75  # EX_TEMPFAIL: the history is held by another program; nothing is wrong with the input, try again
MIN_TIMEOUT_S, MAX_TIMEOUT_S = 1, 7 * 24 * 3600
DEFAULTS = RunConfig()


def interrupted(exc: KeyboardInterrupt) -> tuple[int, str]:
    """The exit status and the words for an interrupted command: Ctrl-C 130 "interrupted"; SIGTERM 143 and SIGHUP
    129 "stopped by SIGTERM" (Terminated, process/ending.py)."""
    if isinstance(exc, Terminated):
        return 128 + exc.signum, f"stopped by {exc.name}"
    return EXIT_INTERRUPTED, "interrupted"


class Parser(argparse.ArgumentParser):
    """argparse that reports bad arguments in one line (exit 2) instead of usage plus error."""

    def error(self, message: str):
        self.exit(EXIT_BAD_INPUT, f"mpsstudio: {message} (see '{self.prog} --help').\n")


def config_from_args(args) -> RunConfig:
    """The settings the arguments describe (defaults where they say nothing), validated: a tool's one config."""
    return request_from_args(args).settings.validate()


def request_from_args(args, devices: Sequence[str] = ()) -> RunRequest:
    """The request the arguments describe: their settings (validated) and, for bench, `devices` (the named ones or
    every available one), --framework's list, --gpus's counts and --repeat's rounds; session.plan_request plans it."""
    changes: dict = {}
    mapping = {"model": "model", "dataset": "dataset", "batch_size": "batch_size", "warmup": "warmup_steps",
               "precision": "precision", "optimizer": "optimizer", "lr": "lr", "mode": "mode",
               "workers": "workers", "threads": "threads", "image_size": "image_size", "seed": "seed",
               "early_stop": "early_stop_patience", "early_stop_monitor": "early_stop_monitor",
               "early_stop_mode": "early_stop_mode", "accumulate": "accumulate", "input_shape": "input_shape",
               "num_classes": "num_classes"}
    for arg, field in mapping.items():
        value = getattr(args, arg, None)
        if value is not None:
            changes[field] = value
    if "dataset" not in changes and changes.get("model"):
        from ..engine.models.hf_folder import is_model_folder

        if is_model_folder(changes["model"]):  # its batches made for its task, unless it is given text
            changes["dataset"] = "synthetic"
    if getattr(args, "steps", None) is not None:
        changes.update(steps=args.steps, epochs=None)
    elif getattr(args, "epochs", None) is not None:
        changes.update(epochs=args.epochs, steps=None)
    for flag, field in (("resident", "resident"), ("channels_last", "channels_last"), ("compile", "compile"),
                        ("tf32", "tf32"), ("tf32_conv", "tf32_conv"),
                        ("keep_best", "keep_best"), ("cast_float64", "cast_float64")):
        if getattr(args, flag, False):
            changes[field] = True
    if getattr(args, "seq_len", None) is not None:
        if changes.get("input_shape"):
            raise UserError("Give the sequence length once: --seq-len L, or --input-shape L.")
        changes["input_shape"] = [args.seq_len]
    tuning = {key: value for key, value in (("finetune", getattr(args, "finetune", None)),
                                            ("lora_rank", getattr(args, "lora_rank", None)),
                                            ("lora_alpha", getattr(args, "lora_alpha", None)),
                                            ("checkpointing", getattr(args, "gradient_checkpointing", False) or None),
                                            ("text_layout", getattr(args, "text_layout", None)),
                                            ("quantize", getattr(args, "quantize", None)))
              if value is not None}
    if tuning:
        from ..engine.models.hf_folder import finetune_of

        finetune_of({k: v for k, v in tuning.items() if k not in ("text_layout", "quantize")})  # checked now: one sentence
        changes["options"] = {**changes.get("options", {}), **tuning}
    framework = getattr(args, "framework", None)
    if framework is not None and "," not in framework:  # a tool's one framework (bench takes a list: its plan's)
        from ..engine.run.session import check_frameworks

        changes["framework"] = check_frameworks([framework])[0]
    if getattr(args, "mps_fallback", None) is not None:
        changes["mps_fallback"] = args.mps_fallback
    changes["torchrun"] = [f"--{name.replace('_', '-')}={value}" for name in TORCHRUN_ARGS
                           if (value := getattr(args, name, None)) is not None]
    if getattr(args, "rank_timeout", None) is not None:
        changes["rank_timeout_s"] = args.rank_timeout
    request = RunRequest.of(**changes)
    request.settings.validate()
    frameworks = tuple(framework.split(",")) if framework is not None and "," in framework else ()
    return request.changed(devices=tuple(devices), frameworks=frameworks)


TORCHRUN_ARGS = ("nnodes", "node_rank", "rdzv_backend", "rdzv_endpoint", "rdzv_id", "master_addr", "master_port")


def gpu_counts(text: str | None) -> list[int]:
    """--gpus "2" or "1,2,4" -> [2], [1, 2, 4]; one sentence for anything else."""
    if text is None:
        return []
    parts = [p.strip() for p in str(text).split(",")]
    if len(parts) > 16:
        raise UserError(f"--gpus takes at most 16 counts, not {len(parts)}; give fewer, such as 1,2,4,8.")
    if not parts or not all(p.isascii() and p.isdigit() and len(p) <= 12 for p in parts):  # not "²" or "①"
        raise UserError(f"--gpus takes a number of GPUs or a list such as 1,2,4, not {printable(text)[:40]!r}.")
    counts = list(dict.fromkeys(int(p) for p in parts))
    for n in counts:
        check_ranks(RunConfig(gpus=n))  # the bounds, said as the config says them
    return counts


def check_timeout(timeout) -> None:
    if timeout is not None and not (is_finite(timeout) and MIN_TIMEOUT_S <= timeout <= MAX_TIMEOUT_S):
        raise UserError(f"--timeout must be a number of seconds from {MIN_TIMEOUT_S:g} to {MAX_TIMEOUT_S:,}, "
                        f"not {timeout:g}.")


def available_devices() -> list[str]:
    """Every device that can run here, cpu first (what the window checks by default)."""
    from ..engine.machine import devices

    return [d.id for d in devices.discover_devices() if d.available]


def check_json_path(path: str | None, reads: Sequence[str] = ()) -> None:
    """A --json that cannot be written is bad input: say so before the work, not after."""
    if path is not None:
        check_output(path, "--json", reads)


def check_output(path: str, what: str, reads: Sequence[str] = ()):
    """Where `what` may write: check_writable_file, and never the history's own files nor a file this command
    reads (`reads`: an input, a baseline), which the write would destroy; the resolved path."""
    return not_the_history(check_writable_file(path, what), path, what, reads)


def not_the_history(target, path: str, what: str, reads: Sequence[str] = ()):
    """`target` (resolved) unless it is one of the history's files or a file in `reads`: one sentence then."""
    from pathlib import Path

    from ..engine.basics.paths import data_dir

    history = (data_dir() / "runs.sqlite3").resolve()
    kept = {history, *(history.with_name(history.name + tail) for tail in ("-journal", "-wal", "-shm"))}
    if target in kept or target.parent == history.parent and target.name.startswith(history.name):
        raise UserError(f"{what} {printable(path)} is the run history's own file; writing there would destroy "
                        "every run kept. Choose another file.")
    for name in reads:
        try:
            same = Path(name).expanduser().resolve() == target
        except (OSError, RuntimeError, ValueError):
            same = False
        if same:
            raise UserError(f"{what} {printable(path)} is also a file this command reads ({printable(name)}); "
                            "writing it would replace what is read. Choose another file.")
    return target


def find_run(results, text: str, what: str = "run"):
    """The run whose id is `text` or starts with it (at least 4 characters: the tables show 8); one sentence when
    none or several do."""
    if not text.strip():
        raise UserError(f"Give the {what}'s id, not an empty text; `mpsstudio history` lists them.")
    text = text.strip().lower() if all(c in "0123456789abcdefABCDEF" for c in text.strip()) else text
    shown = printable(text)[:64]
    exact = [r for r in results if r.id == text]
    found = exact or ([r for r in results if r.id.startswith(text)] if len(text) >= 4 else [])
    if len(found) == 1:
        return found[0]
    if found:
        raise UserError(f"{len(found)} runs have ids starting with {shown}; give more of the {what}'s id.")
    if len(text) < 4 and not exact:
        raise UserError(f"No run with id {shown} in the history; give at least 4 characters of an id (`mpsstudio "
                        "history` lists them).")
    raise UserError(f"No run with id {shown} in the history; `mpsstudio history` lists them.")


def format_table(results, keys: Sequence[str] | None = None) -> str:
    """Runs as a table (the CLI's bench columns by default), speedup against the CPU run of the same comparison."""
    from ..engine.history.columns import BY_KEY, CLI_BENCH_COLUMNS, cell_text
    from ..engine.analysis.compare import compare, speedup_map

    from ..engine.analysis.energy import notes

    keys = keys or CLI_BENCH_COLUMNS
    speedups = speedup_map(compare(results))
    rows = [[cell_text(k, r, speedups, dash="-", times="x") for k in keys] for r in results]
    table = grid(Table([BY_KEY[k].title for k in keys], rows, [BY_KEY[k].numeric for k in keys]))
    if "samples_per_s_spread" in keys and results:  # the one legend of ± (basics/formatting.py)
        from ..engine.basics.formatting import SPREAD_WORDS

        table += f"\n{SPREAD_WORDS} (Samples/s)."
    if "j_per_sample" in keys and results:  # what the energy figures are, or why they are empty
        table += "\n" + "\n".join(printable(line) for line in notes(results))
    return table


# The terminal's width the tables fit (None: no limit, set by --wide or when the output is not a terminal)
TABLE_WIDTH: int | None = None


def fit_tables_to_terminal(wide: bool) -> None:
    """Tables fit the terminal's width when the output is one (`--wide` or a pipe: one line per row, whatever its
    width, so that a script reading it sees every column on one line)."""
    import shutil

    global TABLE_WIDTH
    TABLE_WIDTH = None if wide or not sys.stdout.isatty() else max(40, shutil.get_terminal_size().columns)


def grid(table: Table, width: int | None = None) -> str:
    """A Table as plain text: numbers right-aligned, text left-aligned. Wider than `width` (default: the terminal's,
    TABLE_WIDTH), the columns that do not fit move to a further block below, each block led by the first column so
    that its rows can be told apart. (The legend is the caller's to print: it reads differently on a terminal.)"""
    headers, rows, right = table.headers, table.rows, table.numeric
    widths = [max(len(h), *(len(row[i]) for row in rows)) if rows else len(h) for i, h in enumerate(headers)]
    limit = TABLE_WIDTH if width is None else width
    blocks = _column_blocks(widths, limit) if limit else [list(range(len(headers)))]

    def line(cells, cols):
        return "  ".join(cells[i].rjust(widths[i]) if right[i] else cells[i].ljust(widths[i]) for i in cols).rstrip()
    out: list[str] = []
    for cols in blocks:
        if out:
            out.append("")
        out += [line(headers, cols), "-" * len(line(headers, cols))]
        out += [line(row, cols) for row in rows]
    return "\n".join(out)


def _column_blocks(widths: list[int], limit: int) -> list[list[int]]:
    """Column indexes per block: as many columns as fit `limit` after the first (repeated in every block). A column
    too wide for any block (a description) stays where it is and the terminal wraps it: nothing is cut."""
    if sum(widths) + 2 * (len(widths) - 1) <= limit or len(widths) < 3:
        return [list(range(len(widths)))]
    blocks: list[list[int]] = []
    current = [0]
    used = widths[0]
    for i in range(1, len(widths)):
        alone_fits = widths[0] + 2 + widths[i] <= limit
        if len(current) > 1 and used + 2 + widths[i] > limit and alone_fits:
            blocks.append(current)
            current, used = [0], widths[0]
        current.append(i)
        used += 2 + widths[i]
    blocks.append(current)
    return blocks



def fail_over(text: str | None) -> float:
    """--fail-over's share: "5%", "5" or "2.5 %" -> 0.05, 0.05, 0.025; one sentence for anything else."""
    if text is None:
        return DEFAULT_FAIL_OVER
    number = text.strip().removesuffix("%").strip()
    try:
        value = float(number) if number.replace(".", "", 1).isdigit() else None
    except ValueError:
        value = None
    if value is None or not 0 < value < 100:
        raise UserError(f"--fail-over must be a percentage above 0 and below 100, like 5%, not {printable(text)[:40]}.")
    return value / 100
