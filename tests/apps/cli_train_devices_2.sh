#!/bin/sh
# The command line: --devices 2 starts mpirun itself (and sets the root variables itself);
# mpirun -np 2 mantissa train works on the GPT too. Rank 0 alone writes the metrics JSON.
# Usage: cli_train_devices_2.sh MANTISSA
. "$(dirname "$0")/cli_test_lib.sh"
M=$1
cd "$dir" || exit 1

rm -f cli_ddp.json &&
  "$M" train --devices 2 --train-subset 512 --epochs 1 --batch-size 64 --no-progress-bar --metrics-json cli_ddp.json > cli_ddp.txt 2>&1 &&
  grep -q '"world_size": 2' cli_ddp.json &&
  test $(grep -c '^epoch 1/1' cli_ddp.txt) -eq 1
