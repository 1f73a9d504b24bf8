#!/usr/bin/env bash
# Runs in their own processes, measured on the lent CUDA machine (docs/benchmarks.md, "Run processes").
# Usage there: OUT=<folder> bash benchmarks/cuda_isolation.sh   (wheels for platformdirs/psutil in .wheels/)
set -u
source "$(dirname "$0")/lent_machine.sh"
{
  describe_machine
  log "overhead, engine in its own process vs bare loop in this one (cuda)"
  python3 benchmarks/overhead.py --device cuda --reps 5 --seconds 2 --models mlp,resnet18 --isolated
  log "overhead, engine in this process (same session, for comparison)"
  python3 benchmarks/overhead.py --device cuda --reps 5 --seconds 2 --models mlp,resnet18
  log "a model that aborts on the GPU: failed run, exit 1"
  printf 'import os, torch\nclass M(torch.nn.Module):\n    def __init__(s, n):\n        super().__init__(); s.l = torch.nn.Linear(3072, n)\n    def forward(s, x):\n        y = s.l(x.flatten(1)); torch.cuda.synchronize(); os.abort()\ndef build_model(num_classes, input_shape):\n    return M(num_classes)\n' > "$OUT/abort.py"
  python3 -m mpsstudio bench --model "$OUT/abort.py" --dataset synthetic --devices cuda,cpu --steps 5 --no-save
  echo "exit code: $?"
  log "a real CUDA out-of-memory: failed run with the sentence"
  python3 -m mpsstudio bench --model vit_b_16 --dataset synthetic --devices cuda --batch-size 1024 --steps 2 --warmup 0 --no-save
  echo "exit code: $?"
  log "a hung model under --timeout 20"
  printf 'import torch\nclass M(torch.nn.Linear):\n    def forward(s, x):\n        while True: pass\ndef build_model(num_classes, input_shape):\n    return M(3072, num_classes)\n' > "$OUT/hang.py"
  python3 -m mpsstudio bench --model "$OUT/hang.py" --dataset synthetic --devices cuda --steps 5 --timeout 20 --no-save
  echo "exit code: $?"
  log "processes left: $(pgrep -fc 'multiprocessing.spawn' || true)"
  tail -30 "$OUT/log/mpsstudio.log"
} 2>&1 | tee "$OUT/cuda_isolation.log"
