#!/bin/sh
# Adapter settings without --lora-rank change nothing: the run says so.
# Usage: cli_lora_settings_without_rank_warn.sh MANTISSA
. "$(dirname "$0")/cli_test_lib.sh"
M=$1
cd "$dir" || exit 1

out=$("$M" train --hidden 32 --train-subset 256 --max-steps 1 --lora-alpha 8 --no-progress-bar 2>&1) &&
  echo "$out" | grep -q 'lora-alpha has no effect without --lora-rank'
