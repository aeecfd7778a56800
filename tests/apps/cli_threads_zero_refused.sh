#!/bin/sh
# --threads 0 is refused with exit status 2.
# Usage: cli_threads_zero_refused.sh MANTISSA
. "$(dirname "$0")/cli_test_lib.sh"
M=$1
cd "$dir" || exit 1

out=$("$M" train --threads 0 2>&1)
test $? -eq 2 &&
  echo "$out" | grep -q -- '--threads must be at least 1, got 0'
