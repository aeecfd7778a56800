#!/bin/sh
# --amp-backend apex and --amp-level reach only the precisions the Trainer builds from its
# `precision` string; the bitsandbytes modes come as a plugin, which refuses both flags with the
# errors 32-true, bf16-mixed, ... give, in the flags' names (not an nf4 run with --amp-backend
# apex trained as plain nf4).
# Usage: cli_quantized_refuses_apex.sh <mantissa binary>
set -u
cli="$1"
. "$(dirname "$0")/cli_test_lib.sh"
mlp="train --model mlp --epochs 1 --train-subset 256 --threads 1 --no-progress-bar"

"$cli" $mlp --precision nf4 --amp-backend apex --metrics-json "$dir/apex.json" >"$dir/apex.txt" 2>&1
[ $? -eq 2 ] || fail "nf4 --amp-backend apex: not refused with status 2"
grep -q -x -F -- "mantissa: error: [train] --amp-backend apex runs with --precision 16-mixed only, got --precision 'nf4'; leave --amp-backend out (native, the default) for other precisions" "$dir/apex.txt" ||
  fail "nf4 --amp-backend apex: not the expected error"
[ ! -e "$dir/apex.json" ] || fail "nf4 --amp-backend apex: metrics written"

"$cli" $mlp --precision int8-training --amp-level O1 >"$dir/level.txt" 2>&1
[ $? -eq 2 ] || fail "int8-training --amp-level O1: not refused with status 2"
grep -q -x -F -- "mantissa: error: [train] --amp-level 'O1' applies to --amp-backend apex (with --precision 16-mixed) only; leave it out, or add --amp-backend apex" "$dir/level.txt" ||
  fail "int8-training --amp-level O1: not the expected error"

# As for 32-true.
"$cli" $mlp --precision 32-true --amp-level O1 >"$dir/fp32.txt" 2>&1
[ $? -eq 2 ] || fail "32-true --amp-level O1: not refused with status 2"
exit 0
