#!/bin/sh
# `mantissa train --lr-find` (docs/cli.md, "Finding a learning rate"): the range test runs in
# place of the training on the run's model and precision, prints its losses and the suggested lr,
# writes them to the metrics JSON ("lr_find") and --lr-find-plot's SVG; flags that cannot go with
# it are refused, its own flags without it are named as ignored.
# Usage: cli_lr_find.sh <mantissa binary>
set -u
cli="$1"
. "$(dirname "$0")/cli_test_lib.sh"
mlp="--model mlp --hidden 32 --train-subset 512 --batch-size 32 --threads 1 --no-progress-bar"

"$cli" train $mlp --lr-find --lr-find-steps 30 --lr-find-range 1e-5,10 \
  --lr-find-plot "$dir/lr.svg" --metrics-json "$dir/m.json" >"$dir/out.txt" 2>"$dir/err.txt"
rc=$?
[ $rc -eq 0 ] || fail "--lr-find: exit status $rc"
grep -q '^mantissa train --lr-find: mlp 784-32-10, precision 32-true, 30 steps, lr from 1e-05 to 10 (exponential)$' \
  "$dir/out.txt" || fail "no header line"
grep -q '^suggested learning rate: [0-9.e-]* (step [0-9]*: where the smoothed loss falls fastest)' \
  "$dir/out.txt" || fail "no suggested learning rate"
grep -q 'final test accuracy\|test acc' "$dir/out.txt" && fail "the range test was evaluated like a training run"
python3 - "$dir/m.json" <<'PY' || fail "metrics JSON"
import json, math, sys
j = json.load(open(sys.argv[1]))["lr_find"]
lrs, losses = j["lrs"], j["losses"]
assert 2 <= len(lrs) <= 30 and len(losses) == len(lrs) == len(j["smoothed_losses"]), j
assert abs(lrs[0] - 1e-5) < 1e-18 and j["min_lr"] == 1e-5 and j["max_lr"] == 10 and j["steps"] == 30
ratio = (10 / 1e-5) ** (1 / 29)
assert all(abs(b / a - ratio) < 1e-9 for a, b in zip(lrs, lrs[1:])), lrs
assert j["suggested_lr"] == lrs[j["suggested_step"] - 1]
assert len(lrs) == 30 or j["stop_reason"], "stopped early without a reason"
PY
grep -q '<svg' "$dir/lr.svg" && grep -q '<style>' "$dir/lr.svg" && grep -q 'polyline' "$dir/lr.svg" ||
  fail "no SVG chart"

# The GPT, shorter.
awk 'BEGIN { for (i = 1; i <= 400; i++) print "the quick brown fox jumps over the lazy dog" }' >"$dir/t.txt"
"$cli" train --model gpt --layers 1 --width 32 --heads 2 --context 16 --batch-size 8 \
  --no-progress-bar --text "$dir/t.txt" --threads 1 --lr-find --lr-find-steps 16 \
  --metrics-json "$dir/g.json" >"$dir/g.txt" 2>&1
rc=$?
[ $rc -eq 0 ] || fail "gpt --lr-find: exit status $rc"
grep -q '^mantissa train --lr-find: gpt 1x32, precision 32-true, 16 steps' "$dir/g.txt" ||
  fail "gpt: no header line"
grep -q '"lr_find"' "$dir/g.json" || fail "gpt: no lr_find in the metrics JSON"
grep -q '^sample' "$dir/g.txt" && fail "gpt: a range test sampled text"

# Refused: what a range test has nothing to do with.
"$cli" train $mlp --lr-find --checkpoint-dir "$dir/ck" >"$dir/o2.txt" 2>&1
[ $? -eq 2 ] || fail "--lr-find with --checkpoint-dir not refused"
grep -q 'mantissa: error: \[--lr-find\] .*drop --checkpoint-dir' "$dir/o2.txt" || fail "no --checkpoint-dir message"
"$cli" train $mlp --lr-find --lr-find-range 1,0.1 >"$dir/o3.txt" 2>&1
[ $? -eq 2 ] || fail "a reversed --lr-find-range not refused"
grep -q "\[--lr-find-range\] expects MIN,MAX with 0 < MIN < MAX, such as 1e-8,1 (the default), got '1,0.1'" \
  "$dir/o3.txt" || fail "no --lr-find-range message"
# A plot that cannot be written (a directory stands there) is refused before the sweep runs.
mkdir -p "$dir/adir"
"$cli" train $mlp --lr-find --lr-find-plot "$dir/adir" >"$dir/o6.txt" 2>&1
[ $? -eq 2 ] || fail "an unwritable --lr-find-plot not refused"
grep -q 'lr-find-plot' "$dir/o6.txt" || fail "the error does not name --lr-find-plot"
grep -q 'step ' "$dir/o6.txt" && fail "the sweep ran before the plot path was checked"
# Its flags without it, and training flags with it, are named as ignored.
"$cli" train $mlp --epochs 1 --lr-find-steps 10 >"$dir/o4.txt" 2>&1 || fail "a training run failed"
grep -q 'warning: --lr-find-steps has no effect without --lr-find' "$dir/o4.txt" || fail "no warning for --lr-find-steps"
"$cli" train $mlp --lr-find --lr-find-steps 12 --lr 0.5 --epochs 3 >"$dir/o5.txt" 2>&1 || fail "--lr-find with --lr failed"
grep -q 'warning: --lr has no effect with --lr-find' "$dir/o5.txt" || fail "no warning for --lr"
grep -q 'warning: --epochs has no effect with --lr-find' "$dir/o5.txt" || fail "no warning for --epochs"
echo "--lr-find: $(grep '^suggested learning rate' "$dir/out.txt")"
exit 0
