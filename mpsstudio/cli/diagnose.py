"""`mpsstudio diagnose` (tools/diagnose/, in a run's process): per device, what bounds the training step, the
memory after it, the parity with the float64 CPU reference and, when it fails or `--layers`, the first layer
beyond tolerance. Exit: 0 diagnosed, 1 a device computes wrong or nothing could be diagnosed, 2 bad input, 130/143/129
stopped (what was diagnosed is kept)."""

from __future__ import annotations

import sys

from ..engine.basics.errors import UserError
from ..engine.basics.formatting import printable
from .common import EXIT_OK, EXIT_RUN_FAILED, available_devices


def cmd_diagnose(args) -> int:
    from ..engine.basics.config import DEVICE_PATTERN
    from ..engine.tools.diagnose import MAX_AFTER_STEPS
    from ..engine.tools.diagnose.view import anatomy_table, layers_table, memory_cells, read
    from ..engine.tools.records.diagnose import Diagnosed
    from .tools import tool_prelude, print_table, run_one_tool, report

    cfg = tool_prelude(args)
    changes = {name: getattr(args, name) for name in ("batch_size", "workers", "mode")
               if getattr(args, name, None) is not None}
    if args.channels_last:
        changes["channels_last"] = True
    cfg = cfg.changed(**changes).validate()
    if not 0 <= args.after_steps <= MAX_AFTER_STEPS:
        raise UserError(f"--after-steps must be a whole number from 0 to {MAX_AFTER_STEPS:,}, not {args.after_steps}.")
    here = available_devices()
    names = [d.strip().lower() for d in args.devices.split(",") if d.strip()] if args.devices is not None else here
    names = list(dict.fromkeys(names))
    bad = [d for d in names if not DEVICE_PATTERN.fullmatch(d)]
    if bad or not names:
        raise UserError(f"--devices takes cpu, mps, cuda or cuda:N separated by commas, not "
                        f"{printable(args.devices)!r}.")
    missing = [d for d in names if d not in here and not (d.startswith("cuda") and any(h.startswith("cuda")
                                                                                       for h in here))]
    if missing:
        raise UserError(f"{', '.join(missing)} cannot run here; the devices here are {', '.join(here)} "
                        "(`mpsstudio devices` says why others are not).")
    cfg = cfg.with_device(names[0])
    stopped = None
    try:
        result = run_one_tool("diagnose", cfg, args, f"diagnosing {cfg.model} on {', '.join(names)}", devices=names,
                           layers=args.layers, after_steps=args.after_steps)
    except KeyboardInterrupt as exc:  # Ctrl-C, SIGTERM, SIGHUP: the devices diagnosed so far are kept
        partial = getattr(exc, "partial", None)  # what the tool found before it stopped (process/asks.py)
        if partial is None:
            raise
        result, stopped = partial, exc
    diagnosis = read(result)
    for d in diagnosis.devices:
        if not isinstance(d, Diagnosed):
            continue
        print(f"{d.device}: memory after the diagnostic steps: {memory_cells(d)}", file=sys.stderr)
        for found, when in ((d.layers, "layer by layer against the float64 CPU reference"),
                            (d.after_layers, "layer by layer after training on the device")):
            if found:
                print(f"\n{d.device}, {when} (precision {found.precision}, tolerance "
                      f"{found.tolerance:.0e}; relative error = max|device - reference| / max|reference|):")
                print_table(layers_table(found, limit=24))
        print()
    code = report("diagnose", result, anatomy_table(diagnosis), args, stopped, "what was diagnosed so far",
                  notes=result.get("notes", []))
    if code is not None:
        return code
    ran = [d for d in result["devices"] if "error" not in d]
    wrong = any((d.get("parity") or {}).get("ok") is False or (d.get("after") or {}).get("ok") is False
                or (d.get("layers") or {}).get("first_wrong") for d in ran)
    return EXIT_RUN_FAILED if wrong or not ran else EXIT_OK
