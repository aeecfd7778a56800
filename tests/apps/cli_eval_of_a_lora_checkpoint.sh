#!/bin/sh
# eval of a QLoRA checkpoint rebuilds its adapters (rank and alpha from the file) and gives
# the accuracy the run printed; another rank, or another precision for its 4-bit weights, is
# an error saying what to do.
# Usage: cli_eval_of_a_lora_checkpoint.sh MANTISSA
. "$(dirname "$0")/cli_test_lib.sh"
M=$1
cd "$dir" || exit 1

rm -rf cli_lora &&
  a=$("$M" train --precision nf4-dq --lora-rank 4 --lora-alpha 8 --train-subset 512 --epochs 1 --checkpoint-dir cli_lora --no-progress-bar 2>/dev/null | sed -n 's/^final test accuracy: \([0-9.]*\).*/\1/p') &&
  test -n "$a" &&
  "$M" eval --checkpoint cli_lora/last.safetensors 2>/dev/null | grep -q "test accuracy $a" &&
  out=$("$M" eval --checkpoint cli_lora/last.safetensors --lora-rank 8 2>&1)
test $? -eq 2 &&
  echo "$out" | grep -q 'LoRA adapters of rank 4, but --lora-rank is 8' &&
  out=$("$M" eval --checkpoint cli_lora/last.safetensors --precision 32-true 2>&1)
test $? -eq 2 &&
  echo "$out" | grep -q 'holds nf4-dq weights, which evaluate only in nf4-dq'
