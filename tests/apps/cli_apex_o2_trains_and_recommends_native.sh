#!/bin/sh
# Apex levels: the recommendation to use the native backend, and --amp-level without apex.
# Usage: cli_apex_o2_trains_and_recommends_native.sh MANTISSA
. "$(dirname "$0")/cli_test_lib.sh"
M=$1
cd "$dir" || exit 1

out=$("$M" train --precision 16-mixed --amp-backend apex --amp-level O2 --epochs 1 --train-subset 512 --no-progress-bar 2>&1) &&
  echo "$out" | grep -q 'the native backend is recommended' &&
  echo "$out" | grep -q 'final test accuracy: 0\.'
