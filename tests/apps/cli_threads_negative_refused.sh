#!/bin/sh
# A negative --threads is refused with exit status 2 (compare as train).
# Usage: cli_threads_negative_refused.sh MANTISSA
. "$(dirname "$0")/cli_test_lib.sh"
M=$1
cd "$dir" || exit 1

out=$("$M" compare --threads -4 2>&1)
test $? -eq 2 &&
  echo "$out" | grep -q -- '--threads must be at least 1, got -4'
