#!/usr/bin/env bash
# Energy on the lent CUDA machine (docs/benchmarks.md, "Energy and utilisation on CUDA").
# Usage there: OUT=<folder> bash benchmarks/cuda_energy.sh   (wheels in .wheels/: platformdirs, psutil, nvidia-ml-py)
set -u
source "$(dirname "$0")/lent_machine.sh"
{
  describe_machine
  python3 -m pip install -q --no-index --find-links .wheels nvidia-ml-py 2>&1 | tail -1
  log "RAPL here? $(ls /sys/class/powercap 2>&1 | head -3 | tr '\n' ' ')"
  log "cross-check: resnet50 bf16 batch 128, engine vs nvidia-smi"
  python3 benchmarks/energy_check.py --model resnet50 --batch-size 128 --precision bf16 --steps 600 --out "$OUT/check"
  echo "exit code: $?"
  for spec in "mlp 200 128" "mnist_cnn 100 128" "resnet18 30 64"; do
    set -- $spec
    log "bench $1 cpu,cuda: $2 steps at batch $3"
    python3 -m mpsstudio bench --model "$1" --dataset synthetic --devices cpu,cuda --steps "$2" --batch-size "$3" \
      --no-inspect --json "$OUT/bench_$1.json"
    echo "exit code: $?"
  done
  log "engine overhead with the meter (wall vs bare loop)"
  python3 benchmarks/overhead.py --device cuda --reps 5 --seconds 2
  log "processes left: $(pgrep -fc 'multiprocessing.spawn' || true)"
} 2>&1 | tee "$OUT/log.txt"
