#!/bin/sh
# A GPT run resumed from a checkpoint already at --max-steps says there is nothing to train,
# as the image models do; its metrics JSON has nothing_trained and no made-up speeds.
# Usage: cli_gpt_resume_at_max_steps_nothing_to_train.sh MANTISSA
. "$(dirname "$0")/cli_test_lib.sh"
M=$1
cd "$dir" || exit 1

rm -rf cli_gnt &&
  yes 'the quick brown fox jumps over the lazy dog' | head -n 60 > cli_gnt.txt &&
  G='--model gpt --layers 1 --width 32 --heads 2 --context 16 --max-steps 2 --sample-tokens 0 --no-progress-bar --text cli_gnt.txt' &&
  "$M" train $G --checkpoint-dir cli_gnt >/dev/null 2>&1 &&
  out=$("$M" train $G --resume cli_gnt/last.safetensors --metrics-json cli_gnt.json 2>&1) &&
  echo "$out" | grep -q "nothing to train: the checkpoint 'cli_gnt/last.safetensors' is already at step 2 and --max-steps is 2" &&
  echo "$out" | grep -q '^validation loss of the final weights' &&
  ! echo "$out" | grep -q 'tokens/s' &&
  grep -q '"nothing_trained": "the checkpoint' cli_gnt.json &&
  grep -q '"tokens_per_second": null' cli_gnt.json &&
  grep -q '"samples_per_second": null' cli_gnt.json
