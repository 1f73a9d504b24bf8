#!/usr/bin/env bash
# Trustworthy comparisons on the lent CUDA machine (docs/benchmarks.md, "Launch benchmark" and "Comparisons").
# Usage there: OUT=<folder> bash benchmarks/cuda_launch.sh   (wheels for platformdirs/psutil in .wheels/)
set -u
OUT=${OUT:-/tmp/mpsstudio-cuda}
STEPS=${STEPS:-6}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1 MPSSTUDIO_DATA_DIR=$OUT/data MPSSTUDIO_LOG_DIR=$OUT/log
log() { echo "=== $*"; }
{
  python3 -m pip install -q --no-index --find-links .wheels platformdirs psutil 2>&1 | tail -1
  log machine
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
  python3 -c "import torch, torchvision, platform; print('python', platform.python_version(), 'torch', torch.__version__, 'torchvision', torchvision.__version__, 'cpu threads', torch.get_num_threads())"
  lscpu | grep -E '^Model name|^CPU\(s\)'
  log "bench with no --devices: every available device, stability and the verdict"
  python3 -m mpsstudio bench --model mlp --dataset synthetic --steps 400 --json "$OUT/default.json"
  echo "exit code: $?"
  log "repeat 3, interleaved"
  python3 -m mpsstudio bench --model resnet18 --dataset synthetic --batch-size 64 --steps 30 --repeat 3 --json "$OUT/repeat.json"
  echo "exit code: $?"
  log "launch benchmark, cpu and cuda, $STEPS steps"
  time python3 -m mpsstudio launch-benchmark --devices cpu,cuda --steps "$STEPS" --warmup 1 --json "$OUT/launch.json"
  echo "exit code: $?"
  log "processes left: $(pgrep -fc 'multiprocessing.spawn' || true)"
} 2>&1 | tee "$OUT/log.txt"
