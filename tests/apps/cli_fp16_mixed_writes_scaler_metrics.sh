#!/bin/sh
# A 16-mixed run's metrics JSON records its loss scaler: the final scale and the skipped steps.
# Usage: cli_fp16_mixed_writes_scaler_metrics.sh MANTISSA
. "$(dirname "$0")/cli_test_lib.sh"
M=$1
cd "$dir" || exit 1

"$M" train --precision 16 --epochs 1 --train-subset 512 --metrics-json cli_fp16.json >/dev/null 2>&1 &&
  grep -q final_loss_scale cli_fp16.json &&
  grep -q skipped_steps cli_fp16.json
