"""The parity table of `mpsstudio inspect` for several models and precisions, each inspection in its own run
process as the CLI does it; prints a Markdown table for docs/benchmarks.md.

    python benchmarks/parity_table.py --device cuda --models mlp,mnist_cnn,resnet18 --settings fp32,tf32,bf16
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from a checkout: the repo's mpsstudio

from mpsstudio.engine import process
from mpsstudio.engine.basics.config import RunConfig
from mpsstudio.engine.basics.errors import UserError

DATASETS = {"transformer": "synthetic", "lstm": "synthetic", "transformer_base": "synthetic"}


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--device", default="cpu")
    p.add_argument("--models", default="mlp,mnist_cnn,resnet18,transformer")
    p.add_argument("--settings", default="fp32,tf32,bf16", help="fp32 (TF32 off), tf32 (fp32, TF32 on), fp16, bf16")
    p.add_argument("--json", default=None)
    args = p.parse_args()
    results = []
    print("| model | setting | loss | logits | worst gradient (tensor) | CPU's own error there, same precision "
          "| tolerance | within | CPU-fallback ops |")
    print("|---|---|---|---|---|---|---|---|---|")
    for model in args.models.split(","):
        for setting in args.settings.split(","):
            cfg = RunConfig(model=model, dataset=DATASETS.get(model, "shapes" if model in ("mlp", "mnist_cnn")
                                                                else "synthetic"),
                            device=args.device, precision="fp32" if setting == "tf32" else setting,
                            tf32=setting == "tf32")
            start = time.perf_counter()
            try:
                r = process.run_tool("inspect", {"config": cfg.to_dict()}, timeout_s=600)
            except UserError as exc:
                print(f"| {model} | {setting} | {exc} |||||||")
                continue
            results.append(r)
            par = r["parity"]
            g = max(par["grads"], key=lambda g: g["max_rel_err"]) if par["grads"] else None
            cpu = g["cpu_rel_err"] if g and g["cpu_rel_err"] is not None else float("nan")
            worst = f"{g['max_rel_err']:.1e} ({g['name']})" if g else "-"
            print(f"| {model} | {setting} | {par['loss_rel_err']:.1e} | {par['logits_max_rel_err']:.1e} | {worst} | "
                  f"{cpu:.1e} | {par['tolerance']:.0e} | {'yes' if par['ok'] else 'NO'} | "
                  f"{len(r['fallback_ops'])} of {r.get('distinct_ops', '?')} distinct ops "
                  f"({r.get('op_count', '?')} calls) |", flush=True)
            print(f"    ({time.perf_counter() - start:.1f} s)", file=sys.stderr)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=1, default=str)
    return 0


if __name__ == "__main__":
    sys.exit(main())
