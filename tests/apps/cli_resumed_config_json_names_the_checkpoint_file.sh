#!/bin/sh
# A resumed run's config.json names the checkpoint file it resumed from (it recorded
# "resume": "last" or "best", which name whatever the directory holds when it is read).
# Usage: cli_resumed_config_json_names_the_checkpoint_file.sh MANTISSA
. "$(dirname "$0")/cli_test_lib.sh"
M=$1
cd "$dir" || exit 1

rm -rf cli_rcj &&
  R='--train-subset 256 --hidden 32 --checkpoint-dir cli_rcj --checkpoint-monitor val_loss --no-progress-bar' &&
  "$M" train $R --epochs 1 >/dev/null 2>&1 &&
  "$M" train $R --epochs 2 --resume last >/dev/null 2>&1 &&
  grep -q '"resume": "cli_rcj/last.safetensors"' cli_rcj/config.json &&
  "$M" train $R --epochs 3 --resume best >/dev/null 2>&1 &&
  best=$(sed -n 's/^ *"resume": "\(.*\)",*$/\1/p' cli_rcj/config.json) &&
  echo "$best" | grep -q '^cli_rcj/epoch=[01]-step=[0-9]*-val_loss=.*[.]safetensors$' &&
  test -f "$best"
