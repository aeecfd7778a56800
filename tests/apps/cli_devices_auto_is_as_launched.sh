#!/bin/sh
# --devices auto (Lightning's devices="auto") is the default, as launched: one process here.
# ... and a word that is neither a count nor auto says auto is accepted too.
# Usage: cli_devices_auto_is_as_launched.sh MANTISSA
. "$(dirname "$0")/cli_test_lib.sh"
M=$1
cd "$dir" || exit 1

rm -f cli_devices_auto.json &&
  "$M" train --devices auto --fast-dev-run 1 --threads 1 --no-progress-bar --metrics-json cli_devices_auto.json > /dev/null 2>&1 &&
  grep -q '"world_size": 1' cli_devices_auto.json &&
  out=$("$M" train --devices two 2>&1)
test $? -eq 2 &&
  echo "$out" | grep -q -- "--devices: 'two' is neither a number of devices nor auto (expected a whole number such as 2, or auto)"
