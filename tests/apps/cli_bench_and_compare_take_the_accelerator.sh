#!/bin/sh
# bench and compare take --accelerator as train does; without a usable GPU it is refused with
# the reason (docs/cuda.md). Skipped where a GPU can be used (the test is for its absence).
# Usage: cli_bench_and_compare_take_the_accelerator.sh MANTISSA
. "$(dirname "$0")/cli_test_lib.sh"
M=$1
cd "$dir" || exit 1

"$M" info | grep -q '^GPUs (CUDA backend' &&
  exit 77
out=$("$M" bench --accelerator gpu --precisions 32-true --steps 1 2>&1)
test $? -eq 2 &&
  echo "$out" | grep -q "cannot run on accelerator 'gpu'" &&
  out=$("$M" compare --accelerator gpu --precisions 32-true --epochs 1 2>&1)
test $? -eq 2 &&
  echo "$out" | grep -q "cannot run on accelerator 'gpu'" &&
  "$M" bench --help | grep -q -- '--accelerator'
