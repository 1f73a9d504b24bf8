"""Every built-in model exported to Core ML (and, with --formats, the other formats), as `mpsstudio export` does:
seconds, size, and the check (on macOS the package is run and compared with PyTorch; elsewhere conversion only).

    python benchmarks/export_all.py [--formats coreml,torchscript,exported-program] [--precision fp16] [--models a,b]
                                    [--batch-sizes 1,8,32]

A Core ML package takes every batch size of --batch-sizes (enumerated shapes, the first the default); a model that
converts only with a fixed batch is then tried again with the first size alone, and the line says so.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from mpsstudio.engine.basics.config import RunConfig
from mpsstudio.engine.basics.errors import UserError
from mpsstudio.engine.basics.formatting import fmt_bytes
from mpsstudio.engine.models import registry as models
from mpsstudio.engine.tools.deploy import export
from mpsstudio.engine.tools.deploy.coreml import NoFlexibleBatch


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--formats", default="coreml")
    ap.add_argument("--precision", default="fp16")
    ap.add_argument("--models", default=",".join(m.name for m in models.list_models()))
    ap.add_argument("--batch-sizes", default="1,8,32")
    args = ap.parse_args()
    failed = 0
    with tempfile.TemporaryDirectory() as tmp:
        for name in args.models.split(","):
            for fmt in args.formats.split(","):
                out = Path(tmp) / f"{name}{export.FORMATS[fmt]}"
                started = time.perf_counter()
                sizes = [int(b) for b in args.batch_sizes.split(",")] if fmt == "coreml" else [1]
                try:
                    try:
                        r = _export(name, fmt, out, args.precision, sizes)
                    except NoFlexibleBatch as exc:
                        print(f"{name:20s} {fmt:17s} one batch size only ({exc.reason[:90]})", flush=True)
                        started = time.perf_counter()
                        r = _export(name, fmt, out, args.precision, sizes[:1])
                    check = r["check"]
                    said = ("agrees" if check["ok"] else f"DISAGREES: {check['reason']}") if check["ok"] is not None \
                        else "converted (not run: not macOS)"
                    print(f"{name:20s} {fmt:17s} {time.perf_counter() - started:6.1f} s  {fmt_bytes(r['bytes']):>10s}"
                          f"  input {r['input']['shape']}, batch {r.get('batch_sizes') or [1]}  {said}", flush=True)
                except UserError as exc:
                    failed += 1
                    print(f"{name:20s} {fmt:17s} FAILED: {exc}", flush=True)
    return 1 if failed else 0


def _export(name: str, fmt: str, out: Path, precision: str, sizes: list[int]) -> dict:
    return export.export(RunConfig(model=name, dataset="synthetic"), fmt, str(out), batch_size=sizes[0],
                         batch_sizes=sizes if len(sizes) > 1 else None,
                         precision=precision if fmt == "coreml" else "fp32")


if __name__ == "__main__":
    sys.exit(main())
