#!/bin/sh
# `bench --model gpt` refused --layers/--width/--heads/--context as unknown options, so only the
# full-size GPT (6x256, context 128) could be benchmarked. They now size it as in train: the
# header and the JSON name the size; an image model refuses them; --width must be divisible by
# --heads, said in the flags' names.
# Usage: cli_bench_gpt_size.sh <mantissa binary>
set -u
cli="$1"
. "$(dirname "$0")/cli_test_lib.sh"
yes 'the quick brown fox jumps over the lazy dog' | head -n 200 >"$dir/corpus.txt"
"$cli" bench --model gpt --layers 1 --width 32 --heads 2 --context 16 --text "$dir/corpus.txt" \
  --steps 2 --untimed-steps 0 --rounds 1 --precisions 32-true --threads 1 \
  --json "$dir/b.json" >"$dir/out" 2>"$dir/err" || fail "bench of a small GPT failed"
grep -q -F "mantissa bench: model gpt 1x32, 2 heads, context 16 (a sample is a 16-byte sequence)" \
  "$dir/out" || fail "the header does not name the GPT's size"
[ "$(json_number "$dir/b.json" layers)" = 1 ] && [ "$(json_number "$dir/b.json" width)" = 32 ] &&
  [ "$(json_number "$dir/b.json" heads)" = 2 ] && [ "$(json_number "$dir/b.json" context)" = 16 ] ||
  fail "the JSON does not record the GPT's size"
"$cli" bench --model mlp --layers 2 >"$dir/out" 2>"$dir/err"
[ $? = 2 ] || fail "--layers with --model mlp: not exit status 2"
grep -q -F "[bench] --layers, --width, --heads and --context size the GPT; they do not apply to --model mlp" \
  "$dir/err" || fail "--layers with --model mlp: no error naming the flags"
"$cli" bench --model gpt --width 30 --heads 4 >"$dir/out" 2>"$dir/err"
[ $? = 2 ] || fail "--width 30 --heads 4: not exit status 2"
grep -q -F "[bench] --width 30 must be divisible by --heads 4" "$dir/err" ||
  fail "--width 30 --heads 4: the error does not name the flags"
exit 0
