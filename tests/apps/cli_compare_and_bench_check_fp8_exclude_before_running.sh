#!/bin/sh
# compare and bench check --fp8-exclude names against the model before the first precision
# runs, so a typo fails at once, not when the transformer-engine run starts after the others
# have trained.
# Usage: cli_compare_and_bench_check_fp8_exclude_before_running.sh MANTISSA
. "$(dirname "$0")/cli_test_lib.sh"
M=$1
cd "$dir" || exit 1

out=$("$M" compare --model cnn --precisions 32-true,bf16-mixed,transformer-engine --fp8-exclude net.hed 2>&1)
test $? -eq 2 &&
  echo "$out" | grep -q "fp8_exclude names 'net.hed', but the model (ImageClassifier) has no such layer" &&
  ! echo "$out" | grep -q '\[1/3\]' &&
  out=$("$M" bench --model gpt --precisions 32-true,transformer-engine --fp8-exclude h9 --steps 1 2>&1)
test $? -eq 2 &&
  echo "$out" | grep -q "fp8_exclude names 'h9'.*closest names: h0" &&
  ! echo "$out" | grep -q '^32-true'
