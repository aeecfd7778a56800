#!/bin/sh
# --devices given as a count must be positive (Lightning: "should be an int > 0"): -1 (the
# library's "as launched", what auto maps to) and 0 were taken as auto / refused vaguely. The
# config.json of a --devices auto run says auto, so replaying it is not refused as -1.
# Usage: cli_devices_must_be_positive_or_auto.sh MANTISSA
. "$(dirname "$0")/cli_test_lib.sh"
M=$1
cd "$dir" || exit 1

for v in -1 0 -5; do
  out=$("$M" train --devices $v --max-steps 1 --train-subset 64 2>&1)
  test $? -eq 2 || exit 1
  echo "$out" | grep -q -- "--devices: $v is not a number of devices: give a positive count such as 2, or auto" || exit 1
done
rm -rf cli_devices_cfg &&
  "$M" train --devices auto --max-steps 1 --train-subset 64 --threads 1 --no-progress-bar --checkpoint-dir cli_devices_cfg > /dev/null 2>&1 &&
  grep -q '"devices": "auto"' cli_devices_cfg/config.json &&
  "$M" train --config cli_devices_cfg/config.json --checkpoint-dir cli_devices_cfg2 > /dev/null 2>&1
