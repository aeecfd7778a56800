#!/bin/sh
# The GPT takes the Trainer's options (epochs, accumulation, clipping, batch limits, validation
# interval, the CSV logger): 4 optimizer steps, validation in metrics.csv.
# Usage: cli_gpt_trainer_options.sh MANTISSA
. "$(dirname "$0")/cli_test_lib.sh"
M=$1
cd "$dir" || exit 1

yes 'the quick brown fox jumps over the lazy dog' | head -n 60 > cli_gpt_opts.txt &&
  rm -rf cli_gpt_logs &&
  "$M" train --model gpt --layers 1 --width 32 --heads 2 --context 16 --sample-tokens 0 --no-progress-bar --text cli_gpt_opts.txt --epochs 2 --batch-size 4 --accumulate-grad-batches 2 --gradient-clip-val 0.5 --limit-train-batches 4 --val-check-interval 2 --logger csv --log-dir cli_gpt_logs --metrics-json cli_gpt_opts.json >/dev/null &&
  grep -q '"steps": 4' cli_gpt_opts.json &&
  grep -q val_loss cli_gpt_logs/version_0/metrics.csv
