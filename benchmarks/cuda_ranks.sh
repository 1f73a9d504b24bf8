#!/usr/bin/env bash
# Runs on several GPUs on the lent multi-GPU machine (docs/benchmarks.md, "Several GPUs"): the engine against a bare
# DDP loop side by side, then the issue's own command. NVLink multicast stays off: the machine's NCCL_NVLS_ENABLE=0,
# TORCH_SYMM_MEM_DISABLE_MULTICAST=1, NVSHMEM_DISABLE_NVLS=1 pass to every rank (nothing here clears them).
# Usage there: OUT=<folder> ROUNDS=3 [PART=all|scaling|issue|short STEPS="60 150"] bash benchmarks/cuda_ranks.sh   (wheels for platformdirs/psutil in .wheels/)
set -u
ROUNDS=${ROUNDS:-3}
PART=${PART:-all}
source "$(dirname "$0")/lent_machine.sh"
{
  describe_machine
  log "NVLink multicast switches: NCCL_NVLS_ENABLE=${NCCL_NVLS_ENABLE-unset} TORCH_SYMM_MEM_DISABLE_MULTICAST=${TORCH_SYMM_MEM_DISABLE_MULTICAST-unset} NVSHMEM_DISABLE_NVLS=${NVSHMEM_DISABLE_NVLS-unset}"
  nvidia-smi topo -m 2>/dev/null | head -4
  if [ "$PART" = all ] || [ "$PART" = scaling ]; then
  log "engine vs bare DDP, resnet50 bf16 channels_last, batch 128 per GPU, $ROUNDS rounds"
  python3 benchmarks/ddp_scaling.py --gpus 1,2 --rounds "$ROUNDS" --model resnet50 --batch-size 128 --precision bf16 --channels-last --steps 150 --out "$OUT/scaling"
  fi
  if [ "$PART" = short ]; then
  for S in ${STEPS:-60 150}; do
    log "engine vs bare DDP at --steps $S, $ROUNDS rounds (issue 48: too short said, or within 5 % at 60, 3 % at 150)"
    python3 benchmarks/ddp_scaling.py --gpus 1,2 --rounds "$ROUNDS" --model resnet50 --batch-size 128 --precision bf16 --channels-last --steps "$S" --out "$OUT/steps$S"
    log "the issue's command at --steps $S (its defaults)"
    python3 -m mpsstudio bench --model resnet50 --dataset synthetic --devices cuda --gpus 1,2 --precision bf16 --channels-last --batch-size 128 --steps "$S" --no-inspect --no-save --json "$OUT/issue$S.json" | tail -n 12
  done
  fi
  if [ "$PART" = all ] || [ "$PART" = issue ]; then
  log "the issue's command"
  python3 -m mpsstudio bench --model resnet50 --dataset synthetic --devices cuda --gpus 1,2 --precision bf16 --channels-last --batch-size 128 --steps 150 --no-inspect --json "$OUT/issue.json"
  echo "exit code: $?"
  python3 -c "import json; r=json.load(open('$OUT/issue.json'))['runs'][-1]; print('recorded env:', {k: v for k, v in r['env']['env'].items() if 'NVLS' in k or 'MULTICAST' in k}, r['env'].get('ranks'))"
  fi
  log "processes left: $(pgrep -fc 'torch.distributed.run|mpsstudio.engine.process.rank' || true)"
} 2>&1 | tee "$OUT/log.txt"
