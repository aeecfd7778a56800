#!/bin/sh
# The image models' flags are ignored by the GPT like any other model's flags: each is a
# warning naming it and why, and the run goes on to its end.
# Usage: cli_gpt_ignores_image_flags.sh MANTISSA
. "$(dirname "$0")/cli_test_lib.sh"
M=$1
cd "$dir" || exit 1

yes 'the quick brown fox jumps over the lazy dog' | head -n 60 > cli_gpt_ign.txt &&
  out=$("$M" train --model gpt --layers 1 --width 32 --heads 2 --context 16 --sample-tokens 0 --no-progress-bar --text cli_gpt_ign.txt --max-steps 2 --hidden 64 --patch 4 --pool mean --train-subset 10 --data-dir cli_gpt_ign_none --lr-schedule cosine 2>&1) &&
  echo "$out" | grep -q -- '--hidden sets the hidden sizes of --model mlp only: --model gpt ignores it (its size is --layers, --width, --heads)' &&
  echo "$out" | grep -q -- '--patch applies to --model vit only: --model gpt ignores it' &&
  echo "$out" | grep -q -- '--pool applies to --model vit only: --model gpt ignores it' &&
  echo "$out" | grep -q -- '--train-subset counts the training images of the image models: --model gpt ignores it (use --limit-train-batches)' &&
  echo "$out" | grep -q -- '--data-dir is the Fashion-MNIST directory of the image models: --model gpt ignores it (it reads --text)' &&
  echo "$out" | grep -q -- '--lr-schedule applies to the image models only: --model gpt ignores it' &&
  echo "$out" | grep -q '^final validation loss' &&
  ! echo "$out" | grep -q 'error'
