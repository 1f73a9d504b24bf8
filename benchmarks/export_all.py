"""Every built-in model exported to Core ML (and, with --formats, the other formats), as `mpsstudio export` does:
seconds, size, and the check (on macOS the package is run and compared with PyTorch; elsewhere conversion only).

    python benchmarks/export_all.py [--formats coreml,torchscript,exported-program] [--precision fp16] [--models a,b]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from mpsstudio.engine.basics.config import RunConfig  # noqa: E402
from mpsstudio.engine.basics.errors import UserError  # noqa: E402
from mpsstudio.engine.basics.formatting import fmt_bytes  # noqa: E402
from mpsstudio.engine.models import registry as models  # noqa: E402
from mpsstudio.engine.tools import export  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--formats", default="coreml")
    ap.add_argument("--precision", default="fp16")
    ap.add_argument("--models", default=",".join(m.name for m in models.list_models()))
    args = ap.parse_args()
    failed = 0
    with tempfile.TemporaryDirectory() as tmp:
        for name in args.models.split(","):
            for fmt in args.formats.split(","):
                out = Path(tmp) / f"{name}{export.FORMATS[fmt]}"
                started = time.perf_counter()
                try:
                    r = export.export(RunConfig(model=name, dataset="synthetic"), fmt, str(out),
                                      precision=args.precision if fmt == "coreml" else "fp32")
                    check = r["check"]
                    said = ("agrees" if check["ok"] else f"DISAGREES: {check['reason']}") if check["ok"] is not None \
                        else "converted (not run: not macOS)"
                    print(f"{name:20s} {fmt:17s} {time.perf_counter() - started:6.1f} s  {fmt_bytes(r['bytes']):>10s}"
                          f"  input {r['input']['shape']}  {said}", flush=True)
                except UserError as exc:
                    failed += 1
                    print(f"{name:20s} {fmt:17s} FAILED: {exc}", flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
