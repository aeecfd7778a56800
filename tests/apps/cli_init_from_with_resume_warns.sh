#!/bin/sh
# --init-from beside --resume: the checkpoint restores every weight of the run it continues (which
# began from its own --init-from), so --init-from changes nothing; a warning names it, and the
# resumed run ends as one resumed without it.
# Usage: cli_init_from_with_resume_warns.sh <mantissa binary>
set -u
cli="$1"
. "$(dirname "$0")/cli_test_lib.sh"
mlp="train --model mlp --train-subset 256 --batch-size 128 --threads 1 --no-progress-bar"
"$cli" $mlp --epochs 1 --checkpoint-dir "$dir/plain" >"$dir/plain.txt" 2>&1 || fail "the plain run failed"
init="--init-from $dir/plain/last.safetensors"
q="--precision nf4 --lora-rank 4"
"$cli" $mlp --epochs 1 $q $init --checkpoint-dir "$dir/first" >"$dir/first.txt" 2>&1 ||
  fail "the QLoRA run failed"
ck="$dir/first/last.safetensors"
"$cli" $mlp --epochs 2 $q $init --resume "$ck" --checkpoint-dir "$dir/with" >"$dir/with.txt" 2>&1 ||
  fail "the resume with --init-from failed"
grep -q -F -- "mantissa: warning: --init-from has no effect with --resume" "$dir/with.txt" ||
  fail "--init-from with --resume: no warning"
"$cli" $mlp --epochs 2 $q --resume "$ck" --checkpoint-dir "$dir/without" >"$dir/without.txt" 2>&1 ||
  fail "the resume without --init-from failed"
! grep -q -F -- "--init-from has no effect" "$dir/without.txt" || fail "warned without --init-from"
# The same second epoch to the last digit printed (the speeds aside).
result() { sed -n 's/^epoch 2\/2  loss \([0-9.]*\)  train acc \([0-9.]*\) .* test loss \([0-9.]*\)  test acc \([0-9.]*\)$/\1 \2 \3 \4/p' "$1"; }
[ -n "$(result "$dir/with.txt")" ] || fail "no second epoch in the resume with --init-from"
[ "$(result "$dir/with.txt")" = "$(result "$dir/without.txt")" ] ||
  fail "the two resumed runs differ: $(result "$dir/with.txt") against $(result "$dir/without.txt")"
exit 0
