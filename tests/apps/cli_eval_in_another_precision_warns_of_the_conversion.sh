#!/bin/sh
# eval in another float precision converts the weights with the warning a resume gives.
# Usage: cli_eval_in_another_precision_warns_of_the_conversion.sh MANTISSA
. "$(dirname "$0")/cli_test_lib.sh"
M=$1
cd "$dir" || exit 1

rm -rf cli_eap &&
  "$M" train --max-steps 1 --train-subset 64 --no-progress-bar --checkpoint-dir cli_eap >/dev/null 2>&1 &&
  out=$("$M" eval --checkpoint cli_eap/last.safetensors --precision bf16-true 2>&1) &&
  echo "$out" | grep -q -- 'warning: checkpoint cli_eap/last.safetensors was saved in 32-true; its float32 weights are converted to bfloat16 for bf16-true' &&
  out=$("$M" eval --checkpoint cli_eap/last.safetensors 2>&1) &&
  ! echo "$out" | grep -q warning
