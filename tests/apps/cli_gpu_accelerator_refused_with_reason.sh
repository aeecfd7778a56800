#!/bin/sh
# --accelerator gpu without a usable GPU is refused naming the precision and the accelerator.
# Usage: cli_gpu_accelerator_refused_with_reason.sh MANTISSA
. "$(dirname "$0")/cli_test_lib.sh"
M=$1
cd "$dir" || exit 1

out=$("$M" train --accelerator gpu --precision bf16-mixed 2>&1)
test $? -eq 2 &&
  echo "$out" | grep -q "precision 'bf16-mixed' cannot run on accelerator 'gpu'"
