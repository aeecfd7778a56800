#!/bin/sh
# --val-check-interval 0 (0.0) is refused: it validated after every batch without a word.
# Usage: cli_val_check_interval_zero_is_refused.sh MANTISSA
. "$(dirname "$0")/cli_test_lib.sh"
M=$1
cd "$dir" || exit 1

! out=$("$M" train --val-check-interval 0 --max-steps 1 2>&1) &&
  echo "$out" | grep -q -- '--val-check-interval must be a fraction of an epoch in (0, 1\] or a batch count >= 1, got .0.'
