#!/bin/sh
# Optimizer choice (docs/optimizers.md).
# Usage: cli_train_adamw8bit_reports_state_bytes.sh MANTISSA
. "$(dirname "$0")/cli_test_lib.sh"
M=$1
cd "$dir" || exit 1

"$M" train --optimizer adamw8bit --epochs 1 --train-subset 512 --metrics-json cli_8bit.json >/dev/null &&
  grep -q '"optimizer_state_bytes_per_parameter": 2\.' cli_8bit.json
