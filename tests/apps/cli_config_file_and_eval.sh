#!/bin/sh
# --config: keys are flags (underscores allowed), the command line wins, unknown keys and deep
# nesting are errors; the resolved config lands beside the checkpoints; eval reports the
# checkpoint's accuracy, the same number the training run printed.
# Usage: cli_config_file_and_eval.sh MANTISSA
. "$(dirname "$0")/cli_test_lib.sh"
M=$1
cd "$dir" || exit 1

rm -rf cli_cfg &&
  mkdir cli_cfg &&
  echo '{"model": "mlp", "hidden": "32", "train_subset": 512, "epochs": 3, "no-progress-bar": true}' > cli_cfg/run.json &&
  out=$("$M" train --config cli_cfg/run.json --epochs 1 --checkpoint-dir cli_cfg/ckpt 2>&1) &&
  echo "$out" | grep -q '^epoch 1/1' &&
  grep -q '"train-subset": 512' cli_cfg/ckpt/config.json &&
  acc=$(echo "$out" | sed -n 's/^final test accuracy: \([0-9.]*\).*/\1/p') &&
  test -n "$acc" &&
  "$M" eval --checkpoint cli_cfg/ckpt/last.safetensors --hidden 32 2>/dev/null | grep -q "test accuracy $acc" &&
  echo '{"modle": 1}' > cli_cfg/bad.json &&
  ! "$M" train --config cli_cfg/bad.json 2>/dev/null &&
  echo '[[[[1]]]]' > cli_cfg/deep.json &&
  ! "$M" train --config cli_cfg/deep.json 2>/dev/null
