#!/bin/sh
# --save-weights is checked before any training (not at the very end of a GPT run) and
# refused for the image models (not ignored).
# Usage: cli_save_weights_checked_first.sh MANTISSA
. "$(dirname "$0")/cli_test_lib.sh"
M=$1
cd "$dir" || exit 1

out=$("$M" train --model gpt --max-steps 2 --save-weights /proc/w.safetensors 2>&1)
test $? -eq 2 &&
  echo "$out" | grep -q -- "--save-weights '/proc/w.safetensors'" &&
  ! echo "$out" | grep -q 'final validation' &&
  out=$("$M" train --model mlp --save-weights w.safetensors 2>&1)
test $? -eq 2 &&
  echo "$out" | grep -q 'applies to --model gpt only'
