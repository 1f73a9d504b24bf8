#!/usr/bin/env bash
# Training for real on the lent CUDA machine (docs/benchmarks.md, "Training for real on CUDA"): early stopping with
# the best epoch's weights, saved models that load with weights_only=True, the evaluation, gradient accumulation.
# Usage there: OUT=<folder> bash benchmarks/cuda_training.sh   (wheels in .wheels/: platformdirs, psutil)
set -u
source "$(dirname "$0")/lent_machine.sh"
{
  describe_machine
  log "mlp on shapes, 10 epochs, early stopping (patience 2) with the best epoch, cpu and cuda, models saved"
  python3 -m mpsstudio bench --model mlp --dataset shapes --devices cpu,cuda --epochs 10 --batch-size 128 --lr 0.05 \
    --early-stop 2 --keep-best --save-model "$OUT/mlp.pt" --no-inspect --json "$OUT/early.json"
  echo "exit code: $?"
  python3 - "$OUT" <<'PY'
import json, sys, torch
out = sys.argv[1]
for r in json.load(open(f"{out}/early.json"))["runs"]:
    s, ev = r["summary"], r.get("evaluation") or {}
    print(r["config"]["device"], "epochs run", len(r["epochs"]), "stopped early after", s.get("stopped_early_epoch"),
          "best epoch", s.get("best_epoch"), "best", s.get("best_value"), "saved", s.get("saved_model"),
          "evaluation", f"{len(ev.get('classes', []))} classes, {sum(map(sum, ev.get('matrix', [])))} samples")
for device in ("cpu", "cuda0"):  # --save-model names a file per device: mlp-cpu.pt, mlp-cuda0.pt
    state = torch.load(f"{out}/mlp-{device}.pt", weights_only=True)
    meta = json.load(open(f"{out}/mlp-{device}.json"))
    print(device, "weights_only load:", len(state), "tensors on", {str(v.device) for v in state.values()},
          "| json:", meta["model"], meta["input"], meta["classes"][:3], "weights of epoch", meta["weights_of_epoch"])
PY
  for acc in 1 4; do
    log "resnet18 synthetic cuda, batch 32, accumulate $acc"
    python3 -m mpsstudio bench --model resnet18 --dataset synthetic --devices cuda --steps 120 --batch-size 32 \
      --accumulate "$acc" --no-inspect --json "$OUT/accumulate_$acc.json"
    echo "exit code: $?"
  done
  python3 - "$OUT" <<'PY'
import json, sys
for acc in (1, 4):
    [r] = json.load(open(f"{sys.argv[1]}/accumulate_{acc}.json"))["runs"]
    s = r["summary"]
    print(f"accumulate {acc}: {s['samples_per_s']:.0f} samples/s (IQR {s['samples_per_s_iqr']:.0f}), "
          f"{s['measured_steps']} micro-batches measured, status {r['status']}")
PY
  log "processes left: $(pgrep -fc 'multiprocessing.spawn' || true)"
} 2>&1 | tee "$OUT/log.txt"
