"""The command line's arguments: every subcommand, its options and their help (what `mpsstudio --help` shows)."""

from __future__ import annotations

import argparse

from ..engine.basics.config import MODES, MONITORS, OPTIMIZERS, PRECISIONS
from .arguments import add_options, config_args, finetune_args, gpu_args, input_args, math_args
from .common import DEFAULTS, Parser


def version_line() -> str:
    """"mpsstudio 0.1.0 (Python 3.11.7, torch 2.14.1)": the installed torch's version read from its metadata,
    without importing it (a second, not three)."""
    import platform
    from importlib import metadata

    from .. import __version__

    try:
        torch_version = metadata.version("torch")
    except metadata.PackageNotFoundError:  # a frozen app may carry torch without its metadata: ask torch itself
        try:
            import torch

            torch_version = torch.__version__
        except ImportError:
            torch_version = "not installed"
    return f"mpsstudio {__version__} (Python {platform.python_version()}, torch {torch_version})"


def build_parser() -> argparse.ArgumentParser:
    p = Parser(prog="mpsstudio", description="Measure PyTorch training speed on CPU, Apple GPU (MPS) and CUDA. "
                "Without a subcommand, `mpsstudio` opens the window (`mpsstudio --demo --screenshot PATH`: "
                "run the default comparison there, save a screenshot, exit).")
    p.add_argument("--version", action="version", version=version_line(),
                   help="the version of MPS Studio, Python and PyTorch, and exit")
    sub = p.add_subparsers(dest="command", parser_class=Parser)

    _bench_parser(sub)
    _launch_parser(sub)
    _run_parser(sub)
    _tool_parsers(sub)
    sub.add_parser("devices", help="list devices, why any is unavailable, and check that each accelerator works")
    sub.add_parser("models", help="list models")
    sub.add_parser("datasets", help="list datasets")
    sub.add_parser("doctor", help="check the PyTorch / MPS / CUDA setup in plain words")
    sub.add_parser("demo", help="the default comparison (built-in dataset, every available device)")
    _history_parser(sub)
    _report_parser(sub)
    for command in sub.choices.values():  # every table fits the terminal's width, unless asked otherwise
        command.add_argument("--wide", action="store_true",
                             help="one line per table row whatever the terminal's width (the default when the "
                                  "output is not a terminal)")
    return p


