#!/bin/sh
# A GPT QLoRA run without --init-from trains adapters on a random, frozen base: it says so;
# with --init-from it does not.
# Usage: cli_gpt_qlora_without_init_from_warns.sh MANTISSA
. "$(dirname "$0")/cli_test_lib.sh"
M=$1
cd "$dir" || exit 1

rm -rf cli_gqw &&
  yes 'the quick brown fox jumps over the lazy dog' | head -n 60 > cli_gqw.txt &&
  G='--model gpt --layers 1 --width 32 --heads 2 --context 16 --max-steps 1 --sample-tokens 0 --no-progress-bar --text cli_gqw.txt' &&
  out=$("$M" train $G --precision nf4 --lora-rank 8 2>&1) &&
  echo "$out" | grep -q "warning: precision 'nf4' with --lora-rank 8 but no --init-from: the frozen quantized base weights are the GPT's random initialisation" &&
  "$M" train $G --checkpoint-dir cli_gqw >/dev/null 2>&1 &&
  out=$("$M" train $G --precision nf4 --lora-rank 8 --init-from cli_gqw/last.safetensors 2>&1) &&
  ! echo "$out" | grep -q 'no --init-from'
