#!/bin/sh
# train --model cnn trains and records the model in its metrics JSON.
# Usage: cli_train_cnn.sh MANTISSA
. "$(dirname "$0")/cli_test_lib.sh"
M=$1
cd "$dir" || exit 1

"$M" train --model cnn --epochs 1 --train-subset 512 --metrics-json cli_cnn.json >/dev/null &&
  grep -q 'model.*cnn' cli_cnn.json
