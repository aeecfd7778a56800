#!/bin/sh
# --threads beyond the machine's cores trains, with a warning that it is slower.
# Usage: cli_threads_above_cores_warns.sh MANTISSA
. "$(dirname "$0")/cli_test_lib.sh"
M=$1
cd "$dir" || exit 1

out=$("$M" train --threads $(($(nproc) + 1)) --max-steps 1 --train-subset 256 --no-progress-bar 2>&1) &&
  echo "$out" | grep -q 'cores of this machine; expect it to be slower'
