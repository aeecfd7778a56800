#!/bin/sh
# train takes the Trainer's options together (step limit, accumulation, value clipping, batch
# limits, mid-epoch validation) and records the step losses.
# Usage: cli_train_trainer_options.sh MANTISSA
. "$(dirname "$0")/cli_test_lib.sh"
M=$1
cd "$dir" || exit 1

"$M" train --epochs 1 --train-subset 512 --batch-size 64 --max-steps 3 --accumulate-grad-batches 2 --gradient-clip-val 1 --gradient-clip-algorithm value --limit-train-batches 8 --val-check-interval 0.5 --no-progress-bar --metrics-json cli_trainer.json >/dev/null 2>&1 &&
  grep -q step_losses cli_trainer.json
