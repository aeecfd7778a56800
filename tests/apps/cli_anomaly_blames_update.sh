#!/bin/sh
# --detect-anomaly names the first non-finite value in the order it arose. A 16-true run at
# --lr 1e6 overflows in its first optimizer step: with and without the flag the error blames
# that step and net.0.weight (with the flag it said "an input was already non-finite ... check
# the batch", blaming the next forward's input, the broken weight).
# Usage: cli_anomaly_blames_update.sh <mantissa binary>
set -u
cli="$1"
. "$(dirname "$0")/cli_test_lib.sh"
run="train --precision 16-true --lr 1e6 --train-subset 512 --epochs 1 --no-progress-bar --threads 2"
"$cli" $run >"$dir/out_plain" 2>"$dir/err_plain"
[ $? -eq 4 ] || fail "without --detect-anomaly: not exit status 4"
grep -q "the weights became non-finite in optimizer step 1 (net.0.weight holds" "$dir/err_plain" ||
  fail "without --detect-anomaly: not the optimizer step's message"
"$cli" $run --detect-anomaly --metrics-json "$dir/m.json" >"$dir/out_anomaly" 2>"$dir/err_anomaly"
[ $? -eq 4 ] || fail "with --detect-anomaly: not exit status 4"
grep -q "\[detect_anomaly\] optimizer step 1 (AdamW) made parameter 'net.0.weight' non-finite ([0-9]* +inf, [0-9]* -inf of 200704 elements) in 16-true, although the gradients were finite" \
  "$dir/err_anomaly" || fail "with --detect-anomaly: the update is not blamed"
grep -q "already" "$dir/err_anomaly" && fail "with --detect-anomaly: the next forward's input is blamed"
grep -q '"diverged": "\[detect_anomaly\] optimizer step 1' "$dir/m.json" ||
  fail "the metrics JSON does not hold the report"
echo "the overflowing update is named, with and without --detect-anomaly"
