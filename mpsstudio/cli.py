"""`mpsstudio <subcommand>`: the headless front end over the same engine the window uses.

Exit codes: 0 success, 1 a run failed, 2 bad input (one line on stderr, never a traceback).
(`mpsstudio` with no subcommand opens the window: see launcher.py.)
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Sequence

from . import cli_tools
from .engine.basics.config import MODES, MONITORS, OPTIMIZERS, PRECISIONS, RunConfig
from .engine.basics.errors import UserError
from .engine.basics.files import check_writable_file
from .engine.basics.formatting import fmt_bytes, fmt_count, fmt_duration, is_finite, plural, printable

EXIT_OK, EXIT_RUN_FAILED, EXIT_BAD_INPUT, EXIT_INTERRUPTED = 0, 1, 2, 130
MIN_TIMEOUT_S, MAX_TIMEOUT_S = 1, 7 * 24 * 3600
DEFAULTS = RunConfig()


class _Parser(argparse.ArgumentParser):
    """argparse that reports bad arguments in one line (exit 2) instead of usage plus error."""

    def error(self, message: str):
        self.exit(EXIT_BAD_INPUT, f"mpsstudio: {message} (see '{self.prog} --help').\n")


def build_parser() -> argparse.ArgumentParser:
    p = _Parser(prog="mpsstudio", description="Measure PyTorch training speed on CPU, Apple GPU (MPS) and CUDA. "
                "Without a subcommand, `mpsstudio` opens the window (`mpsstudio --demo --screenshot PATH`: "
                "run the default comparison there, save a screenshot, exit).")
    sub = p.add_subparsers(dest="command", parser_class=_Parser)

    b = sub.add_parser("bench", help="run one config on each device in turn and print a comparison")
    b.add_argument("--model", default=None,
                   help=f"model name (see `mpsstudio models`) or a .py file (default: {DEFAULTS.model})")
    b.add_argument("--dataset", default=None,
                   help=f"dataset name (see `mpsstudio datasets`) or an image folder (default: {DEFAULTS.dataset})")
    b.add_argument("--devices", default=None,
                   help="comma-separated devices, e.g. cpu,mps,cuda (default: every available device, cpu first)")
    b.add_argument("--repeat", type=int, default=1, metavar="N",
                   help="run the devices N times, interleaved (A B B A ...), and report the median of the paired "
                        "speedups with their range (default: 1)")
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
    b.add_argument("--tf32", action="store_true", help="allow TF32 matmuls on CUDA")
    b.add_argument("--threads", type=int, default=None, help="CPU threads for torch")
    b.add_argument("--image-size", type=int, default=None, help="decode image folders at this size")
    b.add_argument("--seed", type=int, default=None, help=f"random seed (default: {DEFAULTS.seed})")
    fallback = b.add_mutually_exclusive_group()
    fallback.add_argument("--mps-fallback", dest="mps_fallback", action="store_true", default=None,
                          help="run operations MPS lacks on the CPU, slowly (the default)")
    fallback.add_argument("--no-mps-fallback", dest="mps_fallback", action="store_false",
                          help="stop a run that uses an operation MPS lacks instead")
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
    b.add_argument("--timeout", type=float, default=None, metavar="SECONDS",
                   help="end a run that takes longer (setup included) and record it as failed")
    b.add_argument("--json", metavar="FILE", default=None, help="write runs and comparisons to FILE")
    b.add_argument("--no-save", action="store_true", help="do not keep the runs in the history")
    b.add_argument("--no-inspect", action="store_true",
                   help="after an MPS run, skip the inspection (operations that fell back to the CPU, parity with "
                        "the CPU) whose findings the verdict names")

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

    cli_tools.add_parsers(sub)
    sub.add_parser("devices", help="list devices, why any is unavailable, and check that each accelerator works")
    sub.add_parser("models", help="list models")
    sub.add_parser("datasets", help="list datasets")
    sub.add_parser("doctor", help="check the PyTorch / MPS / CUDA setup in plain words")
    sub.add_parser("demo", help="the default comparison (built-in dataset, every available device)")
    h = sub.add_parser("history", help="list stored runs and comparisons")
    h.add_argument("--import", dest="import_file", metavar="FILE",
                   help="add the runs of a JSON export first (all of them or none; runs already here stay as they are)")
    h.add_argument("--delete", nargs="+", metavar="ID", help="remove runs by id (the table shows ids)")
    h.add_argument("--json", metavar="FILE", default=None,
                   help="write the stored runs and their comparisons to FILE (the shape of `bench --json`)")
    h.add_argument("--recover", action="store_true",
                   help="copy every readable run of a damaged history to a fresh one (the damaged file is kept)")
    h.add_argument("--steps", nargs=2, metavar=("ID", "FILE"), default=None,
                   help="write run ID's loss curve (step, phase, loss, training time, its window's samples/s and "
                        "memory) to the CSV FILE")
    h.add_argument("--note", nargs=2, metavar=("ID", "TEXT"), default=None,
                   help="keep a note on run ID (\"\" removes it); the table and the JSON export show it")
    return p


def main(argv: Sequence[str] | None = None) -> int:
    """Run one subcommand; bad input is one line on stderr and exit 2."""
    argv = list(sys.argv[1:] if argv is None else argv)
    try:
        args = build_parser().parse_args(argv)
    except SystemExit as exc:  # --help, or a bad argument already reported in one line
        return int(exc.code or 0)
    if args.command is None:
        print("mpsstudio: name a subcommand (see 'mpsstudio --help'), or run `mpsstudio` alone to open the window.",
              file=sys.stderr)
        return EXIT_BAD_INPUT
    try:
        return _COMMANDS[args.command](args)
    except UserError as exc:
        print(f"mpsstudio: {printable(exc)}", file=sys.stderr)  # a name from a folder may hold escape codes
        return EXIT_BAD_INPUT
    except KeyboardInterrupt:
        print("mpsstudio: interrupted.", file=sys.stderr)
        return EXIT_INTERRUPTED


# -- bench ------------------------------------------------------------------------------------------------

def _config_from_args(args):
    from .engine.basics.config import RunConfig

    cfg = RunConfig()
    mapping = {"model": "model", "dataset": "dataset", "batch_size": "batch_size", "warmup": "warmup_steps",
               "precision": "precision", "optimizer": "optimizer", "lr": "lr", "mode": "mode",
               "workers": "workers", "threads": "threads", "image_size": "image_size", "seed": "seed",
               "early_stop": "early_stop_patience", "early_stop_monitor": "early_stop_monitor",
               "early_stop_mode": "early_stop_mode", "accumulate": "accumulate"}
    for arg, field in mapping.items():
        value = getattr(args, arg, None)
        if value is not None:
            setattr(cfg, field, value)
    if getattr(args, "steps", None) is not None:
        cfg.steps, cfg.epochs = args.steps, None
    elif getattr(args, "epochs", None) is not None:
        cfg.epochs, cfg.steps = args.epochs, None
    for flag, field in (("resident", "resident"), ("channels_last", "channels_last"), ("compile", "compile"),
                        ("tf32", "tf32"), ("keep_best", "keep_best")):
        if getattr(args, flag, False):
            setattr(cfg, field, True)
    if getattr(args, "mps_fallback", None) is not None:
        cfg.mps_fallback = args.mps_fallback
    return cfg.validate()


def _cmd_bench(args) -> int:
    cfg = _config_from_args(args)
    _check_json_path(args.json)
    _check_timeout(args.timeout)
    names = args.devices.split(",") if args.devices is not None else available_devices()
    save_model = None
    if args.save_model is not None:
        from .engine.models.saved import check_target

        save_model = str(check_target(args.save_model))
        if cfg.mode != "train":
            raise UserError("--save-model saves what a run trained; an inference run trains nothing (use --mode train).")
    return bench(cfg, names, json_path=args.json, save=not args.no_save, timeout_s=args.timeout,
                 rounds=args.repeat, inspect=not args.no_inspect, save_model=save_model)


def model_paths(path: str, configs) -> list[str]:
    """--save-model's file for each run: PATH itself for one run, PATH-<device>[-<round>].pt for several."""
    if len(configs) == 1:
        return [path]
    target = Path(path)
    suffix = target.suffix or ".pt"
    names, out = {}, []
    for cfg in configs:
        tag = cfg.device.replace(":", "")
        names[tag] = names.get(tag, 0) + 1
        out.append(str(target.with_name(f"{target.stem}-{tag}{'' if names[tag] == 1 else f'-{names[tag]}'}{suffix}")))
    return out


