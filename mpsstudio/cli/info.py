"""`mpsstudio devices`, `models`, `datasets` and `doctor`: what this machine and this install offer, in plain words."""

from __future__ import annotations

from ..engine.basics.formatting import Table, fmt_bytes, fmt_count, printable
from .common import EXIT_OK, EXIT_RUN_FAILED, grid


def cmd_devices(args) -> int:
    from ..engine.machine import devices

    from ..engine.machine import probe

    found = devices.discover_devices()
    checks = probe.check_all(found)  # a short functional check of each accelerator that says it is available
    rows = []
    for d in probe.mark(found, checks):
        check = checks.get(d.id)
        works = "-" if check is None else ("yes" if check.ok else "NO")
        rows.append([d.id, "yes" if d.available else "no", works, d.name or "-", fmt_bytes(d.memory_total, dash="-"),
                     str(d.threads) if d.threads else "-", d.reason or ""])
    print(grid(Table(["device", "available", "works", "name", "memory", "threads", "why not"], rows,
                     [False, False, False, False, True, True, False])))
    print(f"\n{mlx_line()}")
    return EXIT_OK if all(c.ok for c in checks.values()) else EXIT_RUN_FAILED


def mlx_line() -> str:
    """"MLX 0.32.4 (--framework mlx): its CPU; not its GPU: ..." or why MLX cannot run here, like a device."""
    from ..engine.machine import mlx

    version = mlx.mlx_version()
    if version is None:
        return f"MLX (--framework mlx): not available: {printable(mlx.mlx_reason())}."
    why = {kind: mlx.status(kind) for kind in ("mps", "cuda")}
    gpu = next((f"its GPU ({'Metal' if k == 'mps' else 'CUDA'})" for k, w in why.items() if not w), "")
    return (f"MLX {version} (--framework mlx): its CPU" + (f" and {gpu}." if gpu else
                                                            f"; not its GPU: {printable(why['mps'])}."))


def cmd_models(args) -> int:
    from ..engine.models.catalog import BUILT_IN, MLX_TWINS
    from ..engine.models.counts import parameter_counts

    counts = parameter_counts()  # counted once per install, then cached: no torch import here after the first
    rows = [[m.name, m.input_kind, fmt_count(counts[m.name]), m.default_spec.describe(), m.description]
            for m in BUILT_IN]
    print(grid(Table(["model", "input", "parameters (default input)", "default input", "description"], rows,
                     [False, False, True, False, False])))
    print("\nYour own model: pass the path of a .py file defining build_model(num_classes, input_shape), or a Hugging "
          "Face model folder (config.json + model.safetensors).")
    print(f"In MLX too (--framework mlx): {', '.join(MLX_TWINS)}, or a model file that defines build_mlx_model.")
    return EXIT_OK


def cmd_datasets(args) -> int:
    from ..engine.data import datasets

    rows = [[d.name, d.source, d.description] for d in datasets.list_datasets()]
    print(grid(Table(["dataset", "source", "description"], rows, [False] * 3)))
    print("\nA folder path works too: one subfolder of images per class.")
    return EXIT_OK


def cmd_doctor(args) -> int:
    from ..engine.machine import environment

    rows = environment.doctor()
    width = max(len(k) for k, _ in rows)
    for key, value in rows:
        print(f"{key.ljust(width)}  {value}")
    return EXIT_OK
