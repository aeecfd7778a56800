#!/bin/sh
# Redirected to one file (`> log 2>&1`), stdout was fully buffered: the error of a run that
# failed after printing its start banner and model summary came first in the file, the banner
# after it. Lines now keep the order they were printed in.
# Usage: cli_log_order.sh <mantissa binary>
set -u
cli="$1"
. "$(dirname "$0")/cli_test_lib.sh"

# line_of PATTERN FILE: the number of the first line of FILE matching the grep PATTERN.
line_of() { grep -n -m 1 -- "$1" "$2" | cut -d: -f1; }

# check_order LOG: the banner, then the model summary, then the error.
check_order() {
  banner=$(line_of '^mantissa train: model' "$1")
  summary=$(line_of 'Trainable params' "$1")
  error=$(line_of '^mantissa: error' "$1")
  [ -n "$banner" ] && [ -n "$summary" ] && [ -n "$error" ] ||
    fail "$1: banner, model summary or error missing"
  [ "$banner" -lt "$summary" ] && [ "$summary" -lt "$error" ] ||
    fail "$1: out of order: banner at line $banner, summary at $summary, error at $error"
}

# A GPT run that diverges at its first step (exit status 4) after its banner and summary.
yes 'the quick brown fox jumps over the lazy dog' | head -n 60 >"$dir/corpus"
"$cli" train --model gpt --layers 1 --width 16 --heads 2 --context 8 --max-steps 3 \
  --sample-tokens 0 --no-progress-bar --text "$dir/corpus" --precision 16-true --lr 1e30 \
  >"$dir/gpt.log" 2>&1
[ $? = 4 ] || fail "the diverging GPT run did not end with exit status 4"
check_order "$dir/gpt.log"

# An image model that diverges the same way.
"$cli" train --model mlp --hidden 8 --train-subset 256 --batch-size 64 --max-steps 3 \
  --no-progress-bar --precision 16-true --lr 1e30 >"$dir/mlp.log" 2>&1
[ $? = 4 ] || fail "the diverging image run did not end with exit status 4"
check_order "$dir/mlp.log"
exit 0
