#!/bin/sh
# A device or FIFO as an output file is refused before the run and left as it is (the metrics
# were renamed over it: as root, --metrics-json /dev/null replaced /dev/null with a file).
# Usage: cli_device_or_fifo_output_is_refused.sh MANTISSA
. "$(dirname "$0")/cli_test_lib.sh"
M=$1
cd "$dir" || exit 1

rm -f cli_fifo &&
  mkfifo cli_fifo &&
  out=$("$M" train --max-steps 1 --metrics-json cli_fifo 2>&1)
test $? -eq 2 &&
  echo "$out" | grep -q "metrics-json 'cli_fifo' is a FIFO" &&
  ! echo "$out" | grep -q '^epoch' &&
  test -p cli_fifo &&
  out=$("$M" compare --json cli_fifo 2>&1)
test $? -eq 2 &&
  test -p cli_fifo
