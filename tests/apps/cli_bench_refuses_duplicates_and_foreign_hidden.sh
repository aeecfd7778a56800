#!/bin/sh
# bench refuses a precision listed twice (as compare does) and --hidden for models it does not
# size.
# Usage: cli_bench_refuses_duplicates_and_foreign_hidden.sh MANTISSA
. "$(dirname "$0")/cli_test_lib.sh"
M=$1
cd "$dir" || exit 1

out=$("$M" bench --model mlp --precisions 32-true,32 --steps 1 2>&1)
test $? -eq 2 &&
  echo "$out" | grep -q "precision '32-true' is listed twice" &&
  out=$("$M" bench --model gpt --hidden 64 --steps 1 2>&1)
test $? -eq 2 &&
  echo "$out" | grep -q 'does not apply to --model gpt'
