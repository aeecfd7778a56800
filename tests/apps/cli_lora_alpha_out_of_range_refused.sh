#!/bin/sh
# An absurd adapter scaling is refused before training: alpha 1e30 would overflow Adam's
# second moment, so the adapters would never move and the run would end at chance accuracy.
# Usage: cli_lora_alpha_out_of_range_refused.sh MANTISSA
. "$(dirname "$0")/cli_test_lib.sh"
M=$1
cd "$dir" || exit 1

out=$("$M" train --precision nf4 --lora-rank 8 --lora-alpha 1e30 --max-steps 1 --no-progress-bar 2>&1)
test $? -eq 2 &&
  echo "$out" | grep -q -- '--lora-alpha 1e+30 with --lora-rank 8 scales the adapters by 1.25e+29' &&
  echo "$out" | grep -q 'at most 1000 x --lora-rank (8000 here)'
