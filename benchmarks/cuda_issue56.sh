#!/usr/bin/env bash
# Issue 56 on a lent CUDA machine: transformers' Trainer example under `mpsstudio run` (its batch, its scheduler's
# learning rate and bf16 autocast read through accelerate's wrapper, on the CPU and the GPU), and a CUDA run's peak
# memory (PyTorch's allocator peak, as before) beside a bare loop's torch.cuda.max_memory_allocated.
# Carry .wheels/base (platformdirs); OUT=<dir> receives the JSON.
set -euo pipefail
python3 -m pip install -q --no-index --find-links .wheels/base platformdirs 2>/dev/null || true
export PYTHONPATH="$PWD"
OUT="${OUT:-/tmp}"
python3 - <<'PY'
from transformers import GPT2Config, GPT2LMHeadModel
import torch
torch.manual_seed(0)
GPT2LMHeadModel(GPT2Config(vocab_size=1000, n_embd=128, n_layer=2, n_head=2, n_positions=128)).save_pretrained("/tmp/gpt")
PY
python3 -m mpsstudio run examples/hf_trainer_finetune.py --devices cpu,cuda --warmup 3 --json "$OUT/trainer.json" \
    -- --model /tmp/gpt --steps 40 --batch-size 8 --seq-len 64 --bf16 2>&1 | grep -E "cpu:|cuda:|faster|slower" || true
python3 - "$OUT/trainer.json" <<'PY'
import json, sys
for r in json.load(open(sys.argv[1]))["runs"]:
    s = r["summary"]
    print(r["config"]["device"], r["status"], "batch", r["config"]["batch_size"], "lr", s.get("script_settings", {}).get("lr"),
          "autocast", s.get("script_settings", {}).get("autocast"), "samples/s", round(s.get("samples_per_s") or 0, 1))
PY
python3 -m mpsstudio bench --model resnet18 --dataset synthetic --devices cuda --batch-size 64 --steps 60 --warmup 5 \
    --image-size 32 --no-inspect --json "$OUT/peak.json" > /dev/null 2>&1 || true
python3 - "$OUT/peak.json" <<'PY'
import json, sys, torch, torchvision
[r] = json.load(open(sys.argv[1]))["runs"]
s = r["summary"]
model = torchvision.models.resnet18(num_classes=10).cuda()
opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
x, y = torch.randn(64, 3, 32, 32, device="cuda"), torch.randint(0, 10, (64,), device="cuda")
for _ in range(5):
    opt.zero_grad(); torch.nn.functional.cross_entropy(model(x), y).backward(); opt.step()
torch.cuda.synchronize(); torch.cuda.reset_peak_memory_stats()
for _ in range(20):
    opt.zero_grad(); torch.nn.functional.cross_entropy(model(x), y).backward(); opt.step()
torch.cuda.synchronize()
print("engine peak", s["peak_memory"], s["memory_measure"], "| bare loop peak", torch.cuda.max_memory_allocated(),
      "ratio", round(s["peak_memory"] / torch.cuda.max_memory_allocated(), 3))
PY
