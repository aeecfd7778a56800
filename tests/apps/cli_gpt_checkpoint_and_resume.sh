#!/bin/sh
# The GPT writes checkpoints under --checkpoint-dir and resumes from a step checkpoint to
# --max-steps.
# Usage: cli_gpt_checkpoint_and_resume.sh MANTISSA
. "$(dirname "$0")/cli_test_lib.sh"
M=$1
cd "$dir" || exit 1

yes 'the quick brown fox jumps over the lazy dog' | head -n 60 > cli_gpt_ckpt.txt &&
  rm -rf cli_gpt_ckpt &&
  "$M" train --model gpt --layers 1 --width 32 --heads 2 --context 16 --sample-tokens 0 --no-progress-bar --text cli_gpt_ckpt.txt --max-steps 5 --limit-train-batches 3 --checkpoint-dir cli_gpt_ckpt >/dev/null &&
  test -f cli_gpt_ckpt/last.safetensors &&
  "$M" train --model gpt --layers 1 --width 32 --heads 2 --context 16 --sample-tokens 0 --no-progress-bar --text cli_gpt_ckpt.txt --max-steps 5 --limit-train-batches 3 --resume cli_gpt_ckpt/epoch=0-step=3.safetensors --metrics-json cli_gpt_resume.json >/dev/null &&
  grep -q '"steps": 5' cli_gpt_resume.json
