#!/bin/sh
# bench --batch-size 0 is refused as in train, not read as "the model's default".
# Usage: cli_bench_batch_size_zero_is_refused.sh MANTISSA
. "$(dirname "$0")/cli_test_lib.sh"
M=$1
cd "$dir" || exit 1

! out=$("$M" bench --batch-size 0 --steps 1 2>&1) &&
  echo "$out" | grep -q -- '\[bench\] --batch-size must be at least 1, got 0'
