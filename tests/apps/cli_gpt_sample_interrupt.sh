#!/bin/sh
# Ctrl-C / SIGTERM during the GPT's final sample was not looked at: the sample ran to the end
# of --sample-tokens (hours for a typo of a few zeros) until a second signal or SIGKILL, and
# the metrics JSON, written after the sample, was lost. The sample now stops at the signal: the
# bytes generated are kept (printed, and in the metrics JSON with
# "sample_interrupted_after_bytes"), the metrics JSON is written, the message says training had
# finished and where the weights are, and the exit status is the signal's (130, 143).
# --sample-tokens above 1,000,000 is refused naming the flag and the limit.
# Usage: cli_gpt_sample_interrupt.sh <mantissa binary>
set -u
cli="$1"
. "$(dirname "$0")/cli_test_lib.sh"
yes 'the quick brown fox jumps over the lazy dog' | head -n 60 >"$dir/corpus.txt"
gpt="train --model gpt --layers 1 --width 16 --heads 2 --context 8 --max-steps 1 --threads 1
  --no-progress-bar --text $dir/corpus.txt"
# $1: the signal, $2: the exit status expected.
interrupt() {
  rm -rf "$dir/ck" "$dir/m.json" "$dir/out"
  "$cli" $gpt --sample-tokens 1000000 --checkpoint-dir "$dir/ck" --metrics-json "$dir/m.json" \
    >"$dir/out" 2>"$dir/err.$1" &
  pid=$!
  # Training has finished at the validation line of step 1; the sample (a million bytes, many
  # seconds) follows.
  wait_for_line '^step 1/1' "$dir/out"
  sleep 0.5
  kill -s "$1" "$pid"
  wait "$pid"
  rc=$?
  [ "$rc" = "$2" ] || fail "$1: exit status $rc, expected $2"
  grep -q -F "mantissa: interrupted by SIG$1 while generating the sample, after " "$dir/err.$1" ||
    fail "$1: no interrupt message naming the sample"
  grep -q -F " of 1000000 bytes; training had finished at step 1; the trained weights are in $dir/ck/last.safetensors" \
    "$dir/err.$1" || fail "$1: the message does not say where the weights are"
  grep -q '^sample (temperature 0.8, top-k 40; interrupted after [0-9]* of 1000000 bytes):$' \
    "$dir/out" || fail "$1: the partial sample is not printed"
  [ -f "$dir/m.json" ] || fail "$1: no metrics JSON"
  grep -q "\"interrupted_by\": \"SIG$1\"" "$dir/m.json" || fail "$1: metrics JSON lacks interrupted_by"
  n=$(json_number "$dir/m.json" sample_interrupted_after_bytes)
  [ -n "$n" ] && [ "$n" -lt 1000000 ] || fail "$1: metrics JSON lacks sample_interrupted_after_bytes"
  grep -q '"sample": "The ' "$dir/m.json" || fail "$1: metrics JSON lacks the partial sample"
  grep -q '"val_loss_nats_per_char": [0-9]' "$dir/m.json" || fail "$1: metrics JSON lacks the final loss"
}
interrupt INT 130
interrupt TERM 143
# Without --checkpoint-dir the message says the weights were not saved.
"$cli" $gpt --sample-tokens 1000000 >"$dir/out" 2>"$dir/err.nock" &
pid=$!
wait_for_line '^step 1/1' "$dir/out"
sleep 0.5
kill -s INT "$pid"
wait "$pid"
[ $? = 130 ] || fail "no checkpoint dir: not exit status 130"
grep -q -F "training had finished at step 1; the trained weights were not saved (pass --checkpoint-dir or --save-weights to keep them)" \
  "$dir/err.nock" || fail "no checkpoint dir: the message does not say the weights were not saved"
# The limit.
"$cli" $gpt --sample-tokens 1000001 >"$dir/out" 2>"$dir/err.limit"
[ $? = 2 ] || fail "--sample-tokens 1000001: not exit status 2"
grep -q -F "mantissa: error: [train] --sample-tokens must be at most 1000000 " "$dir/err.limit" ||
  fail "--sample-tokens 1000001: the error does not name the flag and the limit"
exit 0
