#!/bin/sh
# --lora-dropout outside [0, 1) is an error naming the flag (it was the LoRA layer's own).
# Usage: cli_lora_dropout_out_of_range_names_the_flag.sh MANTISSA
. "$(dirname "$0")/cli_test_lib.sh"
M=$1
cd "$dir" || exit 1

! out=$("$M" train --precision nf4 --lora-rank 2 --lora-dropout 1.5 --max-steps 1 --train-subset 64 --no-progress-bar 2>&1) &&
  echo "$out" | grep -q -- '--lora-dropout must be a probability in \[0, 1) (0.05-0.1 are usual), got 1.5'
