#!/bin/sh
# Conflicting flags: one process per device is not --devices 2 (it started two full runs).
# Usage: cli_single_device_with_devices_2_refused.sh MANTISSA
. "$(dirname "$0")/cli_test_lib.sh"
M=$1
cd "$dir" || exit 1

out=$("$M" train --strategy single_device --devices 2 --epochs 1 --train-subset 64 2>&1)
test $? -eq 2 &&
  echo "$out" | grep -q -- '--strategy single_device' &&
  echo "$out" | grep -q -- '--devices 2'