def _bench_parser(sub) -> None:
    """bench: one setup on each device in turn, compared."""
    b = sub.add_parser("bench", help="run one config on each device in turn and print a comparison")
    b.add_argument("--model", default=None,
                   help=f"model name (see `mpsstudio models`) or a .py file (default: {DEFAULTS.model})")
    b.add_argument("--dataset", default=None,
                   help=f"dataset name (see `mpsstudio datasets`) or an image folder (default: {DEFAULTS.dataset})")
    b.add_argument("--devices", default=None,
                   help="comma-separated devices, e.g. cpu,mps,cuda (default: every available device, cpu first)")
    b.add_argument("--framework", default=None, metavar="torch|mlx|torch,mlx",
                   help="the framework that trains: torch (the default), mlx (the same model in MLX, its weights "
                        "PyTorch's, parity checked first) or both, each on every device (--framework torch,mlx "
                        "--devices mps: PyTorch's MPS against MLX's GPU); MLX takes mlp, mnist_cnn, resnet18 and "
                        "transformer, or a model file with build_mlx_model")
    b.add_argument("--repeat", type=int, default=None, metavar="N",
                   help="run the devices N times, interleaved (A B B A ...), and report the median of the paired "
                        "speedups with their range (default: 1; 3 with --baseline, whose interval is between "
                        "processes)")
    b.add_argument("--batch-size", type=int, default=None,
                   help=f"samples per step (default: {DEFAULTS.batch_size})")
    group = b.add_mutually_exclusive_group()
    group.add_argument("--steps", type=int, default=None, help="measured steps after warm-up")
    group.add_argument("--epochs", type=int, default=None,
                       help=f"whole passes over the training set (default: {DEFAULTS.epochs})")
    b.add_argument("--warmup", type=int, default=None,
                   help=f"warm-up steps, timed apart (default: {DEFAULTS.warmup_steps})")
    b.add_argument("--precision", choices=PRECISIONS, default=None,
                   help=f"fp16/bf16: autocast where the device supports it (default: {DEFAULTS.precision})")
    b.add_argument("--optimizer", choices=OPTIMIZERS, default=None, help=f"(default: {DEFAULTS.optimizer})")
    b.add_argument("--lr", type=float, default=None, help=f"learning rate (default: {DEFAULTS.lr})")
    b.add_argument("--mode", choices=MODES, default=None, help=f"(default: {DEFAULTS.mode})")
    b.add_argument("--workers", type=int, default=None, help="data loader worker processes")
    b.add_argument("--resident", action="store_true", help="keep the dataset on the device")
    b.add_argument("--channels-last", action="store_true", help="images in NHWC memory order")
    b.add_argument("--compile", action="store_true", help="torch.compile the model")
    math_args(b)
    input_args(b)
    b.add_argument("--seed", type=int, default=None, help=f"random seed (default: {DEFAULTS.seed})")
    fallback = b.add_mutually_exclusive_group()
    fallback.add_argument("--mps-fallback", dest="mps_fallback", action="store_true", default=None,
                          help="run operations MPS lacks on the CPU, slowly (the default)")
    fallback.add_argument("--no-mps-fallback", dest="mps_fallback", action="store_false",
                          help="stop a run that uses an operation MPS lacks instead")
    b.add_argument("--cast-float64", action="store_true",
                   help="on MPS, cast the model's float64 / complex128 tensors to float32 / complex64 (MPS has "
                        "neither) instead of refusing the run")
    b.add_argument("--early-stop", type=int, default=None, metavar="PATIENCE",
                   help="stop when the monitored validation figure has not improved for PATIENCE epochs")
    b.add_argument("--early-stop-monitor", choices=MONITORS, default=None,
                   help="what early stopping watches (default: val_accuracy)")
    b.add_argument("--early-stop-mode", choices=("max", "min"), default=None,
                   help="better is higher (max) or lower (min) (default: max for accuracy, min for loss)")
    b.add_argument("--keep-best", action="store_true",
                   help="end with the best epoch's weights (a best checkpoint), e.g. to save them")
    b.add_argument("--accumulate", type=int, default=None, metavar="N",
                   help="gradient accumulation: one optimizer step every N batches (an effective batch of "
                        "N x batch size); throughput still counts samples")
    b.add_argument("--save-model", metavar="PATH", default=None,
                   help="write the trained model's weights to PATH (torch state_dict; loads with "
                        "weights_only=True) and what rebuilding it needs to PATH's .json; with several devices, "
                        "one file per device (PATH-cpu.pt, PATH-mps.pt)")
    gpu_args(b)
    finetune_args(b)
    b.add_argument("--timeout", type=float, default=None, metavar="SECONDS",
                   help="end a run that takes longer (setup included) and record it as failed")
    b.add_argument("--json", metavar="FILE", default=None,
                   help="write runs and comparisons to FILE (a file to share: no host name, user name or absolute "
                        "path in it, unless --keep-host)")
    b.add_argument("--keep-host", action="store_true",
                   help="keep the host name, the interpreter's path and absolute paths in --json's file")
    b.add_argument("--no-save", action="store_true", help="do not keep the runs in the history")
    b.add_argument("--python", metavar="PATH", default=None,
                   help="run in another Python environment: the python of a venv or conda env with its own torch "
                        "(checked first); runs of one setup in two environments are compared by `history --compare`")
    b.add_argument("--baseline", metavar="RUN|FILE", default=None,
                   help="a regression check: compare each device's new run with the newest run of the same work on "
                        "that kind of device in a run id of the history or a JSON export (bench --json); exit 1 "
                        "when it is slower by more than --fail-over and its 95 %% interval lies wholly below 1")
    b.add_argument("--fail-over", metavar="PERCENT", default=None,
                   help="how much slower than the baseline fails the check (default: 5%%)")
    b.add_argument("--no-inspect", action="store_true",
                   help="after an MPS run, skip the inspection (operations that fell back to the CPU, parity with "
                        "the CPU) whose findings the verdict names")



