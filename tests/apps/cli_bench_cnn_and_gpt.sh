#!/bin/sh
# bench runs the CNN and the GPT (whose row names its size, 6x256).
# Usage: cli_bench_cnn_and_gpt.sh MANTISSA
. "$(dirname "$0")/cli_test_lib.sh"
M=$1
cd "$dir" || exit 1

"$M" bench --model cnn --steps 2 --untimed-steps 0 --precisions 32-true,bf16-mixed | grep -q 'bf16-mixed' &&
  "$M" bench --model gpt --steps 2 --untimed-steps 0 --precisions bf16-mixed | grep -q 'gpt 6x256'
