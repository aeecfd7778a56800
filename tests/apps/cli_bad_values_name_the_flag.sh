#!/bin/sh
# Values the Trainer or the GPT would refuse in their own field names are refused by train in
# the flags' names ("[Trainer] accumulate_grad_batches must be at least 1" read like an
# internal error), with the head counts that fit --width.
# Usage: cli_bad_values_name_the_flag.sh MANTISSA
. "$(dirname "$0")/cli_test_lib.sh"
M=$1
cd "$dir" || exit 1

out=$("$M" train --accumulate-grad-batches 0 2>&1)
test $? -eq 2 &&
  echo "$out" | grep -q -- '\[train\] --accumulate-grad-batches must be at least 1' &&
  out=$("$M" train --gradient-clip-val -1 2>&1)
test $? -eq 2 &&
  echo "$out" | grep -q -- '\[train\] --gradient-clip-val must be 0 (no clipping) or a positive norm or value, got -1' &&
  out=$("$M" train --model gpt --heads 3 --width 64 2>&1)
test $? -eq 2 &&
  echo "$out" | grep -q -- '\[train\] --width 64 must be divisible by --heads 3 .*use --heads 2 or 4'
