#!/bin/sh
# metrics.csv has Lightning's epoch and step columns; hparams.yaml holds the model's
# hyperparameters.
# Usage: cli_train_csv_logger_and_resume.sh MANTISSA
. "$(dirname "$0")/cli_test_lib.sh"
M=$1
cd "$dir" || exit 1

rm -rf cli_logs cli_ckpt &&
  "$M" train --epochs 1 --train-subset 512 --logger csv --log-dir cli_logs --checkpoint-dir cli_ckpt --no-progress-bar >/dev/null 2>&1 &&
  head -n 1 cli_logs/version_0/metrics.csv | grep -q '^epoch,.*val_loss,step$' &&
  grep -q '^model: "mlp"$' cli_logs/version_0/hparams.yaml &&
  grep -q '^hidden: "256"$' cli_logs/version_0/hparams.yaml &&
  "$M" train --epochs 2 --train-subset 512 --resume cli_ckpt/last.safetensors 2>&1 | grep -q 'epoch 2/2'
