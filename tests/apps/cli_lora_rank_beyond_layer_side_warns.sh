#!/bin/sh
# A LoRA rank above a layer's smaller side is accepted (as peft) but named; rank 2 says nothing;
# a rank too large to allocate is an error naming --lora-rank (not only the allocator).
# Usage: cli_lora_rank_beyond_layer_side_warns.sh MANTISSA
. "$(dirname "$0")/cli_test_lib.sh"
M=$1
cd "$dir" || exit 1

out=$("$M" train --precision nf4 --lora-rank 12 --max-steps 1 --train-subset 256 --no-progress-bar 2>&1) &&
  echo "$out" | grep -q 'lora-rank 12 exceeds the smaller side of 1 of the 2 adapted layers: 2 (10x256)' &&
  out=$("$M" train --precision nf4 --lora-rank 2 --max-steps 1 --train-subset 256 --no-progress-bar 2>&1) &&
  ! echo "$out" | grep -q 'exceeds the smaller side' &&
  out=$("$M" train --precision nf4 --lora-rank 2147483647 --max-steps 1 --train-subset 256 --no-progress-bar 2>&1)
test $? -eq 2 &&
  echo "$out" | grep -q 'lora-rank 2147483647 is beyond any layer' &&
  out=$(ulimit -v 3000000 && "$M" train --precision nf4 --lora-rank 600000 --max-steps 1 --train-subset 256 --no-progress-bar 2>&1)
test $? -eq 2 &&
  echo "$out" | grep -q 'lora-rank 600000 asks for adapters larger than this machine can hold'
