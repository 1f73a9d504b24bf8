#!/usr/bin/env bash
# The diagnosis's bound on cases whose bound is known, on the lent CUDA machine (docs/benchmarks.md, "Diagnose").
# Usage there: OUT=<folder> PART=known|sync bash benchmarks/cuda_diagnose.sh   (wheels in .wheels/; JSONs in $OUT)
# known: the launch, compute and data cases (and resnet18 on cpu,cuda for the Tools tab's screenshot); sync: the
# blocks model with its per-block .item(), with the same check kept on the device (the truth: the step without the
# waits) and without any check, at sizes where the host's and the device's work are close
# (SIZES="width:batch ...", MODE=train|inference).
set -u
PART=${PART:-known}
source "$(dirname "$0")/lent_machine.sh"
diag() {
  local name=$1; shift
  log "$name: mpsstudio diagnose $*"
  python3 -m mpsstudio diagnose "$@" --json "$OUT/$name.json" --no-save > "$OUT/$name.txt" 2>&1
  echo "exit code: $?"
  tail -n 2 "$OUT/$name.txt"
}
{
  describe_machine
  if [ "$PART" = known ]; then
    diag launch_mlp_b8 --model mlp --dataset synthetic --devices cuda --batch-size 8
    diag compute_resnet50_bf16_b128 --model resnet50 --dataset synthetic --devices cuda --batch-size 128 --precision bf16
    log "a folder of large JPEGs (2 classes x 48, 1600x1200, quality 95)"
    python3 - "$OUT/jpegs" <<'PY'
import os, sys
import numpy as np
from PIL import Image
rng = np.random.default_rng(0)
for c in ("cats", "dogs"):
    os.makedirs(os.path.join(sys.argv[1], c), exist_ok=True)
    for i in range(48):
        noise = rng.integers(0, 255, (1200, 1600, 3), dtype=np.uint8)
        Image.fromarray(noise).save(os.path.join(sys.argv[1], c, f"{i}.jpg"), quality=95)
PY
    diag data_jpegs_cpu_w0 --model resnet18 --dataset "$OUT/jpegs" --devices cpu --batch-size 16 --workers 0
    diag data_jpegs_cpu_w8 --model resnet18 --dataset "$OUT/jpegs" --devices cpu --batch-size 16 --workers 8
    diag data_jpegs_cuda_w0 --model resnet18 --dataset "$OUT/jpegs" --devices cuda --batch-size 16 --workers 0
    rm -rf "$OUT/jpegs"
    diag both_resnet18_b64 --model resnet18 --dataset synthetic --devices cpu,cuda --batch-size 64 --layers
  fi
  if [ "$PART" = sync ]; then
    for WB in ${SIZES:-1024:1536 1024:2048 1024:3072 1024:4096}; do
      export BLOCKS_WIDTH=${WB%%:*}; B=${WB##*:}
      M=${MODE:-train}
      diag sync_${M}_w${BLOCKS_WIDTH}_b$B --model benchmarks/models/blocks_item.py --dataset synthetic --devices cuda \
        --batch-size $B --mode $M
      diag nosync_${M}_w${BLOCKS_WIDTH}_b$B --model benchmarks/models/blocks.py --dataset synthetic --devices cuda \
        --batch-size $B --mode $M
      diag kept_${M}_w${BLOCKS_WIDTH}_b$B --model benchmarks/models/blocks_check.py --dataset synthetic --devices cuda \
        --batch-size $B --mode $M
    done
  fi
  log "summary"
  python3 - "$OUT" <<'PY'
import glob, json, os, sys
for path in sorted(glob.glob(os.path.join(sys.argv[1], "*.json"))):
    doc = json.load(open(path))
    for d in doc.get("devices", []):
        if "error" in d:
            print(os.path.basename(path), d["device"], "error:", d["error"]); continue
        shares = " ".join(f"{k} {v:.0%}" for k, v in d["shares"].items())
        print(f"{os.path.basename(path):30s} {d['device']:7s} {d['bound']:8s} step {d['step_ms']:9.3f} ms  host "
              f"{d['host_ms']:8.3f}  device {d.get('device_ms') or 0:8.3f}  wait {d['sync_wait_ms']:7.3f}  ops "
              f"{d['ops']:5d}  waits {d['sync_count']:3d}  phases/step {d['phase_sum_ratio']:.2f}  [{shares}]")
# The sync share against its truth: the static twin's step is the step without the waits.
for path in sorted(glob.glob(os.path.join(sys.argv[1], "sync_*.json"))):
    d = json.load(open(path))["devices"][0]
    if "error" in d:
        continue
    said = (d.get("shares") or {}).get("sync", (d.get("sync_cost_ms") or 0) / d["step_ms"])  # as the sentence says it
    print(f"{os.path.basename(path):30s} sync share said {said:6.1%}; calls {d.get('sync_calls')}")
    for twin, what in (("/kept_", "the check kept on the device (blocks_check.py)"), ("/nosync_", "no check (blocks.py)")):
        other = path.replace("/sync_", twin)
        if not os.path.exists(other) or "error" in (t := json.load(open(other))["devices"][0]):
            continue
        truth = (d["step_ms"] - t["step_ms"]) / d["step_ms"]
        print(f"    truth by the twin with {what}: {truth:6.1%} (step {t['step_ms']:.3f} ms against "
              f"{d['step_ms']:.3f}), said minus truth {100 * (said - truth):+5.1f} points")
    print("   ", d.get("sentence") or d.get("verdict") or "")
PY
} 2>&1 | tee "$OUT/log.txt"
