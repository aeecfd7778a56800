#!/bin/sh
# plan --model gpt prints the widths and depths that fit the memory budget.
# Usage: cli_plan_gpt_width_and_depth.sh MANTISSA
. "$(dirname "$0")/cli_test_lib.sh"
M=$1
cd "$dir" || exit 1

out=$("$M" plan --model gpt --layers 2 --width 32 --heads 2 --context 16 --memory 4MiB --precisions bf16-true --batch-size 4 2>&1) &&
  echo "$out" | grep -Eq '^bf16-true +[0-9]+ +[0-9.]+ [KM]iB +[0-9]+ +[0-9.]+ [KM]iB'
