#!/bin/sh
# The memory planner and the budget it plans for.
# Usage: cli_plan_mlp_table.sh MANTISSA
. "$(dirname "$0")/cli_test_lib.sh"
M=$1
cd "$dir" || exit 1

out=$("$M" plan --model mlp --hidden 32 --memory 2MiB --precisions 32-true,bf16-true 2>&1) &&
  echo "$out" | grep -Eq '^bf16-true +[0-9]+ ' &&
  echo "$out" | grep -q 'dry run at this batch'
