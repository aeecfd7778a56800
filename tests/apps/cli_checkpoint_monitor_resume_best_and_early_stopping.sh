#!/bin/sh
# Lightning's flags: the best checkpoint by a monitor, --resume best, early stopping's
# message, a fast_dev_run that writes nothing.
# Usage: cli_checkpoint_monitor_resume_best_and_early_stopping.sh MANTISSA
. "$(dirname "$0")/cli_test_lib.sh"
M=$1
cd "$dir" || exit 1

rm -rf cli_best &&
  "$M" train --epochs 2 --train-subset 512 --no-progress-bar --checkpoint-dir cli_best --checkpoint-monitor val_acc --checkpoint-mode max --save-top-k 1 --early-stopping-monitor val_loss --early-stopping-patience 5 >/dev/null &&
  test $(ls cli_best | grep -c val_acc) -eq 1 &&
  out=$("$M" train --epochs 3 --train-subset 512 --no-progress-bar --checkpoint-dir cli_best --resume best 2>&1) &&
  echo "$out" | grep -q '^epoch 3/3' &&
  ! echo "$out" | grep -q '^epoch 1/3' &&
  out=$("$M" train --resume best 2>&1)
test $? -eq 2 &&
  echo "$out" | grep -q -- '--checkpoint-dir'