def _check_timeout(timeout) -> None:
    if timeout is not None and not (is_finite(timeout) and MIN_TIMEOUT_S <= timeout <= MAX_TIMEOUT_S):
        raise UserError(f"--timeout must be a number of seconds from {MIN_TIMEOUT_S:g} to {MAX_TIMEOUT_S:,}, "
                        f"not {timeout:g}.")


def available_devices() -> list[str]:
    """Every device that can run here, cpu first (what the window checks by default)."""
    from .engine.machine import devices

    return [d.id for d in devices.discover_devices() if d.available]


def _check_json_path(path: str | None) -> None:
    """A --json that cannot be written is bad input: say so before the work, not after."""
    if path is not None:
        check_writable_file(path, "--json")


def _no_file_written_twice(json_path: str | None, model_files: list[str]) -> None:
    """--json and --save-model (each model's weights and its description) must name different files: the
    later write would replace the earlier one."""
    from .engine.models.saved import meta_path

    names = [(Path(json_path).expanduser().resolve(), "--json")] if json_path else []
    for weights in model_files:
        names += [(Path(weights).resolve(), "--save-model"), (meta_path(Path(weights).resolve()),
                                                              "--save-model's description")]
    seen: dict = {}
    for path, what in names:
        if path in seen:
            raise UserError(f"{seen[path]} and {what} would both write {printable(path)}; give them different "
                            "names (the model's description is its name with .json).")
        seen[path] = what