def _launch_parser(sub) -> None:
    """launch-benchmark: PyTorch's MPS launch workloads beside the published claim."""
    lb = sub.add_parser("launch-benchmark",
                        help="PyTorch's MPS launch benchmark (ResNet50, BERT-base, VGG16; training and inference) on "
                             "every available device, beside the published claim")
    lb.add_argument("--devices", default=None, help="comma-separated devices (default: every available device)")
    lb.add_argument("--steps", type=int, default=None, help="measured steps per run (default: 10)")
    lb.add_argument("--warmup", type=int, default=None, help="warm-up steps per run (default: 2)")
    lb.add_argument("--workloads", default=None, help="comma-separated subset of resnet50,bert-base,vgg16")
    lb.add_argument("--modes", default=None, help="comma-separated subset of train,inference")
    lb.add_argument("--no-estimate", action="store_true", help="skip the short probe that estimates the time")
    lb.add_argument("--timeout", type=float, default=None, metavar="SECONDS", help="limit per run")
    lb.add_argument("--json", metavar="FILE", default=None, help="write the runs and comparisons to FILE")
    lb.add_argument("--no-save", action="store_true", help="do not keep the runs in the history")



def _run_parser(sub) -> None:
    """run: the user's own training script, measured on each device."""
    r = sub.add_parser("run", help="run your own training script on each device in turn and measure its steps "
                                   "(mpsstudio.track, or counted by the optimizer): kept and compared as runs",
                       usage="mpsstudio run SCRIPT [options] [-- SCRIPT ARGS ...]",
                       epilog="After --, the script's own arguments; {device} in them becomes the run's device.")
    r.add_argument("script", help="the .py script to run (as `python SCRIPT ARGS` would)")
    r.add_argument("--devices", default=None, help="comma-separated devices (default: every available device)")
    r.add_argument("--steps", type=int, default=None,
                   help="end the script after this many measured steps (default: its own end)")
    r.add_argument("--warmup", type=int, default=None, help="warm-up steps, timed apart (default: 10)")
    r.add_argument("--repeat", type=int, default=1, metavar="N", help="run the devices N times, interleaved")
    r.add_argument("--python", metavar="PATH", default=None,
                   help="run the script with another Python environment's python (a venv or conda env with its own "
                        "torch; checked first)")
    r.add_argument("--timeout", type=float, default=None, metavar="SECONDS", help="end a run that takes longer")
    r.add_argument("--batch-size", type=int, default=None, metavar="N",
                   help="the samples of each step, when the model's input cannot say it (default: read from the "
                        "model's first input, or mt.step's batch_size)")
    r.add_argument("--args-for", action="append", default=[], metavar="DEVICE=ARGS",
                   help="arguments for one device's run only, added after the script's own (e.g. --args-for "
                        "cuda=\"--accel\"); repeat for other devices")
    r.add_argument("--keep-args", action="store_true",
                   help="keep the script's arguments as given in the history and its exports (by default values that "
                        "look like secrets, such as --api-key's or an hf_ token, are stored as [redacted])")
    r.add_argument("--show-output", action="store_true",
                   help="print the script's own output as it comes (default: its last lines under the progress line "
                        "on a terminal; all of it is kept in the run's output log)")
    r.add_argument("--json", metavar="FILE", default=None,
                   help="write the runs and comparisons to FILE (no host name, user name or absolute path, unless "
                        "--keep-host)")
    r.add_argument("--keep-host", action="store_true",
                   help="keep the host name, the interpreter's path and absolute paths in --json's file")
    r.add_argument("--no-save", action="store_true", help="do not keep the runs in the history")



