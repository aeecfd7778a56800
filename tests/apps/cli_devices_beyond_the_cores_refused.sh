#!/bin/sh
# --devices starts every rank on this machine: far more than the cores is refused before any
# process starts (--devices 100000 would spawn ranks until the machine gave out).
# Usage: cli_devices_beyond_the_cores_refused.sh MANTISSA
. "$(dirname "$0")/cli_test_lib.sh"
M=$1
cd "$dir" || exit 1

out=$("$M" train --devices 100000 --max-steps 1 2>&1)
test $? -eq 2 &&
  echo "$out" | grep -q 'devices 100000 would start 100000 ranks on this machine'