def bench(cfg, device_names: list[str], *, json_path: str | None = None, save: bool = True,
          timeout_s: float | None = None, rounds: int = 1, inspect: bool = True, save_model: str | None = None) -> int:
    """Run `cfg` on each available device in turn (`rounds` times, interleaved), each run in its own process
    (engine/isolation.py), print the comparison and its verdict, keep and export the runs."""
    from .engine import process
    from .engine.models import registry as models, saved as savedmodel
    from .engine.run import session
    from .engine.analysis import repeat

    plan = session.plan(cfg, device_names)  # bad input: UserError before anything runs
    order, tags = repeat.interleave(plan.configs, rounds)
    model_files = model_paths(save_model, order) if save_model else None
    _no_file_written_twice(json_path, model_files or [])
    for line in plan.skipped:
        print(line, file=sys.stderr)
    for line in plan.notes:
        print(f"mpsstudio: {line}", file=sys.stderr)
    if cfg.model.endswith(".py"):
        print(f"mpsstudio: {models.user_model_warning(cfg.model)}", file=sys.stderr)
    progress = _Progress(save)
    try:
        results = process.run_isolated(order, on_event=progress, progress=_download_progress,
                                         timeout_s=timeout_s, repeat=tags,
                                         save_models=model_files)
    except KeyboardInterrupt:  # Ctrl-C: keep what ran (the interrupted run as cancelled), as the window does
        print(format_table(progress.ended))
        _keep(progress, progress.ended, json_path)
        kept_where = [w for w, on in (("in the history", save), (f"in {printable(json_path)}", json_path)) if on]
        print("mpsstudio: interrupted; " + (f"the interrupted run is kept as cancelled {' and '.join(kept_where)}."
                                            if kept_where else "nothing was kept (--no-save)."), file=sys.stderr)
        return EXIT_INTERRUPTED
    print(format_table(results))  # first: whatever happens to the files, the numbers are on screen
    inspections = cli_tools.inspect_after(results, save=save, timeout_s=timeout_s) if inspect else []
    kept = _keep(progress, results, json_path, inspections)
    failed = [r for r in results if r.status == "failed"]
    for r in failed:
        print(f"mpsstudio: the run on {r.config.device} failed: {printable(r.error)}", file=sys.stderr)
    for r in results:
        if r.summary.get("stopped_early_reason"):
            print(f"{r.config.device}: stopped early after epoch {r.summary.get('stopped_early_epoch')}: "
                  f"{printable(r.summary['stopped_early_reason'])}.", file=sys.stderr)
        if r.summary.get("saved_model"):
            print(f"{r.config.device}: saved the trained model to {printable(r.summary['saved_model'])} "
                  f"(and its description to {printable(savedmodel.meta_path(r.summary['saved_model']).name)})",
                  file=sys.stderr)
        elif r.summary.get("saved_model_error"):
            print(f"mpsstudio: {r.config.device}: {printable(r.summary['saved_model_error'])}", file=sys.stderr)
    _print_verdicts(results, inspections)  # last: the answer in words
    return EXIT_RUN_FAILED if failed or not kept else EXIT_OK  # a run that was not kept is never exit 0


