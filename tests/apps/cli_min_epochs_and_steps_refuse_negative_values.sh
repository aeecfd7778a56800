#!/bin/sh
# --min-epochs / --min-steps: a negative value is an error naming the flag and what it takes.
# Usage: cli_min_epochs_and_steps_refuse_negative_values.sh MANTISSA
. "$(dirname "$0")/cli_test_lib.sh"
M=$1
cd "$dir" || exit 1

out=$("$M" train --min-epochs -1 --early-stopping-monitor val_loss --max-steps 1 --train-subset 64 --no-progress-bar 2>&1)
test $? -eq 2 &&
  echo "$out" | grep -q -- '--min-epochs must be 0 (no minimum) or a number of epochs, got -1' &&
  out=$("$M" train --min-steps -2 --early-stopping-monitor val_loss --max-steps 1 --train-subset 64 --no-progress-bar 2>&1)
test $? -eq 2 &&
  echo "$out" | grep -q -- '--min-steps must be 0 (no minimum) or a number of optimizer steps, got -2'
