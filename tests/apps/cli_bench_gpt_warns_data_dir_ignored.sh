#!/bin/sh
# bench --model gpt warns that it ignores --data-dir, then runs.
# Usage: cli_bench_gpt_warns_data_dir_ignored.sh MANTISSA
. "$(dirname "$0")/cli_test_lib.sh"
M=$1
cd "$dir" || exit 1

out=$("$M" bench --model gpt --precisions 32-true --steps 1 --untimed-steps 0 --batch-size 1 --data-dir /nonexistent 2>&1) &&
  echo "$out" | grep -q -- 'warning: --data-dir is the Fashion-MNIST directory of the image models: --model gpt ignores it' &&
  echo "$out" | grep -q '^32-true '
