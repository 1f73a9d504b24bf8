#!/usr/bin/env bash
# The measuring tools on the lent CUDA machine (docs/benchmarks.md, "Sweep, max-batch and inspect on CUDA").
# Usage there: OUT=<folder> PART=sweep|maxbatch|parity bash benchmarks/cuda_tools.sh  (wheels in .wheels/)
set -u
PART=${PART:-sweep}
source "$(dirname "$0")/lent_machine.sh"
{
  describe_machine
  if [ "$PART" = sweep ]; then
    log "sweep mlp, cpu and cuda"
    time python3 -m mpsstudio sweep --model mlp --dataset synthetic --devices cpu,cuda \
      --batch-sizes 1,2,4,8,16,32,64,128,256,512,1024 --json "$OUT/sweep_mlp.json"
    echo "exit code: $?"
    log "sweep resnet18, cpu and cuda"
    time python3 -m mpsstudio sweep --model resnet18 --dataset synthetic --devices cpu,cuda \
      --batch-sizes 1,2,4,8,16,32,64 --steps 16 --json "$OUT/sweep_resnet18.json"
    echo "exit code: $?"
  fi
  if [ "$PART" = maxbatch ]; then
    log "max-batch resnet50 on cuda"
    time python3 -m mpsstudio max-batch --model resnet50 --dataset synthetic --device cuda --json "$OUT/maxbatch.json"
    echo "exit code: $?"
    L=$(python3 -c "import json; print(json.load(open('$OUT/maxbatch.json'))['largest_batch'])")
    log "bare PyTorch at the largest batch ($L) and its double"
    python3 benchmarks/oom_check.py --model resnet50 --batch-sizes "$L,$((2 * L))"
    log "inspect on cuda records backward ops too (op counts, against the CPU's)"
    python3 -m mpsstudio inspect --model mlp --dataset shapes --device cuda --json "$OUT/inspect_mlp_cuda.json"
    python3 -c "import json; r=json.load(open('$OUT/inspect_mlp_cuda.json')); print('cuda op calls', r['op_count'], 'distinct', r['distinct_ops'])"
  fi
  if [ "$PART" = parity ]; then
    log "parity table, cuda"
    time python3 benchmarks/parity_table.py --device cuda --models mlp,mnist_cnn,resnet18,transformer \
      --settings fp32,tf32,bf16,fp16 --json "$OUT/parity.json"
  fi
  log "processes left: $(pgrep -fc 'multiprocessing.spawn' || true)"
} 2>&1 | tee "$OUT/log.txt"
