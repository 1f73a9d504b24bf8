"""`mpsstudio export` and `mpsstudio deploy-bench` (tools/deploy/export.py, tools/deploy/deploybench.py, each in a run's process).

export: 0 written and it agrees with PyTorch (or cannot be run here, which it says); 1 it could not be exported or
does not agree (one sentence; nothing written, an earlier file at --out unchanged); 2 bad input; 130/143/129
stopped (nothing written). deploy-bench: 0 something was measured, 1 nothing, 2 bad input."""

from __future__ import annotations

import sys
from pathlib import Path

from ..engine.basics.errors import UserError
from ..engine.basics.formatting import printable
from ..engine.tools.records.deploy import DeployResult
from ..engine.tools.records.export import ExportResult
from .common import EXIT_OK, EXIT_RUN_FAILED, check_json_path, check_timeout, config_from_args


def cmd_export(args) -> int:
    from ..engine import process
    from ..engine.history.runfiles import export_tool_json
    from ..engine.models import registry as models
    from ..engine.tools.deploy.export import FORMATS, check_not_weights, check_request, check_target

    from pathlib import Path

    from ..engine.basics.files import clear_partials
    from ..engine.models.saved import meta_path

    check_json_path(args.json)
    check_timeout(args.timeout)
    if args.run is not None:
        args.weights = _weights_of_run(args.run, args.weights)
    cfg = config_from_args(args)
    if args.weights is None:
        models.get_model_info(cfg.model)
    elif not Path(args.weights).is_file():
        raise UserError(f"{printable(args.weights)} is not a file; pass the .pt file of a saved model (bench "
                        "--save-model or Save Trained Model…), with its .json beside it.")
    batch_sizes = _sizes(args.batch_sizes, 4096) if args.batch_sizes is not None else None
    check_request(args.format, args.precision, args.batch_size, args.compress, batch_sizes)
    target = check_target(args.out, args.format)  # before any work: a bad --out is one sentence at once
    from .common import not_the_history

    not_the_history(Path(target).resolve(), args.out, "--out")  # never the history's own files
    check_not_weights(target, args.weights)
    if args.json:
        written = Path(args.json).expanduser().resolve()
        touched = [target.resolve(), *([Path(args.weights).resolve(), meta_path(args.weights).resolve()]
                                       if args.weights else [])]
        if written in touched or target.resolve() in written.parents:
            raise UserError(f"--json {printable(args.json)} would overwrite the export or the weights it is made "
                            "from; choose another file for --json.")
    if cfg.model.endswith(".py"):
        print(f"mpsstudio: {models.user_model_warning(cfg.model)}", file=sys.stderr)
    print(f"exporting {cfg.model if args.model or not args.weights else 'the saved model'} to {args.format} "
          f"({FORMATS[args.format]})...", file=sys.stderr)
    try:
        result = process.run_tool("export", {"config": cfg.to_dict(), "format": args.format, "out": str(target),
                                             "weights": args.weights, "precision": args.precision,
                                             "batch_size": args.batch_size, "model_given": args.model is not None,
                                             "compress": args.compress, "batch_sizes": batch_sizes,
                                             "staged": True},
                                  timeout_s=args.timeout, mps_fallback=cfg.mps_fallback, stop_grace_s=0)
        late = land_export(result, target)  # only now, with the answer in hand: a stopped export never lands
    except UserError as exc:
        print(f"mpsstudio: {printable(exc)}", file=sys.stderr)
        return EXIT_RUN_FAILED
    finally:  # a process ended mid-write (a time limit, Ctrl-C, SIGTERM) leaves its part beside --out
        clear_partials(target)
    if late:
        print(f"mpsstudio: the export was written before the {late} arrived; it stays at {printable(target)}.",
              file=sys.stderr)
    if args.json:
        export_tool_json({"kind": "export", **result}, args.json)
    exported = ExportResult.of(result)
    print(printable(exported.sentence))
    return EXIT_RUN_FAILED if exported.check.ok is False else EXIT_OK


def land_export(result: dict, target) -> str:
    """Put the staged export in place (signals held meanwhile); "" or the interrupt that came while it landed (the
    export is then whole: said, not called interrupted)."""
    from ..engine.basics.files import land
    from ..engine.process.ending import holding_signals

    result_staged = result.pop("staged", None)
    if not result_staged:
        return ""
    try:
        with holding_signals():
            land(result_staged, target)
    except KeyboardInterrupt as exc:
        from ..engine.basics.errors import Terminated

        return exc.name if isinstance(exc, Terminated) else "Ctrl-C"
    return ""


