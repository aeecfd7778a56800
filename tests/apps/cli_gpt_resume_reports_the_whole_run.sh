#!/bin/sh
# A GPT run resumed from a step checkpoint (saved at a validation boundary, before that
# validation) reports the whole run: the same validation steps, curves and training losses
# in its metrics JSON as the run that was never stopped.
# Usage: cli_gpt_resume_reports_the_whole_run.sh MANTISSA
. "$(dirname "$0")/cli_test_lib.sh"
M=$1
cd "$dir" || exit 1

rm -rf cli_gres &&
  G='--model gpt --layers 1 --width 32 --heads 2 --context 16 --max-steps 8 --eval-interval 2 --sample-tokens 0 --no-progress-bar' &&
  "$M" train $G --checkpoint-dir cli_gres/a --every-n-train-steps 4 --metrics-json cli_gres/a.json >/dev/null 2>&1 &&
  "$M" train $G --checkpoint-dir cli_gres/b --resume cli_gres/a/epoch=0-step=4.safetensors --metrics-json cli_gres/b.json >/dev/null 2>&1 &&
  for k in val_loss_steps val_loss_curve train_loss; do
    sed -n "/\"$k\": \[/,/\]/p" cli_gres/a.json > cli_gres/a.$k &&
      test $(wc -l < cli_gres/a.$k) -eq 6 &&
      sed -n "/\"$k\": \[/,/\]/p" cli_gres/b.json | cmp -s - cli_gres/a.$k || exit 1
  done
