#!/usr/bin/env bash
# Exact limits and honest costs on the lent CUDA machine (docs/benchmarks.md, "Exact limits and honest costs"):
# max-batch against an independent bisection under the same allocator cap, the TF32 note and what TF32 changes,
# energy above idle, and the engine-overhead intervals through the run process. Each part fits one call there:
#   OUT=<folder> PART=maxbatch [CASES="resnet50 8G fp32;vit_b_16 16G bf16"] bash benchmarks/cuda_limits.sh
#   OUT=<folder> PART=tf32 bash benchmarks/cuda_limits.sh
#   OUT=<folder> PART=overhead [MODELS=mlp,mnist_cnn,resnet18] bash benchmarks/cuda_limits.sh   (wheels in .wheels/)
set -u
source "$(dirname "$0")/lent_machine.sh"
export PYTHONPATH=.
{
  describe_machine
  if [ "${PART:-}" = overhead ]; then
    log "engine overhead through the run process, pairs until the 95 % interval is within +-3 %"
    python3 benchmarks/overhead.py --device cuda --models "${MODELS:-mlp,mnist_cnn,resnet18}" --isolated \
      --seconds 2 --min-pairs 6 --max-pairs 16
    exit 0
  fi
  if [ "${PART:-}" = maxbatch ]; then
    IFS=';' read -ra cases <<< "${CASES:-resnet50 8G fp32;resnet50 8G bf16;vit_b_16 16G fp32;vit_b_16 16G bf16}"
    for case in "${cases[@]}"; do
      set -- $case
      log "max-batch check: $1 under $2 in $3"
      python3 benchmarks/maxbatch_check.py --model "$1" --memory-limit "$2" --precision "$3" --device cuda
    done
    exit 0
  fi
  for tf32 in "" "--tf32"; do
    log "resnet18 224 px batch 64 on cuda ${tf32:-(TF32 off)}"
    python3 -m mpsstudio bench --model resnet18 --dataset synthetic --devices cuda --batch-size 64 --steps 150 \
      --no-inspect --no-save $tf32 --json "$OUT/tf32${tf32:+_on}.json" 2>&1 | tail -6
  done
  python3 - "$OUT" <<'PY'
import json, sys
out = sys.argv[1]
for name in ("tf32", "tf32_on"):
    [r] = json.load(open(f"{out}/{name}.json"))["runs"]
    s = r["summary"]
    print(name, f"{s['samples_per_s']:.0f} samples/s", "| note:", s.get("precision_note") or "-")
    print("   energy", s.get("j_per_sample"), "J/sample at", s.get("avg_power_w"), "W; idle", s.get("idle_w"), "W over",
          s.get("idle_s"), "s; above idle", s.get("j_per_sample_above_idle"), "J/sample at",
          s.get("power_above_idle_w"), "W;", s.get("idle_reason") or "")
PY
} 2>&1 | tee "$OUT/cuda_limits.log"
