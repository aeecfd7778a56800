#!/bin/sh
# --memory-limit: a run that outgrows the allocator's budget stops naming it (4MiB), and a model
# larger than the budget is refused before it is built (64KiB).
# Usage: cli_memory_limit_out_of_memory.sh MANTISSA
. "$(dirname "$0")/cli_test_lib.sh"
M=$1
cd "$dir" || exit 1

out=$("$M" train --memory-limit 4MiB --epochs 1 --train-subset 512 --no-progress-bar 2>&1)
test $? -eq 2 &&
  echo "$out" | grep -q 'above the memory budget of 4.00 MiB' &&
  out=$("$M" train --memory-limit 64KiB --no-progress-bar 2>&1)
test $? -eq 2 &&
  echo "$out" | grep -q 'take at least 3.11 MiB in 32-true .*; --memory-limit 64KiB allows 64 KiB'
