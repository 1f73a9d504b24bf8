"""`mpsstudio bench` and `mpsstudio demo`: one config on each device in turn, each run in its own process, the
comparison and its verdict printed, the runs kept and exported."""

from __future__ import annotations

import sys
from pathlib import Path

from ..engine.basics.errors import UserError
from ..engine.basics.request import RunRequest
from ..engine.basics.formatting import printable
from . import tools
from .common import (EXIT_CANNOT_TELL, EXIT_OK, EXIT_RUN_FAILED, available_devices, check_json_path, check_timeout,
                     fail_over,
                     find_run, format_table, gpu_counts, interrupted, request_from_args)
from .runs import Progress, download_progress, keep, print_verdicts



def cmd_bench(args) -> int:
    request = request_from_args(args)
    cfg = request.settings
    gpus = gpu_counts(args.gpus)
    if cfg.torchrun and not gpus:
        gpus = [1]
    check_json_path(args.json, [args.baseline] if args.baseline else [])  # never over the baseline it reads
    check_timeout(args.timeout)
    names = args.devices.split(",") if args.devices is not None else available_devices()
    save_model = None
    if args.save_model is not None:
        from ..engine.models.saved import check_target

        save_model = str(check_target(args.save_model))
        from .common import check_output

        check_output(save_model, "--save-model")
        if gpus and gpus != [1] or cfg.torchrun:
            raise UserError("--save-model saves one device's model; a run on several GPUs keeps none (drop one).")
        if cfg.mode != "train":
            raise UserError("--save-model saves what a run trained; an inference run trains nothing (use --mode train).")
    frameworks = args.framework.split(",") if args.framework is not None else []
    if save_model is not None and any(f.strip().lower() == "mlx" for f in frameworks):
        raise UserError("--save-model saves PyTorch's trained weights; an MLX run keeps none (drop mlx from "
                        "--framework, or --save-model).")
    cfg = use_python(cfg, args.python)
    check = regression_check(args)
    rounds = args.repeat
    if check is not None and rounds is None:  # a regression check measures in several processes by default
        from ..engine.analysis.regression import DEFAULT_PROCESSES

        rounds = DEFAULT_PROCESSES
    request = request.changed(settings=cfg, devices=tuple(names), gpus=tuple(gpus),
                              rounds=1 if rounds is None else rounds)
    return bench(request, json_path=args.json, save=not args.no_save, timeout_s=args.timeout,
                 keep_host=args.keep_host, inspect=not args.no_inspect, save_model=save_model, check=check)


def use_python(cfg, path: str | None):
    """--python PATH: checked (one sentence when it cannot run a run), then the runs' interpreter (a new config)."""
    if path is None:
        return cfg
    from ..engine.process.interpreter import check

    found = check(path)
    print(f"mpsstudio: running in another Python environment: {printable(found.label())}", file=sys.stderr)
    return cfg.changed(python=found.path)


def regression_check(args) -> tuple[list, float] | None:
    """(the baseline's runs, the threshold) of --baseline RUN|FILE, read before anything runs; None without it."""
    if args.baseline is not None and not args.baseline.strip():
        raise UserError("--baseline needs a run id or a JSON export of runs (bench --json).")
    if args.baseline is None:
        if args.fail_over is not None:
            raise UserError("--fail-over is the threshold of a regression check: give --baseline RUN|FILE too.")
        return None
    threshold = fail_over(args.fail_over)
    path = Path(args.baseline).expanduser()
    if path.exists() and not path.is_file():
        raise UserError(f"--baseline {printable(args.baseline)[:80]} is not a file (a folder or a device); give a run "
                        "id or a JSON export of runs (bench --json).")
    if path.suffix.lower() == ".json" or path.exists():
        from ..engine.history.runfiles import import_json

        if not path.is_file():
            raise UserError(f"--baseline {printable(args.baseline)[:80]}: no such file; give a run id or a JSON "
                            "export of runs (bench --json).")
        return import_json(path), threshold
    from ..engine.history import store as history

    return [find_run(history.RunStore().summaries(), args.baseline, "baseline")], threshold


def model_paths(path: str, configs) -> list[str]:
    """--save-model's file for each run: PATH itself for one run, PATH-<device>[-<round>].pt for several."""
    if len(configs) == 1:
        return [path]
    target = Path(path)
    suffix = target.suffix or ".pt"
    names: dict[str, int] = {}
    out = []
    for cfg in configs:
        tag = cfg.device.replace(":", "")
        names[tag] = names.get(tag, 0) + 1
        out.append(str(target.with_name(f"{target.stem}-{tag}{'' if names[tag] == 1 else f'-{names[tag]}'}{suffix}")))
    return out


