#!/bin/sh
# A resumed run with nothing left to train leaves the directory's config.json as the run
# behind its checkpoints wrote it, not this run's --epochs 1 --lr 0.5, so that replaying it
# repeats the run that made the checkpoints.
# Usage: cli_nothing_to_train_keeps_config_json.sh MANTISSA
. "$(dirname "$0")/cli_test_lib.sh"
M=$1
cd "$dir" || exit 1

rm -rf cli_ntc cli_ntc.json &&
  "$M" train --epochs 2 --train-subset 256 --checkpoint-dir cli_ntc --no-progress-bar >/dev/null 2>&1 &&
  cp cli_ntc/config.json cli_ntc.json &&
  out=$("$M" train --epochs 1 --train-subset 300 --lr 0.5 --checkpoint-dir cli_ntc --resume last --no-progress-bar 2>&1) &&
  echo "$out" | grep -q 'nothing to train: the checkpoint .cli_ntc/last.safetensors. has already trained 2 epochs and --epochs is 1' &&
  cmp cli_ntc/config.json cli_ntc.json &&
  grep -q '"epochs": 2' cli_ntc/config.json
