"""`mpsstudio export`: the model as a file another program loads (tools/export.py, in a run's process), checked
against PyTorch. Exit codes: 0 written and it agrees (or cannot be run here, said so), 1 written but it does not
agree, or it could not be exported (one sentence), 2 bad input."""

from __future__ import annotations

import sys

from ..engine.basics.errors import UserError
from ..engine.basics.formatting import printable
from .common import EXIT_OK, EXIT_RUN_FAILED, check_json_path, check_timeout, config_from_args


def cmd_export(args) -> int:
    from ..engine import process
    from ..engine.history.runfiles import export_tool_json
    from ..engine.models import registry as models
    from ..engine.tools.export import FORMATS, check_target

    check_json_path(args.json)
    check_timeout(args.timeout)
    cfg = config_from_args(args)
    if args.weights is None:
        models.get_model_info(cfg.model)
    check_target(args.out, args.format)  # before any work: a bad --out is one sentence at once
    if cfg.model.endswith(".py"):
        print(f"mpsstudio: {models.user_model_warning(cfg.model)}", file=sys.stderr)
    print(f"exporting {cfg.model if args.model or not args.weights else 'the saved model'} to {args.format} "
          f"({FORMATS[args.format]})...", file=sys.stderr)
    try:
        result = process.run_tool("export", {"config": cfg.to_dict(), "format": args.format, "out": args.out,
                                             "weights": args.weights, "precision": args.precision,
                                             "batch_size": args.batch_size, "model_given": args.model is not None},
                                  timeout_s=args.timeout, mps_fallback=cfg.mps_fallback)
    except UserError as exc:
        print(f"mpsstudio: {printable(exc)}", file=sys.stderr)
        return EXIT_RUN_FAILED
    if args.json:
        export_tool_json(result, args.json)
    print(printable(result["sentence"]))
    return EXIT_RUN_FAILED if result["check"]["ok"] is False else EXIT_OK


def cmd_deploy_bench(args) -> int:
    from ..engine import process
    from ..engine.tools import toolview
    from ..engine.tools.deploybench import DEFAULT_BATCHES
    from .tools import _finish, _print_table, _progress

    check_json_path(args.json)
    check_timeout(args.timeout)
    names = [n.strip() for n in (args.models or args.model or "mlp").split(",") if n.strip()]
    from ..engine.models import registry as models

    for name in names:
        models.get_model_info(name)  # an unknown name is one sentence before any work
        if name.endswith(".py"):
            print(f"mpsstudio: {models.user_model_warning(name)}", file=sys.stderr)
    sizes = _sizes(args.batch_sizes) if args.batch_sizes else list(DEFAULT_BATCHES)
    devices = [d.strip() for d in args.devices.split(",") if d.strip()] if args.devices else None
    print(f"measuring inference of {', '.join(names)} at batch {', '.join(map(str, sizes))}...", file=sys.stderr)
    try:
        result = process.run_tool("deploy-bench", {"models": names, "batch_sizes": sizes, "devices": devices,
                                                   "weights": args.weights}, progress=_progress,
                                  timeout_s=args.timeout)
    except UserError as exc:
        print(f"mpsstudio: {printable(exc)}", file=sys.stderr)
        return EXIT_RUN_FAILED
    _print_table(toolview.deploy_table(result))
    for note in result.get("notes", []):
        print(f"note: {printable(note)}")
    _finish("deploy-bench", result, args)
    print(f"\n{printable(result['sentence'])}")
    return EXIT_OK if any(r["latency_ms"] for r in result["rows"]) else EXIT_RUN_FAILED


def _sizes(text: str) -> list[int]:
    try:
        sizes = [int(s) for s in text.split(",") if s.strip()]
    except ValueError:
        sizes = []
    if not sizes or not all(1 <= b <= 1024 for b in sizes):
        raise UserError(f"--batch-sizes must be whole numbers from 1 to 1,024 separated by commas, not "
                        f"{printable(text)!r}.")
    return sizes