def _weights_of_run(run_id: str, weights: str | None) -> str:
    """The weights file a stored run saved (models/saved.kept_weights), for --run."""
    from ..engine.history.store import RunStore
    from ..engine.models.saved import kept_weights

    if weights is not None:
        raise UserError("Pass --run (a run's saved weights) or --weights (a file), not both.")
    run = RunStore().get(run_id)
    if run is None:
        raise UserError(f"No run with id {printable(run_id)[:64]} in the history; `mpsstudio history` lists them.")
    path = str(kept_weights(run))
    print(f"the trained weights of run {printable(run_id)[:64]}: {printable(path)}", file=sys.stderr)
    return path


def cmd_deploy_bench(args) -> int:
    from ..engine import process
    from ..engine.tools import toolview
    from ..engine.tools.deploy.coreml import COMPRESSIONS
    from ..engine.tools.deploy.deploybench import DEFAULT_BATCHES
    from .tools import show_progress, report

    check_json_path(args.json)
    check_timeout(args.timeout)
    from ..engine.models import registry as models
    from .common import available_devices

    if args.models is not None and args.model is not None:
        raise UserError("Pass --models (several) or --model (one), not both.")
    given = args.models if args.models is not None else (args.model if args.model is not None else "mlp")
    names = list(dict.fromkeys(n.strip() for n in given.split(",") if n.strip()))  # '' names none: refused
    if not names:
        raise UserError("--models names no model; list them separated by commas, e.g. resnet18,mobilenet_v3_small.")
    if args.weights and len(names) > 1:
        raise UserError("--weights are for one model; pass a single --model with them.")
    if args.weights and not Path(args.weights).is_file():
        raise UserError(f"{printable(args.weights)} is not a file; pass the .pt file of a saved model.")
    for name in names:
        models.get_model_info(name)  # an unknown name is one sentence before any work
        if name.endswith(".py"):
            print(f"mpsstudio: {models.user_model_warning(name)}", file=sys.stderr)
    sizes = _sizes(args.batch_sizes) if args.batch_sizes is not None else list(DEFAULT_BATCHES)
    compress = list(dict.fromkeys(c.strip() for c in (args.compress or "").split(",") if c.strip()))
    if any(c not in COMPRESSIONS for c in compress) or (args.compress is not None and not compress):
        raise UserError(f"--compress takes {' or '.join(COMPRESSIONS)} (or both, comma-separated), not "
                        f"{printable(args.compress)!r}.")
    devices = (list(dict.fromkeys(d.strip() for d in args.devices.split(",") if d.strip()))
               if args.devices is not None else None)
    if devices is not None:
        here = available_devices()
        missing = [d for d in devices if d not in here and not (d == "cuda" and any(h.startswith("cuda") for h in here))]
        if missing or not devices:
            raise UserError(f"{', '.join(missing) or 'no device'} cannot run here; the devices here are "
                            f"{', '.join(here)} (`mpsstudio devices` says why others are not).")
    print(f"measuring inference of {', '.join(names)} at batch {', '.join(map(str, sizes))}...", file=sys.stderr)
    stopped = None
    try:
        result = process.run_tool("deploy-bench", {"models": names, "batch_sizes": sizes, "devices": devices,
                                                   "weights": args.weights, "compress": compress},
                                  progress=show_progress,
                                  timeout_s=args.timeout)
    except UserError as exc:
        print(f"mpsstudio: {printable(exc)}", file=sys.stderr)
        return EXIT_RUN_FAILED
    except KeyboardInterrupt as exc:  # Ctrl-C, SIGTERM, SIGHUP: the rows measured so far are kept
        partial = getattr(exc, "partial", None)  # what the tool found before it stopped (process/asks.py)
        if partial is None:
            raise
        result, stopped = partial, exc
    deployed = DeployResult.of(result)
    code = report("deploy-bench", result, toolview.deploy_table(deployed), args, stopped, "what was measured so far",
                  notes=deployed.notes)
    return code if code is not None else (EXIT_OK if any(r.latency_ms for r in deployed.rows) else EXIT_RUN_FAILED)


def _sizes(text: str, most: int = 1024) -> list[int]:
    try:
        sizes = sorted(set(int(s) for s in text.split(",") if s.strip()))
    except ValueError:
        sizes = []
    if not sizes or not all(1 <= b <= most for b in sizes):
        raise UserError(f"--batch-sizes must be whole numbers from 1 to {most:,} separated by commas, not "
                        f"{printable(text)!r}.")
    return sizes
