#!/bin/sh
# plan's answers fit the data set and read in sensible units:
#  * an image model's batch is capped at Fashion-MNIST's 60000 training images (not 65536), and
#    the table says the whole training set fits; --max-batch beyond it is capped there too;
#  * the per-sample cost is in KiB with two decimals, never bare bytes, and where the peak of
#    small batches is flat (16-mixed: the optimizer step sets it) it is the real slope, not 1 B;
#  * the docs' example (64 MiB) gives batches below the data set that differ by precision.
# Usage: cli_plan_useful_answers.sh MANTISSA
. "$(dirname "$0")/cli_test_lib.sh"
M=$1

"$M" plan --model mlp --memory 8GiB --precisions 32-true,bf16-true --threads 1 >"$dir/out_8g.txt" 2>&1 ||
  fail "plan at 8GiB failed"
grep -q 65536 "$dir/out_8g.txt" && fail "a batch beyond the 60000 training images"
for p in 32-true bf16-true; do
  grep -Eq "^$p +60000 .* [0-9]+\.[0-9]{2} KiB +whole training set fits\$" "$dir/out_8g.txt" ||
    fail "$p is not capped at the training set with a KiB per-sample cost"
done
grep -q '"whole training set fits": a batch of all 60000 training samples fits' "$dir/out_8g.txt" ||
  fail "no line explaining the cap"

"$M" plan --model mlp --memory 8GiB --precisions bf16-true --max-batch 100000 --threads 1 \
  >"$dir/out_max.txt" 2>&1 || fail "plan with --max-batch 100000 failed"
grep -Eq '^bf16-true +60000 .*whole training set fits$' "$dir/out_max.txt" ||
  fail "--max-batch beyond the training set was not capped at it"
"$M" plan --model mlp --memory 8GiB --precisions bf16-true --max-batch 500 --threads 1 \
  >"$dir/out_500.txt" 2>&1 || fail "plan with --max-batch 500 failed"
grep -Eq '^bf16-true +500 .*capped at --max-batch \(dry run\)$' "$dir/out_500.txt" ||
  fail "--max-batch 500 is not the cap"

# 3 MiB: the 16-mixed MLP does not fit at batch 1, and its peak is flat from batch 8 to 16.
"$M" plan --model mlp --memory 3MiB --precisions 16-mixed,bf16-true --threads 1 \
  >"$dir/out_3m.txt" 2>&1 || fail "plan at 3MiB failed"
grep -Eq ' [0-9]+ B ' "$dir/out_3m.txt" && fail "a size in bare bytes"
grep -Eq '^16-mixed +none .* [1-9][0-9]*\.[0-9]{2} KiB +batch 1 does not fit$' "$dir/out_3m.txt" ||
  fail "16-mixed's per-sample cost is not a slope in KiB"

# The example of docs/memory_planner.md: every batch below the training set, bf16-true's about
# twice 32-true's.
"$M" plan --model mlp --memory 64MiB --precisions 32-true,bf16-true --threads 1 \
  >"$dir/out_64m.txt" 2>&1 || fail "plan at 64MiB failed"
b32=$(awk '$1 == "32-true" { print $2 }' "$dir/out_64m.txt")
b16=$(awk '$1 == "bf16-true" { print $2 }' "$dir/out_64m.txt")
[ -n "$b32" ] && [ -n "$b16" ] && [ "$b32" -lt 60000 ] && [ "$b16" -lt 60000 ] &&
  [ "$b16" -gt $((b32 * 3 / 2)) ] || fail "64MiB: 32-true $b32, bf16-true $b16"
echo ok