def _print_verdicts(results, inspections=None) -> None:
    from .engine.analysis.compare import compare
    from .engine.analysis.verdict import verdicts

    comparisons = compare(results)
    compared = {r.id for c in comparisons for r in c.all_runs}  # their verdicts name a noisy run themselves
    for r in results:
        if r.summary.get("stability") == "noisy" and r.id not in compared:
            print(f"\nnoisy: the {r.config.device} run's number is not to be trusted: "
                  f"{printable(r.summary.get('stability_reason') or '')}.")
    for c in comparisons:
        for sentence in verdicts(c, inspections):
            print(f"\n{printable(sentence)}")


def _keep(progress: "_Progress", results, json_path, inspections=None) -> bool:
    """Write the runs to --json (the history took each as it ended); False when the history did not keep them."""
    from .engine.history.runfiles import export_json

    if json_path:
        export_json(results, json_path, inspections)
    return progress.kept


def _save(result) -> bool:
    """Keep one run in the history the moment it ends (a CLI killed later loses nothing that ended)."""
    from .engine.history.store import RunStore

    try:
        store = RunStore()
        try:
            store.save(result)
        finally:
            store.close()
    except UserError as exc:
        print(f"mpsstudio: the run on {result.config.device} was not kept in the history: {printable(exc)}",
              file=sys.stderr)
        return False
    return True


def _download_progress(message: str, fraction: float) -> None:
    if sys.stderr.isatty():
        print(f"\r{message} {fraction:5.0%}", end="" if fraction < 1 else "\n", file=sys.stderr, flush=True)


class _Progress:
    """Prints one progress line per run: a live line on a terminal, a line every few seconds otherwise."""

    def __init__(self, save: bool = False):
        self.save, self.kept = save, True
        self.tty = sys.stderr.isatty()
        self.last = 0.0
        self.device = ""
        self.ended = []  # every run that ended, also one interrupted by Ctrl-C

    def __call__(self, event) -> None:
        from .engine.basics.events import Ended, Started, Warmup, Window

        if isinstance(event, Started):
            self.device = event.config["device"]
            if event.run_index == 1:
                print(printable(f"{event.config['model']} on {event.dataset}"), file=sys.stderr)
            where = f" (run {event.run_index} of {event.run_count})" if event.run_count > 1 else ""
            self._line(f"{self.device}{where}: warming up ({event.warmup_steps} steps)...", force=True)
        elif isinstance(event, Warmup):
            self._line(f"{self.device}: warm-up {fmt_duration(event.seconds)}", force=True)
        elif isinstance(event, Window):
            done = event.steps_done / event.total_steps
            left = f", about {fmt_duration(event.eta_s)} left" if event.eta_s is not None else ""
            bar = "#" * int(done * 20)
            self._line(f"{self.device}: [{bar:<20}] {done:4.0%} {event.samples_per_s:,.0f} samples/s, "
                       f"loss {event.losses[-1]:.4f}{left}")
        elif isinstance(event, Ended):
            r = event.result
            self.ended.append(r)
            if self.save:
                self.kept = _save(r) and self.kept
            if self.tty:
                print("\r\033[K", end="", file=sys.stderr)
            print(f"{r.config.device}: {r.status}", file=sys.stderr, flush=True)  # a failure's sentence comes last

    def _line(self, text: str, force: bool = False) -> None:
        now = time.perf_counter()
        if self.tty:
            print(f"\r\033[K{text}", end="", file=sys.stderr, flush=True)
        elif force or now - self.last >= 5:
            print(text, file=sys.stderr, flush=True)
        else:
            return
        self.last = now


