#!/bin/sh
# Under --devices N, --limit-val-batches and --limit-test-batches count each rank's batches, as
# Lightning's limits count the batches of each rank's DistributedSampler shard: rank r's batch b
# of --batch-size (1000 for the image models' evaluations) are, over the ranks, global batch b
# of N x that size, so a limit of k reads k global batches, the examples one process reads with
# a limit of N x k batches of the per-rank size (docs/distributed.md, "Validation and test").
# Usage: cli_ddp_limit_eval_batches.sh <mantissa binary>
set -u
cli="$1"
. "$(dirname "$0")/cli_test_lib.sh"

calls() { # FILE STEP: rank 0's calls of [TrainModule]STEP in its last profiler report
  n=$(sed -n "s/^| \[TrainModule\]$2 *| *[0-9.]* *| *\([0-9]*\) .*/\1/p" "$1" | tail -n 1)
  echo "${n:-0}"
}

# Rank 0 reads 2 of its 5 batches of 1000 per validation (2 epochs) and 3 of them in the final
# test (--limit-test-batches 3 of the job's 5 global batches of 2000).
(cd "$dir" && "$cli" train --devices 2 --train-subset 256 --batch-size 64 --hidden 32 --epochs 2 \
  --seed 5 --limit-val-batches 2 --limit-test-batches 3 --no-progress-bar --profiler simple \
  >"$dir/counts.txt" 2>&1) || fail "train --devices 2 --limit-val-batches 2 failed"
v=$(calls "$dir/counts.txt" validation_step)
t=$(calls "$dir/counts.txt" test_step)
[ "$v" = 4 ] && [ "$t" = 3 ] || fail "rank 0 ran $v validation and $t test batches, expected 4 and 3"
echo "rank 0: $v validation and $t test batches"

# The same examples: 2 batches under 2 ranks are 4 batches of one process (the first 4000 test
# images), here of the initial weights (nothing trained), the same on both sides.
(cd "$dir" && "$cli" train --devices 2 --train-subset 256 --hidden 32 --seed 5 \
  --limit-train-batches 0 --limit-test-batches 2 --no-progress-bar \
  --metrics-json "$dir/ddp.json" >"$dir/ddp.txt" 2>&1) || fail "train --devices 2 failed"
(cd "$dir" && "$cli" train --train-subset 256 --hidden 32 --seed 5 --limit-train-batches 0 \
  --limit-test-batches 4 --no-progress-bar --metrics-json "$dir/one.json" >"$dir/one.txt" 2>&1) ||
  fail "train in one process failed"
for key in final_test_loss final_test_accuracy; do
  a=$(json_number "$dir/ddp.json" $key)
  b=$(json_number "$dir/one.json" $key)
  near "$a" "$b" 1e-6 || fail "$key $a under 2 ranks (2 batches), $b in one process (4)"
  echo "$key: 2 ranks x 2 batches $a, one process x 4 batches $b"
done
# The GPT: its validation text has 27 windows of 16 bytes, 14 on rank 0 in 4 batches of 4. One
# validation of 1 batch on each rank; the final loss a test pass of its default 16, all 4 here.
awk 'BEGIN { for (i = 1; i <= 480; i++) printf "%s %d\n", (i % 7 ? "num" : "seven"), (i * 7919) % 10007 }' \
  >"$dir/t.txt"
(cd "$dir" && "$cli" train --devices 2 --model gpt --layers 1 --width 32 --heads 2 --context 16 \
  --sample-tokens 0 --text "$dir/t.txt" --batch-size 4 --max-steps 3 --no-progress-bar \
  --limit-val-batches 1 --profiler simple >"$dir/gpt.txt" 2>&1) ||
  fail "gpt: train --devices 2 --limit-val-batches 1 failed"
v=$(calls "$dir/gpt.txt" validation_step)
t=$(calls "$dir/gpt.txt" test_step)
[ "$v" = 1 ] && [ "$t" = 4 ] || fail "gpt: rank 0 ran $v validation and $t test batches, expected 1 and 4"
echo "gpt rank 0: $v validation and $t test batches"
exit 0
