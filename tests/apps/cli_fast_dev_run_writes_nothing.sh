#!/bin/sh
# --fast-dev-run N runs N batches with the model summary and writes no checkpoint.
# Usage: cli_fast_dev_run_writes_nothing.sh MANTISSA
. "$(dirname "$0")/cli_test_lib.sh"
M=$1
cd "$dir" || exit 1

rm -rf cli_fdr &&
  out=$("$M" train --fast-dev-run 2 --checkpoint-dir cli_fdr --no-progress-bar 2>&1) &&
  echo "$out" | grep -q 'fast_dev_run mode: 2 batch' &&
  echo "$out" | grep -q 'Total params' &&
  test -z "$(ls cli_fdr)"
