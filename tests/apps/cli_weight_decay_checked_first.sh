#!/bin/sh
# A negative or non-finite --weight-decay is refused up front naming the flag, as --lr is (a
# missing data directory or text is not even looked at), for every model; not after the data
# and model are loaded, as "[AdamW] Invalid weight_decay value: -1", naming no flag.
# Usage: cli_weight_decay_checked_first.sh <mantissa binary>
set -u
cli="$1"
. "$(dirname "$0")/cli_test_lib.sh"
for wd in -1 nan inf; do
  for model in "--model mlp --data-dir $dir/none" "--model cnn --data-dir $dir/none" \
    "--model gpt --text $dir/none.txt"; do
    "$cli" train $model --weight-decay $wd --no-progress-bar >"$dir/out" 2>"$dir/err"
    [ $? = 2 ] || fail "$model --weight-decay $wd: not exit status 2"
    # nan and inf are not decimal numbers: refused as the command line is read.
    if [ $wd = -1 ]; then
      expected="mantissa: error: [train] --weight-decay must be a finite number >= 0, got $wd"
    else
      expected="mantissa: error: [command line] --weight-decay: '$wd' is not a number (expected a number such as 0.01, the default); write it in decimal, such as 0.001 or 1e-3 (see --help)"
    fi
    grep -q -x -F -- "$expected" "$dir/err" ||
      fail "$model --weight-decay $wd: the error does not name the flag first"
  done
done
# 0 is a weight decay (none).
yes 'the quick brown fox jumps over the lazy dog' | head -n 60 >"$dir/corpus.txt"
"$cli" train --model gpt --layers 1 --width 16 --heads 2 --context 8 --max-steps 1 \
  --sample-tokens 0 --no-progress-bar --text "$dir/corpus.txt" --weight-decay 0 >"$dir/out" 2>&1 ||
  fail "--weight-decay 0 refused"
exit 0
