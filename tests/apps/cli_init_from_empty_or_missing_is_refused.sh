#!/bin/sh
# --init-from given empty (an unset shell variable) or naming no file is refused before any
# training, naming the flag: an empty one never trains from scratch without a word.
# Usage: cli_init_from_empty_or_missing_is_refused.sh MANTISSA
. "$(dirname "$0")/cli_test_lib.sh"
M=$1
cd "$dir" || exit 1

! out=$("$M" train --precision nf4 --lora-rank 2 --max-steps 1 --train-subset 64 --no-progress-bar --init-from '' 2>&1) &&
  echo "$out" | grep -q -- '--init-from: the value is empty' &&
  ! out=$("$M" train --precision nf4 --lora-rank 2 --max-steps 1 --train-subset 64 --no-progress-bar --init-from cli_no_such.safetensors 2>&1) &&
  echo "$out" | grep -q -- '--init-from cli_no_such.safetensors: no such file'
