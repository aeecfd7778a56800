#!/bin/sh
# A last step whose loss is finite but whose update leaves NaN weights ends the run with the
# divergence error (it reported "test loss -nan" and exit 0); compare reports a precision that
# diverges in its timing steps in its row and still writes its reports.
# Usage: cli_nan_weights_after_the_last_step_are_divergence.sh MANTISSA
. "$(dirname "$0")/cli_test_lib.sh"
M=$1
cd "$dir" || exit 1

! out=$("$M" train --model mlp --train-subset 256 --epochs 1 --lr 1e308 --no-progress-bar 2>&1) &&
  echo "$out" | grep -q -- 'the weights became non-finite in optimizer step 1 (epoch 1) in 32-true (net.0.weight holds nan)' &&
  rm -f cli_cmp_div.json &&
  out=$("$M" compare --model mlp --precisions 32-true,bf16-true --train-subset 256 --batch-size 256 --epochs 1 --lr 3000 --rounds 1 --timed-steps 30 --untimed-steps 1 --quiet --json cli_cmp_div.json 2>&1)
echo "$out" | grep -q -- '32-true      diverged: in the timing steps: \[Trainer\] the loss became' &&
  test -s cli_cmp_div.json
