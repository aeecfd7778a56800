#!/bin/sh
# Ctrl-C during `mantissa compare` or `mantissa bench` says that the command cannot be resumed
# and what to run instead (not "pass --checkpoint-dir", an option neither command has);
# compare still prints the table and writes --json/--html of the precisions that
# finished, marked "interrupted"; the exit status is the signal's (130).
# Usage: cli_compare_bench_interrupt.sh <mantissa binary>
set -u
cli="$1"
. "$(dirname "$0")/cli_test_lib.sh"
cmp="compare --model mlp --precisions 32-true,bf16-true --hidden 32 --threads 1 --train-subset 256
  --json $dir/c.json --html $dir/c.html"
# $1: the line to wait for in the output, then the compare arguments.
interrupt() {
  until_line="$1"
  shift
  rm -f "$dir/c.json" "$dir/c.html" "$dir/out"
  "$cli" $cmp "$@" >"$dir/out" 2>"$dir/err" &
  pid=$!
  wait_for_line "$until_line" "$dir/out"
  sleep 0.3
  kill -s INT "$pid"
  wait "$pid"
  rc=$?
  [ "$rc" = 130 ] || fail "exit status $rc, expected 130"
  grep -q -- "--checkpoint-dir" "$dir/err" && fail "the message names --checkpoint-dir"
  grep -q -F "a comparison cannot be resumed: run compare again" "$dir/err" ||
    fail "the message does not say the comparison cannot be resumed"
  [ -f "$dir/c.json" ] || fail "no --json report"
  [ -f "$dir/c.html" ] || fail "no --html report"
  grep -q '"interrupted": "interrupted by SIGINT' "$dir/c.json" || fail "the JSON is not marked interrupted"
  grep -q 'interrupted by SIGINT' "$dir/c.html" || fail "the HTML is not marked interrupted"
}
# In the timing rounds: both precisions trained, so both are reported.
interrupt '^timing:' --epochs 1 --timed-steps 50 --rounds 100000
grep -q -F "mantissa: interrupted by SIGINT in timing round " "$dir/err" || fail "timing: no message"
grep -q -F "every precision finished training" "$dir/err" || fail "timing: the message does not say what finished"
grep -q '^bf16-true ' "$dir/out" || fail "timing: no table row for bf16-true"
[ "$(grep -c '"precision": ' "$dir/c.json")" = 2 ] || fail "timing: the JSON does not hold both runs"
grep -q -x -F "results written to $dir/c.json" "$dir/out" || fail "timing: no 'results written to'"
# In the first precision's training: nothing finished; the message names what to run again.
interrupt '^epoch 2/' --epochs 100000
grep -q -F "mantissa: interrupted by SIGINT after step " "$dir/err" || fail "training: no message"
grep -q -F "of the 32-true run (precision 1 of 2): no precision finished training, none was timed; a comparison cannot be resumed: run compare again (\`--precisions 32-true,bf16-true\` for the precisions that did not finish)" \
  "$dir/err" || fail "training: the message does not say what to run again"
grep -q '"runs": \[\]' "$dir/c.json" || fail "training: the JSON holds a run"

# bench: no report, no --checkpoint-dir advice.
"$cli" bench --precisions 32-true,bf16-true --hidden 32 --threads 1 --steps 200 --rounds 100000 \
  >"$dir/out" 2>"$dir/err" &
pid=$!
sleep 3
kill -s INT "$pid"
wait "$pid"
rc=$?
[ "$rc" = 130 ] || fail "bench: exit status $rc, expected 130"
grep -q -- "--checkpoint-dir" "$dir/err" && fail "bench: the message names --checkpoint-dir"
grep -q "^mantissa: interrupted by SIGINT in round [0-9]* of 100000 (.*, after step [0-9]*); a benchmark cannot be resumed, and nothing was reported: run bench again" \
  "$dir/err" || fail "bench: no message saying a benchmark cannot be resumed"
exit 0
