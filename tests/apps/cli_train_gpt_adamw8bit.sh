#!/bin/sh
# The GPT trains with the 8-bit AdamW, named in its metrics JSON.
# Usage: cli_train_gpt_adamw8bit.sh MANTISSA
. "$(dirname "$0")/cli_test_lib.sh"
M=$1
cd "$dir" || exit 1

yes 'the quick brown fox jumps over the lazy dog' | head -n 200 > cli_gpt8.txt &&
  "$M" train --model gpt --optimizer adamw8bit --max-steps 3 --text cli_gpt8.txt --eval-interval 3 --sample-tokens 0 --metrics-json cli_gpt8.json >/dev/null &&
  grep -q '"optimizer": "adamw8bit"' cli_gpt8.json
