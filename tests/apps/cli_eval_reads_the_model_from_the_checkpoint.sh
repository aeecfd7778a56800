#!/bin/sh
# eval rebuilds the model from what the checkpoint records (no size flags needed); a given
# shape flag that differs from the file is an error naming both values.
# Usage: cli_eval_reads_the_model_from_the_checkpoint.sh MANTISSA
. "$(dirname "$0")/cli_test_lib.sh"
M=$1
cd "$dir" || exit 1

rm -rf cli_evm &&
  "$M" train --model gpt --max-steps 2 --layers 1 --width 32 --heads 2 --context 16 --sample-tokens 0 --no-progress-bar --checkpoint-dir cli_evm >/dev/null 2>&1 &&
  "$M" eval --checkpoint cli_evm/last.safetensors | grep -q 'model gpt, precision 32-true: validation loss' &&
  out=$("$M" eval --checkpoint cli_evm/last.safetensors --model mlp 2>&1)
test $? -eq 2 &&
  echo "$out" | grep -q 'was trained with --model gpt, but --model is mlp' &&
  out=$("$M" eval --checkpoint cli_evm/last.safetensors --heads 4 2>&1)
test $? -eq 2 &&
  echo "$out" | grep -q 'was trained with --heads 2, but --heads is 4'
