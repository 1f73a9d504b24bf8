#!/usr/bin/env bash
# Runs on the lent CUDA machine (docs/benchmarks.md, "Your Hugging Face model"): a GPT-2-small-sized model folder
# fine-tuned in bf16 at sequence length 512, full and LoRA, the engine against a bare transformers loop; max-batch
# against a bisection; then the Trainer example on the CPU and the GPU under `mpsstudio run`.
# Usage there: OUT=<folder> [ROUNDS=2] [STEPS=30] [MAXBATCH=1] [PART=all|compare] bash benchmarks/cuda_hf.sh
#   (wheels: .wheels/ for platformdirs/psutil, .wheels/hf/ for transformers, peft, safetensors, tokenizers, accelerate)
set -u
source "$(dirname "$0")/lent_machine.sh"
{
  describe_machine
  python3 -m pip install -q --no-index --find-links .wheels/hf transformers peft safetensors tokenizers accelerate 2>&1 | tail -2
  python3 -c "import transformers, peft; print('transformers', transformers.__version__, 'peft', peft.__version__)"
  log "engine vs bare transformers loop, GPT-2 small (random), seq 512, bf16, AdamW; full and LoRA"
  python3 benchmarks/hf_check.py --rounds "${ROUNDS:-2}" --steps "${STEPS:-30}" --finetunes "${FINETUNES:-full,lora}" ${MAXBATCH:+--max-batch}
  if [ "${PART:-all}" = all ]; then
  log "the Trainer example under mpsstudio run, on the CPU and the GPU"
  python3 -c "
import torch
from transformers import GPT2Config, GPT2LMHeadModel
torch.manual_seed(0)
GPT2LMHeadModel(GPT2Config(n_layer=4, n_embd=256, n_head=4)).save_pretrained('$OUT/gpt-small')"
  python3 -m mpsstudio run examples/hf_trainer_finetune.py --devices cpu,cuda --no-save --json "$OUT/trainer.json" -- --model "$OUT/gpt-small" --steps 30 --batch-size 8 --seq-len 128 2>&1 | tail -n 25
  fi
  log "processes left: $(pgrep -fc 'mpsstudio' || true)"
} 2>&1 | tee "$OUT/log.txt"
