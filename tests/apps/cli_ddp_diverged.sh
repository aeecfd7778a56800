#!/bin/sh
# A diverged run under --devices 2 ends as one process does (docs/cli.md, "Exit status";
# docs/distributed.md, "Failures"): the ranks agree on the divergence and stop together, rank 0
# writes the metrics JSON ("diverged", "diverged_after_step", ...) and says why once, and the
# launcher exits 4 (not a job aborted inside fit from the rank that saw it: status 2, no JSON,
# a "rank R of 2 failed ... aborting the job" line per rank).
# Usage: cli_ddp_diverged.sh <mantissa binary>
set -u
cli="$1"
. "$(dirname "$0")/cli_test_lib.sh"
mlp="--train-subset 256 --epochs 1 --hidden 32 --no-progress-bar"

# Stopped by the Trainer in a step: lr 1e308 leaves NaN weights after step 1, step 2's loss shows
# it. One process (batch 128, the global batch) and 2 ranks x 64 stop alike.
"$cli" train $mlp --batch-size 128 --lr 1e308 --metrics-json "$dir/one.json" >"$dir/one.txt" 2>&1
rc=$?
[ $rc -eq 4 ] || fail "one process at lr 1e308: exit status $rc, expected 4"
(cd "$dir" && "$cli" train --devices 2 $mlp --batch-size 64 --lr 1e308 \
  --metrics-json "$dir/ddp.json" >"$dir/ddp.txt" 2>&1)
rc=$?
[ $rc -eq 4 ] || fail "--devices 2 at lr 1e308: exit status $rc, expected 4"
[ -f "$dir/ddp.json" ] || fail "--devices 2 at lr 1e308: no metrics JSON"
grep -q '"diverged": "\[Trainer\] the weights became non-finite in optimizer step 1 .*(found on rank 0 of 2)"' \
  "$dir/ddp.json" || fail "--devices 2: the metrics JSON does not say diverged"
for key in diverged_after_step diverged_in_epoch; do
  a=$(json_number "$dir/ddp.json" $key)
  b=$(json_number "$dir/one.json" $key)
  [ -n "$a" ] && [ "$a" = "$b" ] || fail "--devices 2: $key is $a, one process's $b"
done
[ "$(json_list "$dir/ddp.json" step_losses | wc -l)" -eq 1 ] ||
  fail "--devices 2: not the one finite step loss"
grep -q '"final_test_accuracy": null' "$dir/ddp.json" ||
  fail "--devices 2: a final test accuracy of NaN weights"
[ "$(grep -c '^mantissa: error: \[Trainer\] the weights became non-finite in optimizer step 1 ' "$dir/ddp.txt")" -eq 1 ] ||
  fail "--devices 2: not one error line for the job"
grep -q 'aborting the job\|failed:' "$dir/ddp.txt" && fail "--devices 2: the job was aborted"
grep -q "^metrics written to $dir/ddp.json" "$dir/ddp.txt" ||
  fail "--devices 2: does not say where the metrics went"

# Trained to its end, but the final weights' test loss is inf (16-true at lr 1): 4 as well, with
# the JSON and the checkpoints (the error was thrown on every rank and aborted the job).
(cd "$dir" && "$cli" train --devices 2 --train-subset 1024 --hidden 64 --epochs 1 \
  --precision 16-true --lr 1 --no-progress-bar --checkpoint-dir "$dir/ck" \
  --metrics-json "$dir/inf.json" >"$dir/inf.txt" 2>&1)
rc=$?
[ $rc -eq 4 ] || fail "--devices 2, 16-true at lr 1: exit status $rc, expected 4"
grep -q '"diverged": "the test loss of the final weights is inf' "$dir/inf.json" ||
  fail "--devices 2, 16-true at lr 1: the metrics JSON does not say diverged"
[ "$(grep -c '^mantissa: error: \[train\] the test loss of the final weights is inf' "$dir/inf.txt")" -eq 1 ] ||
  fail "--devices 2, 16-true at lr 1: not one error line for the job"
grep -q 'aborting the job' "$dir/inf.txt" && fail "--devices 2, 16-true at lr 1: the job was aborted"
[ -f "$dir/ck/last.safetensors" ] || fail "--devices 2, 16-true at lr 1: no checkpoint"

# The GPT stopped in its first step.
awk 'BEGIN { for (i = 1; i <= 400; i++) print "the quick brown fox jumps over the lazy dog" }' >"$dir/t.txt"
(cd "$dir" && "$cli" train --devices 2 --model gpt --layers 1 --width 32 --heads 2 --context 16 \
  --sample-tokens 0 --no-progress-bar --text "$dir/t.txt" --lr 1e308 --max-steps 20 \
  --metrics-json "$dir/g.json" >"$dir/g.txt" 2>&1)
rc=$?
[ $rc -eq 4 ] || fail "GPT --devices 2 at lr 1e308: exit status $rc, expected 4"
grep -q '"diverged": "\[Trainer\] the weights became non-finite in optimizer step 1 ' "$dir/g.json" ||
  fail "GPT --devices 2 at lr 1e308: the metrics JSON does not say diverged"
[ "$(json_number "$dir/g.json" diverged_after_step)" = 1 ] ||
  fail "GPT --devices 2 at lr 1e308: not stopped after step 1"
echo "diverged under --devices 2: exit 4, diverged_after_step $(json_number "$dir/ddp.json" diverged_after_step) (one process $(json_number "$dir/one.json" diverged_after_step))"
exit 0
