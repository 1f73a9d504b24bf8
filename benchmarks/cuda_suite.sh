#!/usr/bin/env bash
# Everything measured on the lent CUDA machine, in one go (see docs/benchmarks.md).
# Usage: OUT=<folder> bash benchmarks/cuda_suite.sh
set -u
OUT=${OUT:-/tmp/mpsstudio-cuda}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1 MPSSTUDIO_DATA_DIR=$OUT/data
log() { echo "=== $*"; }
{
  log machine
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
  python3 -c "import torch, torchvision, platform; print('python', platform.python_version(), 'torch', torch.__version__, 'torchvision', torchvision.__version__, 'cuda', torch.version.cuda, 'cpu threads', torch.get_num_threads())"
  lscpu | grep -E '^Model name|^CPU\(s\)'
  python3 -m mpsstudio devices
  log "overhead on cuda"
  python3 benchmarks/overhead.py --device cuda --reps 7 --seconds 2
  log "overhead on cpu"
  python3 benchmarks/overhead.py --device cpu --reps 7 --seconds 2
  log "engine vs CUDA events"
  python3 benchmarks/cuda_events.py --model resnet18 --batch-size 128 --steps 400
  python3 benchmarks/cuda_events.py --model mlp --batch-size 64 --steps 5000
  python3 benchmarks/cuda_events.py --model resnet50 --batch-size 128 --steps 150 --precision bf16 --channels-last
  log "resnet50 batch 128 bf16 channels_last"
  python3 -m mpsstudio bench --model resnet50 --dataset synthetic --devices cuda --batch-size 128 --steps 200 \
    --precision bf16 --channels-last --json "$OUT/resnet50_bf16.json"
  log "smoke: default comparison, fp16 GradScaler, inference, resident, compile"
  python3 -m mpsstudio bench --devices cpu,cuda --json "$OUT/default.json"
  python3 -m mpsstudio bench --model mnist_cnn --dataset shapes --devices cuda --epochs 1 --precision fp16 --resident
  python3 -m mpsstudio bench --model resnet18 --dataset synthetic --devices cpu,cuda --batch-size 64 --steps 40 --mode inference
  python3 -m mpsstudio bench --model transformer --dataset synthetic --devices cuda --batch-size 32 --steps 100 --precision bf16
  python3 -m mpsstudio bench --model mlp --dataset synthetic --devices cuda --batch-size 256 --steps 200 --compile
  python3 -m mpsstudio bench --model vit_b_16 --dataset synthetic --devices cuda --batch-size 100000 --steps 5
  echo "exit code of the out-of-memory run: $?"
} 2>&1 | tee "$OUT/cuda_suite.log"