# -- launch benchmark -------------------------------------------------------------------------------------

def _cmd_launch_benchmark(args) -> int:
    from .engine import process
    from .engine.tools import launch
    from .engine.run import session

    _check_json_path(args.json)
    _check_timeout(args.timeout)
    workloads = launch.pick(args.workloads, [w.key for w in launch.WORKLOADS], "workload")
    modes = launch.pick(args.modes, launch.MODES, "mode")
    steps = launch.DEFAULT_STEPS if args.steps is None else args.steps
    warmup = launch.DEFAULT_WARMUP if args.warmup is None else args.warmup
    names = args.devices.split(",") if args.devices is not None else available_devices()
    # bad steps or warm-up (plan validates the configs) and unavailable devices, before any run
    first = launch.plan(["cpu"], workloads[:1], modes[:1], steps=steps, warmup=warmup)[0].configs[0]
    device_plan = session.plan(first, names)
    for line in device_plan.skipped:
        print(line, file=sys.stderr)
    devices = [c.device for c in device_plan.configs]
    jobs = launch.plan(devices, workloads, modes, steps=steps, warmup=warmup)
    print(f"PyTorch launch benchmark: {', '.join(workloads)} "
          f"({' and '.join(modes)}) on {', '.join(devices)}: {plural(len(jobs) * len(devices), 'run')}.",
          file=sys.stderr)
    progress = _Progress(not args.no_save)
    try:
        if not args.no_estimate:
            print("Estimating the time with a short probe on each device...", file=sys.stderr)
            sps = launch.probe(devices, lambda configs: process.run_isolated(configs, timeout_s=300))
            estimate = launch.estimate_s(jobs, {d: sps.get(d) for d in devices})
            parts = [f"{d}: {launch.fmt_estimate(estimate[d])}" for d in devices]
            print(f"Estimated time (from the probe; could be off by 2-3x): {'; '.join(parts)}. "
                  "Ctrl-C stops it; the runs done so far are kept.", file=sys.stderr)
        configs = [c for job in jobs for c in job.configs]
        results = process.run_isolated(configs, on_event=progress, progress=_download_progress,
                                         timeout_s=args.timeout)
    except KeyboardInterrupt:
        results = progress.ended
        _keep(progress, results, args.json)
        print(_launch_table(launch.report(jobs, results)))
        print("mpsstudio: interrupted; the runs done so far are kept (the interrupted one as cancelled).",
              file=sys.stderr)
        return EXIT_INTERRUPTED
    kept = _keep(progress, results, args.json)
    print(_launch_table(launch.report(jobs, results)))
    print(f"\nPublished: training {launch.CLAIMS['train'][1]}, evaluation {launch.CLAIMS['inference'][1]} faster "
          f"than the CPU ({launch.CLAIM_SOURCE}).")
    failed = [r for r in results if r.status == "failed"]
    for r in failed:
        print(f"mpsstudio: {r.config.model} ({r.config.mode}) on {r.config.device} failed: {printable(r.error)}",
              file=sys.stderr)
    _print_verdicts(results)
    return EXIT_RUN_FAILED if failed or not kept else EXIT_OK


