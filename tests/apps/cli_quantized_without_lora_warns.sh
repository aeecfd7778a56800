#!/bin/sh
# A quantized precision without adapters trains only biases: the run says so.
# Usage: cli_quantized_without_lora_warns.sh MANTISSA
. "$(dirname "$0")/cli_test_lib.sh"
M=$1
cd "$dir" || exit 1

out=$("$M" train --precision nf4 --max-steps 1 --train-subset 256 --no-progress-bar 2>&1) &&
  echo "$out" | grep -q "'nf4' freezes the quantized Linear weights" &&
  out=$("$M" train --precision nf4 --lora-rank 2 --max-steps 1 --train-subset 256 --no-progress-bar 2>&1) &&
  ! echo "$out" | grep -q 'freezes'
