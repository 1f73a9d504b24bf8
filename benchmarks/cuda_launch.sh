#!/usr/bin/env bash
# Trustworthy comparisons on the lent CUDA machine (docs/benchmarks.md, "Launch benchmark" and "Comparisons").
# Usage there: OUT=<folder> bash benchmarks/cuda_launch.sh   (wheels for platformdirs/psutil in .wheels/)
set -u
# A lent machine allows 10 minutes a command: PART=bench (the first two) and PART=launch run apart.
STEPS=${STEPS:-3}
PART=${PART:-all}
source "$(dirname "$0")/lent_machine.sh"
{
  describe_machine
  if [ "$PART" != launch ]; then
  log "bench with no --devices: every available device, stability and the verdict"
  python3 -m mpsstudio bench --model mlp --dataset synthetic --steps 400 --json "$OUT/default.json"
  echo "exit code: $?"
  log "repeat 3, interleaved"
  python3 -m mpsstudio bench --model resnet18 --dataset synthetic --batch-size 64 --steps 30 --repeat 3 --json "$OUT/repeat.json"
  echo "exit code: $?"
  fi
  if [ "$PART" != bench ]; then
  log "launch benchmark, cpu and cuda, $STEPS steps"
  time python3 -m mpsstudio launch-benchmark --devices cpu,cuda --steps "$STEPS" --warmup 1 --json "$OUT/launch.json"
  echo "exit code: $?"
  fi
  log "processes left: $(pgrep -fc 'multiprocessing.spawn' || true)"
} 2>&1 | tee "$OUT/log.txt"
