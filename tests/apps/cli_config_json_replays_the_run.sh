#!/bin/sh
# A run's config.json repeats it: the same number of steps and the same result (1.0 stays a
# fraction of the batches, not one batch), for an image model and for the GPT (whose config
# leaves out the image models' flags and the defaults it does not share).
# Usage: cli_config_json_replays_the_run.sh MANTISSA
. "$(dirname "$0")/cli_test_lib.sh"
M=$1
cd "$dir" || exit 1

rm -rf cli_rep &&
  a=$("$M" train --train-subset 512 --epochs 2 --hidden 32 --no-progress-bar --checkpoint-dir cli_rep/a 2>&1 | grep '^final test accuracy' | cut -d' ' -f4) &&
  test -n "$a" &&
  b=$("$M" train --config cli_rep/a/config.json --checkpoint-dir cli_rep/b 2>&1 | grep '^final test accuracy' | cut -d' ' -f4) &&
  test "$a" = "$b" &&
  g=$("$M" train --model gpt --max-steps 2 --layers 1 --width 32 --heads 2 --context 16 --sample-tokens 0 --no-progress-bar --checkpoint-dir cli_rep/g 2>&1 | grep '^final validation loss') &&
  test -n "$g" &&
  h=$("$M" train --config cli_rep/g/config.json --checkpoint-dir cli_rep/h 2>&1 | grep '^final validation loss') &&
  test "$(echo $g | cut -d' ' -f4)" = "$(echo $h | cut -d' ' -f4)"