def _launch_table(rows) -> str:
    from .engine.basics.formatting import fmt_rate

    lines = []
    for row in rows:
        speed = "-" if row.speedup is None else f"{row.speedup:.2f}x"
        if row.low is not None and row.high is not None:
            speed += f" ({row.low:.2f}-{row.high:.2f}x)"
        lines.append([row.workload, row.mode, row.device, fmt_rate(row.samples_per_s, "-"), row.stability or "-",
                      speed, row.claim or "-"])
    return _grid(["workload", "mode", "device", "samples/s", "stability", "speedup vs CPU (95 % interval)",
                  "published (M1 Ultra)"], lines, [False, False, False, True, False, True, False])


# -- tables ---------------------------------------------------------------------------------------------

def format_table(results, keys: Sequence[str] | None = None) -> str:
    """Runs as a table (the CLI's bench columns by default), speedup against the CPU run of the same comparison."""
    from .engine.history.columns import BY_KEY, CLI_BENCH_COLUMNS, cell_text
    from .engine.analysis.compare import compare, speedup_map

    from .engine.analysis.energy import notes

    keys = keys or CLI_BENCH_COLUMNS
    speedups = speedup_map(compare(results))
    rows = [[cell_text(k, r, speedups, dash="-", times="x") for k in keys] for r in results]
    table = _grid([BY_KEY[k].title for k in keys], rows, [BY_KEY[k].numeric for k in keys])
    if "j_per_sample" in keys and results:  # what the energy figures are, or why they are empty
        table += "\n" + "\n".join(printable(line) for line in notes(results))
    return table


def _grid(headers: list[str], rows: list[list[str]], numeric: Sequence[bool] | None = None) -> str:
    """A plain-text table: numbers right-aligned, text left-aligned (`numeric` per column; default: none)."""
    right = list(numeric) if numeric is not None else [False] * len(headers)
    widths = [max(len(h), *(len(row[i]) for row in rows)) if rows else len(h) for i, h in enumerate(headers)]

    def line(cells):
        return "  ".join(c.rjust(w) if r else c.ljust(w) for c, w, r in zip(cells, widths, right)).rstrip()
    out = [line(headers), "-" * len(line(headers))]
    out += [line(row) for row in rows]
    return "\n".join(out)


# -- listings ---------------------------------------------------------------------------------------------

def _cmd_devices(args) -> int:
    from .engine.machine import devices

    from .engine.machine import probe

    found = devices.discover_devices()
    checks = probe.check_all(found)  # a short functional check of each accelerator that says it is available
    rows = []
    for d in probe.mark(found, checks):
        check = checks.get(d.id)
        works = "-" if check is None else ("yes" if check.ok else "NO")
        rows.append([d.id, "yes" if d.available else "no", works, d.name or "-", fmt_bytes(d.memory_total, dash="-"),
                     str(d.threads) if d.threads else "-", d.reason or ""])
    print(_grid(["device", "available", "works", "name", "memory", "threads", "why not"], rows,
                [False, False, False, False, True, True, False]))
    return EXIT_OK if all(c.ok for c in checks.values()) else EXIT_RUN_FAILED


def _cmd_models(args) -> int:
    from .engine.models import registry as models

    rows = []
    for m in models.list_models():
        params = models.parameter_count(m.name, m.default_spec)
        rows.append([m.name, m.input_kind, fmt_count(params), m.default_spec.describe(), m.description])
    print(_grid(["model", "input", "parameters (default input)", "default input", "description"], rows,
                [False, False, True, False, False]))
    print("\nYour own model: pass the path of a .py file defining build_model(num_classes, input_shape).")
    return EXIT_OK


def _cmd_datasets(args) -> int:
    from .engine.data import datasets

    rows = [[d.name, d.source, d.description] for d in datasets.list_datasets()]
    print(_grid(["dataset", "source", "description"], rows))
    print("\nA folder path works too: one subfolder of images per class.")
    return EXIT_OK


