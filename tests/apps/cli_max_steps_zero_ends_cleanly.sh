#!/bin/sh
# --max-steps 0 trains nothing, says so, tests the initial weights and records nothing_trained.
# Usage: cli_max_steps_zero_ends_cleanly.sh MANTISSA
. "$(dirname "$0")/cli_test_lib.sh"
M=$1
cd "$dir" || exit 1

out=$("$M" train --max-steps 0 --train-subset 256 --metrics-json cli_steps0.json 2>&1) &&
  echo "$out" | grep -q 'nothing to train: --max-steps 0' &&
  echo "$out" | grep -q 'test accuracy of the final weights: 0\.' &&
  grep -q '"nothing_trained"' cli_steps0.json
