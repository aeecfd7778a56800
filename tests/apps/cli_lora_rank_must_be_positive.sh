#!/bin/sh
# --lora-rank -1 is refused naming the flag.
# Usage: cli_lora_rank_must_be_positive.sh MANTISSA
. "$(dirname "$0")/cli_test_lib.sh"
M=$1
cd "$dir" || exit 1

"$M" train --model mlp --precision nf4 --lora-rank -1 2>&1 | grep -q -- '--lora-rank must be a positive rank'