def _cmd_doctor(args) -> int:
    from .engine.machine import environment

    rows = environment.doctor()
    width = max(len(k) for k, _ in rows)
    for key, value in rows:
        print(f"{key.ljust(width)}  {value}")
    return EXIT_OK


def _cmd_demo(args) -> int:
    """The default comparison: the built-in dataset and default model on every available device."""
    from .engine.basics.config import RunConfig

    return bench(RunConfig(), available_devices())


def _cmd_history(args) -> int:
    from .engine.history import store as history
    from .engine.history.columns import CLI_BENCH_COLUMNS, CLI_HISTORY_COLUMNS
    from .engine.analysis.compare import compare
    from .engine.history.runfiles import import_json
    from .engine.analysis.verdict import verdicts

    _check_json_path(args.json)
    if args.recover:
        from .engine.history.recovery import recover

        kept, copied, lost = recover()
        print(f"recovered {plural(copied, 'run')}" + (f" ({lost} could not be read)" if lost else "")
              + f"; the damaged file is kept as {kept}", file=sys.stderr)
    if args.import_file:
        imported = import_json(args.import_file)  # checked whole before the history is opened for writing
    store = history.RunStore()
    if args.import_file:
        added, known = store.add_imported(imported)
        note = f" ({known} already in the history)" if known else ""
        print(f"imported {plural(added, 'run')} from {printable(args.import_file)}{note}", file=sys.stderr)
    if args.delete:
        gone = store.delete(args.delete)
        print(f"deleted {plural(gone, 'run')}" + (f" ({len(args.delete) - gone} not found)"
                                                  if gone < len(args.delete) else ""), file=sys.stderr)
    if args.note:
        run_id, text = args.note
        if store.get(run_id) is None:
            raise UserError(f"No run with id {printable(run_id)[:64]} in the history; `mpsstudio history` lists them.")
        store.set_note(run_id, text)
        print(f"kept the note on run {printable(run_id)[:64]}" if text else "removed the note", file=sys.stderr)
    if args.steps:
        from .engine.history.runfiles import export_steps_csv

        run_id, out = args.steps
        run = store.get(run_id)
        if run is None:
            raise UserError(f"No run with id {printable(run_id)[:64]} in the history; `mpsstudio history` lists them.")
        rows = export_steps_csv(run, out)
        print(f"wrote {plural(rows, 'step')} of run {printable(run_id)[:64]} to {printable(out)}", file=sys.stderr)
        return EXIT_OK
    if store.read_only:
        print(f"mpsstudio: the run history at {store.path} is read-only; new runs will not be kept.", file=sys.stderr)
    results = store.all() if args.json else store.summaries()  # the table needs no steps or windows
    inspections = [t.result for t in store.tools() if t.kind == "inspect"]
    for notice in [*store.notices, *store.tool_notices]:
        print(f"mpsstudio: {notice}", file=sys.stderr)
    if args.json:
        from .engine.history.runfiles import export_json

        export_json(results, args.json, inspections)
        print(f"wrote {plural(len(results), 'run')} to {printable(args.json)}", file=sys.stderr)
    if not results:
        print("No runs in the history yet; run `mpsstudio bench` or `mpsstudio demo` to make one.")
        return EXIT_OK
    print(format_table(results, CLI_HISTORY_COLUMNS))
    for c in compare(results):
        print(f"\n{printable(c.title())}")
        keys = ("machine", *CLI_BENCH_COLUMNS) if len(c.machines()) > 1 else None
        print(format_table(c.all_runs, keys))
        for sentence in verdicts(c, inspections):
            print(printable(sentence))
    return EXIT_OK


_COMMANDS = {
    "bench": _cmd_bench, "devices": _cmd_devices, "models": _cmd_models, "datasets": _cmd_datasets,
    "doctor": _cmd_doctor, "demo": _cmd_demo, "history": _cmd_history, "launch-benchmark": _cmd_launch_benchmark,
    **cli_tools.COMMANDS,
}


if __name__ == "__main__":
    sys.exit(main())