def _history_parser(sub) -> None:
    """history: the stored runs, imports, deletes, notes and comparisons by what differs."""
    h = sub.add_parser("history", help="list stored runs and comparisons")
    h.add_argument("--import", dest="import_file", metavar="FILE",
                   help="add the runs of a JSON export first (all of them or none; runs already here stay as they are), "
                        "or a tool's result (a --json of sweep, max-batch, inspect, diagnose, export or deploy-bench)")
    h.add_argument("--delete", nargs="+", metavar="ID",
                   help="remove runs or tool results by id (the table shows run ids; a tool result's JSON its id)")
    h.add_argument("--json", metavar="FILE", default=None,
                   help="write the stored runs and their comparisons to FILE (the shape of `bench --json`)")
    h.add_argument("--recover", action="store_true",
                   help="copy every readable run of a damaged history to a fresh one (the damaged file is kept)")
    h.add_argument("--steps", nargs=2, metavar=("ID", "FILE"), default=None,
                   help="write run ID's loss curve (step, phase, loss, training time, its window's samples/s and "
                        "memory) to the CSV FILE")
    h.add_argument("--compare", nargs="*", metavar="ID", default=None,
                   help="compare runs by what differs between them: with run ids, those runs; without, every group "
                        "of runs that differ in one setting (batch, precision, ...) or in their environment (torch, "
                        "macOS, machine, ...); each against --baseline or the oldest, with a 95 %% interval")
    h.add_argument("--baseline", metavar="ID", default=None,
                   help="the run the others are compared against (default: the oldest of each group)")
    h.add_argument("--note", nargs=2, metavar=("ID", "TEXT"), default=None,
                   help="keep a note on run ID (\"\" removes it); the table and the JSON export show it")
    h.add_argument("--tools", action="store_true",
                   help="list the kept tool results (sweeps, tunes, checks, ...) with their ids")
    h.add_argument("--push", nargs="+", metavar=("URL", "ID"), default=None,
                   help="send runs and tool results (by id; none: all of them) to the team's MLflow tracking server "
                        "at URL, each once; what it does not take waits in the history and goes with the next --push "
                        "(credentials: MLflow's MLFLOW_TRACKING_TOKEN, or MLFLOW_TRACKING_USERNAME and _PASSWORD, "
                        "else the keychain's: --login)")
    h.add_argument("--pull", metavar="URL", default=None,
                   help="bring the runs and tool results MPS Studio pushed to --experiment on the server at URL "
                        "into this history (checked as an import: all or none); without --experiment, list the "
                        "server's MPS Studio experiments")
    h.add_argument("--login", metavar="URL", default=None,
                   help="keep the token for the tracking server at URL in the system keychain (asked for, or read "
                        "from standard input; with --user, that user's password for MLflow's basic auth)")
    h.add_argument("--user", metavar="NAME", default=None, help="the user of --login (MLflow's basic auth)")
    h.add_argument("--logout", metavar="URL", default=None,
                   help="remove what the keychain keeps for the tracking server at URL")
    h.add_argument("--drop-queue", metavar="URL", default=None,
                   help="stop waiting for the tracking server at URL: what waits for it is no longer pushed (it "
                        "stays in the history); `mpsstudio history` says what waits")
    h.add_argument("--experiment", metavar="NAME", default=None,
                   help="the MLflow experiment to --push to (default: one per model, dataset, precision and batch) "
                        "or to --pull from")
    h.add_argument("--export-bmf", metavar="FILE", default=None,
                   help="write the runs' throughput (with its interval), step time and peak memory in Bencher's "
                        "metric format (BMF JSON), for thresholds in CI")


def _report_parser(sub) -> None:
    """report: Markdown or one HTML file of runs and tool results."""
    rp = sub.add_parser("report", help="a report to paste (Markdown: tables with units and intervals, the verdict, "
                                       "the environment folded) or to send (one HTML file with its charts)",
                        usage="mpsstudio report RUN_OR_RESULT... [--format md|html] [--out FILE]")
    rp.add_argument("sources", nargs="+", metavar="RUN_OR_RESULT",
                    help="a run id (its comparisons of devices and of what differs), a tool result's id, a JSON "
                         "file MPS Studio wrote (runs or a tool result), or latest")
    rp.add_argument("--format", choices=("md", "html"), default=None,
                    help="md (GitHub-flavoured Markdown) or html (default: html for an --out ending in .html, "
                         "else md)")
    rp.add_argument("--out", metavar="FILE", default=None, help="write the report to FILE (default: print it)")


def _tool_parsers(sub) -> None:
    """Each measuring tool with a subcommand: its row's help, the run's setup where it takes one, then its options
    (engine/tools/registry.TABLE: the window's sheet reads the same declarations)."""
    from ..engine.tools.registry import TABLE

    for tool in TABLE:
        if not tool.help:
            continue
        p = sub.add_parser(tool.name, help=tool.help)
        if tool.setup:
            config_args(p, precision=not tool.own_precision)
        add_options(p, tool.options)
