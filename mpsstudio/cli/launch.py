"""`mpsstudio launch-benchmark`: PyTorch's MPS launch benchmark (ResNet50, BERT-base, VGG16; training and inference)
on every available device, beside the published claim."""

from __future__ import annotations

import sys

from ..engine.basics.formatting import plural, printable
from ..engine.basics.formatting import Table
from .common import (EXIT_OK, EXIT_RUN_FAILED, available_devices, check_json_path, check_timeout,
                     grid, interrupted)
from .runs import Progress, download_progress, keep, print_verdicts


def cmd_launch_benchmark(args) -> int:
    from ..engine import process
    from ..engine.tools import launch
    from ..engine.run import session

    check_json_path(args.json)
    check_timeout(args.timeout)
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
    for line in launch.notes(jobs):
        print(line, file=sys.stderr)
    progress = Progress(not args.no_save)
    try:
        if not args.no_estimate:
            print("Estimating the time with a short probe on each device...", file=sys.stderr)
            sps = launch.probe(devices, lambda configs: process.run_isolated(configs, timeout_s=300))
            estimate = launch.estimate_s(jobs, {d: sps.get(d) for d in devices})
            parts = [f"{d}: {launch.fmt_estimate(estimate[d])}" for d in devices]
            print(f"Estimated time (from the probe; could be off by 2-3x): {'; '.join(parts)}. "
                  "Ctrl-C stops it; the runs done so far are kept.", file=sys.stderr)
        configs = [c for job in jobs for c in job.configs]
        results = process.run_isolated(configs, on_event=progress, progress=download_progress,
                                         timeout_s=args.timeout, journal=progress.save)
    except KeyboardInterrupt as exc:  # Ctrl-C, SIGTERM, SIGHUP
        code, words = interrupted(exc)
        results = progress.ended
        keep(progress, results, args.json)
        print(launch_table(launch.report(jobs, results)))
        print(f"mpsstudio: {words}; the runs done so far are kept (the interrupted one as cancelled).",
              file=sys.stderr)
        return code
    kept = keep(progress, results, args.json)
    print(launch_table(launch.report(jobs, results)))
    print(f"\nPublished: training {launch.CLAIMS['train'][1]}, evaluation {launch.CLAIMS['inference'][1]} faster "
          f"than the CPU ({launch.CLAIM_SOURCE}).")
    failed = [r for r in results if r.status == "failed"]
    for r in failed:
        print(f"mpsstudio: {r.config.model} ({r.config.mode}) on {r.config.device} failed: {printable(r.error)}",
              file=sys.stderr)
    print_verdicts(results)
    return EXIT_RUN_FAILED if failed or not kept else EXIT_OK


def launch_table(rows) -> str:
    from ..engine.basics.formatting import fmt_rate

    lines = []
    for row in rows:
        speed = "-" if row.speedup is None else f"{row.speedup:.2f}x"
        if row.low is not None and row.high is not None:
            speed += f" ({row.low:.2f}-{row.high:.2f}x)"
        lines.append([row.workload, row.mode, row.device, fmt_rate(row.samples_per_s, "-"), row.stability or "-",
                      speed, row.claim or "-"])
    return grid(Table(["workload", "mode", "device", "samples/s", "stability", "speedup vs CPU (95 % interval)",
                       "published (M1 Ultra)"], lines, [False, False, False, True, False, True, False]))
