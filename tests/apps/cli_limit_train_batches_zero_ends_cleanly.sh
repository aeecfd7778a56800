#!/bin/sh
# --limit-train-batches 0 trains nothing and says why.
# Usage: cli_limit_train_batches_zero_ends_cleanly.sh MANTISSA
. "$(dirname "$0")/cli_test_lib.sh"
M=$1
cd "$dir" || exit 1

out=$("$M" train --limit-train-batches 0 --train-subset 256 2>&1) &&
  echo "$out" | grep -q 'nothing to train: --limit-train-batches 0 leaves no training batch'
