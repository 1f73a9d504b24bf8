#!/usr/bin/env bash
# The device check on the lent CUDA machine (docs/benchmarks.md, "Is the device right today"): the whole check of
# the GPU and the CPU, then its timing beside a bare loop of the same products. One call there:
#   OUT=<folder> bash benchmarks/cuda_check.sh   (wheels in .wheels/)
set -u
source "$(dirname "$0")/lent_machine.sh"
export PYTHONPATH=.
{
  describe_machine
  log "check of cuda and cpu, 10 fresh processes each"
  start=$(date +%s)
  python3 -m mpsstudio check --devices cuda,cpu --processes 10 --no-save --json "$OUT/check.json" --wide
  echo "exit $? after $(( $(date +%s) - start )) s"
  log "check with TF32 on for matrix products (torch.backends.cuda.matmul.allow_tf32 through the environment)"
  NVIDIA_TF32_OVERRIDE= python3 - <<'PY'
import torch
from mpsstudio.engine.machine.devices import resolve_device
from mpsstudio.engine.tools.check import suite
torch.backends.cuda.matmul.allow_tf32 = True
dev = resolve_device("cuda")
for case in suite.SUITE:
    if case.id in suite.PRODUCTS or case.id in suite.CONVOLUTIONS:
        row = suite.check_case(case, "fp32", dev)
        print(f"{case.id:<14} {row['dtype']:<12} {row['status']:<8} error {row['error']:.2e} tol {row['tolerance']:.2e}")
PY
  log "the check's timing beside a bare loop, cuda"
  python3 benchmarks/check_bare.py --device cuda --processes 10 --rounds 5
} 2>&1 | tee "$OUT/cuda_check.log"
