#!/bin/sh
# A 16-mixed run whose fp16 forward overflows does not end silently: the scaler's skipped
# steps and the non-finite validation loss are warned about (once each), and since the final
# weights' test loss is NaN the run ends with exit status 4 (cli.diverged_run_exit_status); a
# healthy run says neither.
# Usage: cli_fp16_overflowing_run_is_warned_about.sh MANTISSA
. "$(dirname "$0")/cli_test_lib.sh"
M=$1
cd "$dir" || exit 1

out=$("$M" train --train-subset 1024 --hidden 64 --epochs 1 --precision 16-mixed --lr 30 --no-progress-bar 2>&1)
test $? -eq 4 &&
  echo "$out" | grep -q 'warning: the loss scaler skipped [0-9]* of the 4 optimizer steps of epoch 1' &&
  echo "$out" | grep -q "warning: the validation metric 'val_loss' is nan" &&
  ! "$M" train --train-subset 1024 --hidden 64 --epochs 1 --precision 16-mixed --no-progress-bar 2>&1 | grep -q 'warning: the'
