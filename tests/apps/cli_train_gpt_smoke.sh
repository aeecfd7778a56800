#!/bin/sh
# The GPT trains a few bf16-mixed steps on a small text, with its loss in nats per character
# and its token rate in the metrics JSON.
# Usage: cli_train_gpt_smoke.sh MANTISSA
. "$(dirname "$0")/cli_test_lib.sh"
M=$1
cd "$dir" || exit 1

yes 'the quick brown fox jumps over the lazy dog' | head -n 200 > cli_gpt.txt &&
  "$M" train --model gpt --max-steps 3 --text cli_gpt.txt --eval-interval 3 --sample-tokens 16 --precision bf16-mixed --metrics-json cli_gpt.json >/dev/null &&
  grep -q val_loss_nats_per_char cli_gpt.json &&
  grep -q tokens_per_second cli_gpt.json
