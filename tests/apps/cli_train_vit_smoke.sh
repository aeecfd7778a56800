#!/bin/sh
# Transformers: vit like mlp; gpt on a small text file written here.
# Usage: cli_train_vit_smoke.sh MANTISSA
. "$(dirname "$0")/cli_test_lib.sh"
M=$1
cd "$dir" || exit 1

"$M" train --model vit --epochs 1 --train-subset 256 --metrics-json cli_vit.json >/dev/null &&
  grep -q '"model": "vit"' cli_vit.json
