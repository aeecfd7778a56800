#!/bin/sh
# --float32-matmul-precision medium trains to a test accuracy.
# Usage: cli_float32_matmul_precision_medium_trains.sh MANTISSA
. "$(dirname "$0")/cli_test_lib.sh"
M=$1
cd "$dir" || exit 1

out=$("$M" train --float32-matmul-precision medium --epochs 1 --train-subset 512 --no-progress-bar 2>&1) &&
  echo "$out" | grep -q 'final test accuracy: 0\.'