def no_file_written_twice(json_path: str | None, model_files: list[str]) -> None:
    """--json and --save-model (each model's weights and its description) must name different files: the
    later write would replace the earlier one."""
    from ..engine.models.saved import meta_path

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


def bench(request: RunRequest, *, json_path: str | None = None, save: bool = True,
          timeout_s: float | None = None, inspect: bool = True, save_model: str | None = None,
          check: tuple[list, float] | None = None, show_output: bool = False, keep_host: bool = False) -> int:
    """Run the request's plan (its settings on each device in turn, `rounds` times, interleaved), each run in its own
    process (engine/process/), print the comparison and its verdict, keep and export the runs."""
    from ..engine import process
    from ..engine.models import registry as models, saved as savedmodel
    from ..engine.run import session
    from ..engine.analysis import repeat
    from ..engine.run.script.words import script_lines

    cfg = request.settings
    plan = session.plan_request(request)  # bad input: UserError before anything runs
    if check is not None:
        from ..engine.analysis.regression import mismatch

        why = mismatch(check[0], plan.configs)
        if why:
            raise UserError(why)
    order, tags = repeat.interleave(plan.configs, request.rounds)
    model_files = model_paths(save_model, order) if save_model else None
    no_file_written_twice(json_path, model_files or [])
    for line in plan.skipped:
        print(line, file=sys.stderr)
    for line in plan.notes:
        print(f"mpsstudio: {line}", file=sys.stderr)
    if cfg.model.endswith(".py"):
        print(f"mpsstudio: {models.user_model_warning(cfg.model)}", file=sys.stderr)
    progress = Progress(save, show_output=show_output)
    try:
        results = process.run_isolated(order, on_event=progress, progress=download_progress,
                                         timeout_s=timeout_s, repeat=tags,
                                         save_models=model_files, journal=save,
                                         on_output=progress.output if cfg.is_script else None)
    except KeyboardInterrupt as exc:  # Ctrl-C, SIGTERM, SIGHUP: keep what ran (the interrupted run as cancelled)
        code, words = interrupted(exc)
        print(format_table(progress.ended))
        in_history = keep(progress, progress.ended, json_path, keep_host=keep_host) and save  # (a save that failed has said why)
        kept_where = [w for w, on in (("in the history", in_history), (f"in {printable(json_path)}", json_path))
                      if on]
        cut = bool(progress.ended) and progress.ended[-1].status == "cancelled"  # or it came as a run was kept
        what = "the interrupted run is kept as cancelled" if cut else "the runs that ended are kept"
        if not progress.ended:
            what, kept_where = "no run had ended, so there was nothing to keep", []
            print(f"mpsstudio: {words}; {what}.", file=sys.stderr)
        else:
            print(f"mpsstudio: {words}; " + (f"{what} {' and '.join(kept_where)}." if kept_where else
                                             "nothing was kept" + (" (--no-save)." if not save else ".")),
                  file=sys.stderr)
        return code
    print(format_table(results))  # first: whatever happens to the files, the numbers are on screen
    inspections = tools.inspect_after(results, save=save, timeout_s=timeout_s) if inspect else []
    kept = keep(progress, results, json_path, inspections, keep_host=keep_host)
    failed = [r for r in results if r.status == "failed"]
    for r in failed:
        print(f"mpsstudio: the run on {r.config.where} failed: {printable(r.error)}", file=sys.stderr)
    for r in results:
        for line in script_lines(r):  # what the run found about the script: its batch, tokens, settings
            print(f"{r.config.where}: {printable(line)}")
        for note in (r.summary.leftover_processes, r.summary.output_note):
            if note:
                print(f"mpsstudio: {r.config.where}: {printable(note)}", file=sys.stderr)
        for line in model_lines(r):  # tokens/s and what trains (a model folder's fine-tuning)
            print(f"{r.config.where}: {printable(line)}")
        if r.summary.memory_flag:  # a finding, on stdout beside the verdicts
            print(f"{r.config.where}: memory: {printable(r.summary.memory_flag)}")
        if r.summary.stopped_early_reason:
            print(f"{r.config.where}: stopped early after epoch {r.summary.stopped_early_epoch}: "
                  f"{printable(r.summary.stopped_early_reason)}.", file=sys.stderr)
        if r.summary.saved_model:
            print(f"{r.config.where}: saved the trained model to {printable(r.summary.saved_model)} "
                  f"(and its description to {printable(savedmodel.meta_path(r.summary.saved_model).name)})",
                  file=sys.stderr)
        elif r.summary.saved_model_error:
            print(f"mpsstudio: {r.config.where}: {printable(r.summary.saved_model_error)}", file=sys.stderr)
    print_verdicts(results, inspections)  # last: the answer in words
    print_scaling(results)
    regressed = print_regressions(check, results) if check is not None else False
    if regressed is None and not (failed or not kept):
        return EXIT_CANNOT_TELL  # the check could not decide (said why, and what to run), never a silent pass
    return EXIT_RUN_FAILED if failed or not kept or regressed else EXIT_OK  # a run not kept is never exit 0


