#!/bin/sh
# Resuming a run that already reached --epochs trains nothing, says so and tests the weights.
# Usage: cli_resume_finished_run_ends_cleanly.sh MANTISSA
. "$(dirname "$0")/cli_test_lib.sh"
M=$1
cd "$dir" || exit 1

rm -rf cli_done &&
  "$M" train --epochs 1 --train-subset 256 --checkpoint-dir cli_done --no-progress-bar >/dev/null &&
  out=$("$M" train --epochs 1 --train-subset 256 --resume cli_done/last.safetensors 2>&1) &&
  echo "$out" | grep -q 'has already trained 1 epoch and --epochs is 1' &&
  echo "$out" | grep -q 'test accuracy of the final weights'
