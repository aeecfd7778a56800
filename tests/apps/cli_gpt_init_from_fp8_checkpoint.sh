#!/bin/sh
# A transformer-engine checkpoint is the same model with FP8 scaling state: --init-from takes
# its weights into a bf16-mixed or nf4 run (the scaling state left out).
# Usage: cli_gpt_init_from_fp8_checkpoint.sh MANTISSA
. "$(dirname "$0")/cli_test_lib.sh"
M=$1
cd "$dir" || exit 1

rm -rf cli_gif8 &&
  yes 'the quick brown fox jumps over the lazy dog' | head -n 60 > cli_gif8.txt &&
  G='--model gpt --layers 1 --width 32 --heads 2 --context 16 --max-steps 1 --sample-tokens 0 --no-progress-bar --text cli_gif8.txt' &&
  "$M" train $G --precision transformer-engine --checkpoint-dir cli_gif8 >/dev/null 2>&1 &&
  "$M" train $G --precision bf16-mixed --init-from cli_gif8/last.safetensors >/dev/null 2>&1 &&
  out=$("$M" train $G --precision nf4 --lora-rank 2 --init-from cli_gif8/last.safetensors 2>&1) &&
  ! echo "$out" | grep -q 'another model'
