#!/bin/sh
# --log-every-n-steps 0 is refused with exit status 2.
# Usage: cli_log_every_n_steps_must_be_positive.sh MANTISSA
. "$(dirname "$0")/cli_test_lib.sh"
M=$1
cd "$dir" || exit 1

out=$("$M" train --log-every-n-steps 0 2>&1)
test $? -eq 2 &&
  echo "$out" | grep -q -- '--log-every-n-steps must be at least 1, got 0'