def model_lines(r) -> list[str]:
    """"27,120 tokens/s (measured; counts every position ...)", a language model's validation perplexity, "trains
    4,096 of 233,728 parameters (LoRA)"."""
    from ..engine.models.hf_folder import is_model_folder

    s, out = r.summary, []
    if s.tokens_per_s and s.seq_len:
        counts = s.tokens_measure or f"samples/s x {s.seq_len:,} tokens a sample"
        out.append(f"{s.tokens_per_s:,.0f} tokens/s (measured; counts {counts})")
    if s.val_loss is not None and s.accuracy_measure:
        ppl = f"perplexity {s.val_perplexity:,.2f}, " if s.val_perplexity is not None else ""
        acc = f", {s.val_accuracy:.1%} {s.accuracy_measure}" if s.val_accuracy is not None else ""
        out.append(f"validation: {ppl}loss {s.val_loss:.4f} nats a token (exp of it: the perplexity){acc}")
    trained, total = s.trainable_parameters, s.parameters
    if isinstance(trained, int) and isinstance(total, int) and trained != total:
        how = {"lora": "LoRA", "head": "the head only"}.get(str(r.config.options.get("finetune")), "the rest frozen")
        out.append(f"trains {trained:,} of {total:,} parameters ({how})")
    elif isinstance(trained, int) and trained == total and is_model_folder(r.config.model):
        out.append(f"trains all {total:,} parameters (full fine-tuning)")  # said as LoRA's and the head's are
    return out


def print_scaling(results) -> None:
    """The scaling of runs on several GPU counts (--gpus 1,2,4): its table and its verdict (analysis/scaling.py)."""
    from ..engine.analysis.scaling import scalings
    from ..engine.basics.formatting import Table
    from .common import grid

    for found in scalings(results):
        headers, rows = found.table()
        print(f"\nScaling: {printable(found.title())}")
        print(grid(Table(headers, [[printable(c) for c in row] for row in rows], [True] * 3 + [False] * 4)))
        for point in found.points:
            comm = point.communication
            if comm:
                print(f"  {point.gpus} GPUs: all-reduce share: {printable(comm['method'])}.")
        print(printable(found.verdict()))
        for line in found.beside_sentences():
            print(printable(line))


def print_regressions(check: tuple[list, float], results) -> bool | None:
    """The regression check's sentences; True when a device regressed (exit 1), None when the check could not tell
    for a device and none regressed (exit 2)."""
    from ..engine.analysis.regression import regressions

    found = regressions(check[0], results, check[1])
    for r in found:
        print(f"Regression check: {printable(r.sentence())}")
    if not found:
        print("Regression check: no new run finished with a throughput, so nothing was compared.")
        return True
    if any(r.regressed for r in found):
        return True
    return None if any(r.undecided for r in found) else False



def cmd_run(args) -> int:
    """Your own training script on each device in turn, its steps measured (engine/run/script.py)."""
    from ..engine.basics.config import MAX_BATCH
    from ..engine.run.script.runner import parse_device_args, script_config

    check_json_path(args.json)
    check_timeout(args.timeout)
    if args.batch_size is not None and not 1 <= args.batch_size <= MAX_BATCH:
        raise UserError(f"--batch-size must be a whole number from 1 to {MAX_BATCH:,}, not {args.batch_size}.")
    cfg = script_config(args.script, list(args.script_args), args.steps, args.warmup, batch_size=args.batch_size,
                        device_args=parse_device_args(args.args_for), keep_args=args.keep_args)
    cfg = use_python(cfg, args.python)
    names = args.devices.split(",") if args.devices is not None else available_devices()
    return bench(RunRequest.of(cfg, devices=tuple(names), rounds=args.repeat), json_path=args.json,
                 save=not args.no_save, timeout_s=args.timeout, keep_host=args.keep_host, inspect=False,
                 show_output=args.show_output)


def cmd_demo(args) -> int:
    """The default comparison: the built-in dataset and default model on every available device."""
    return bench(RunRequest(devices=tuple(available_devices())))
