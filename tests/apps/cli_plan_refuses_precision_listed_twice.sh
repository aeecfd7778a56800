#!/bin/sh
# A precision listed twice is refused before any dry run, as bench and compare do.
# Usage: cli_plan_refuses_precision_listed_twice.sh MANTISSA
. "$(dirname "$0")/cli_test_lib.sh"
M=$1
cd "$dir" || exit 1

out=$("$M" plan --model mlp --hidden 8 --memory 2MiB --precisions 32-true,32 2>&1)
test $? -eq 2 &&
  echo "$out" | grep -q "precision '32-true' is listed twice: '32-true' and '32'" &&
  ! echo "$out" | grep -q 'Largest batch'
