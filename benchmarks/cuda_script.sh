#!/usr/bin/env bash
# "Your script as it is" on the lent CUDA machine (docs/benchmarks.md): what `mpsstudio run` costs a launch-bound
# script (benchmarks/script_overhead.py, alternated with the script alone), and scripts that pick their own device
# run for cpu and cuda (one run on each, compared).
# Usage there: OUT=<folder> PAIRS=6 bash benchmarks/cuda_script.sh   (wheels in .wheels/: platformdirs, psutil)
set -u
source "$(dirname "$0")/lent_machine.sh"
{
  describe_machine
  log "tracked / alone, the GPT script (bf16 autocast, AdamW, loss.item() each step), ${PAIRS:-6} alternated pairs"
  python3 benchmarks/script_overhead.py --device cuda --pairs "${PAIRS:-6}" --iters "${ITERS:-400}" ${ALSO:+--also "$ALSO"}
  for args in "-- --accel" ""; do
    log "a script that picks its device (torch.accelerator with --accel, else torch.cuda.is_available()): $args"
    python3 -m mpsstudio run benchmarks/scripts/accel_train.py --devices cpu,cuda --show-output \
      --json "$OUT/accel${args:+_accel}.json" $args
    echo "exit code: $?"
  done
  log "the GPT script as it is, for cpu and cuda (it chooses cuda itself when it sees one)"
  python3 -m mpsstudio run benchmarks/scripts/gpt_train.py --devices cpu,cuda --json "$OUT/gpt.json" -- --iters 120
  echo "exit code: $?"
} 2>&1 | tee "$OUT/cuda_script.log"
