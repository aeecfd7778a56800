#!/bin/sh
# eval takes --accelerator too: without a GPU, the same refusal after reading the checkpoint.
# Usage: cli_eval_takes_the_accelerator.sh MANTISSA
. "$(dirname "$0")/cli_test_lib.sh"
M=$1
cd "$dir" || exit 1

"$M" info | grep -q '^GPUs (CUDA backend' &&
  exit 77
d=$(mktemp -d) &&
  "$M" train --epochs 1 --train-subset 256 --hidden 32 --checkpoint-dir $d >/dev/null 2>&1 &&
  out=$("$M" eval --checkpoint $d/last.safetensors --accelerator gpu 2>&1)
rc=$?
rm -rf $d
test $rc -eq 2 &&
  echo "$out" | grep -q "cannot run on accelerator 'gpu'"
