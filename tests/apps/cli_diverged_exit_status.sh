#!/bin/sh
# A run that diverged ends with exit status 4 after writing what it writes (docs/cli.md, "Exit
# status"): one whose final weights give a NaN or inf loss (so a script can tell it from a
# result), and one the Trainer stopped because its loss or weights stopped being finite (not 2,
# which a mistyped flag gives). compare reports such a precision as
# diverged and goes on; a healthy run and a command-line mistake keep 0 and 2.
# Usage: cli_diverged_exit_status.sh <mantissa binary>
set -u
cli="$1"
. "$(dirname "$0")/cli_test_lib.sh"
image="--train-subset 1024 --hidden 64 --epochs 1 --no-progress-bar --threads 2"

# 16-true at lr 1: the final weights' test loss is inf (float16 overflows).
"$cli" train $image --precision 16-true --lr 1 --metrics-json "$dir/m.json" \
  --checkpoint-dir "$dir/ck" >"$dir/out_16true.txt" 2>&1
rc=$?
[ $rc -eq 4 ] || fail "16-true at lr 1: exit status $rc, expected 4"
grep -q '^mantissa: error: \[train\] the test loss of the final weights is inf (16-true, after 4 optimizer steps): the run diverged' \
  "$dir/out_16true.txt" || fail "16-true at lr 1: no message saying what diverged"
grep -q 'lower --lr, clip gradients (--gradient-clip-val 1), or train in 16-mixed, whose GradScaler skips the steps that overflow, or in bf16-mixed' \
  "$dir/out_16true.txt" || fail "16-true at lr 1: no advice"
grep -q '^final test accuracy: ' "$dir/out_16true.txt" || fail "16-true at lr 1: no summary"
grep -q '"diverged": "the test loss of the final weights is inf' "$dir/m.json" ||
  fail "16-true at lr 1: the metrics JSON does not say diverged"
grep -q '"final_test_accuracy": 0\.' "$dir/m.json" || fail "16-true at lr 1: metrics incomplete"
[ -f "$dir/ck/last.safetensors" ] && [ -f "$dir/ck/config.json" ] ||
  fail "16-true at lr 1: the checkpoints were not written"

# The GPT under 16-mixed at lr 100: the final validation loss is NaN.
yes 'the quick brown fox jumps over the lazy dog' | head -n 60 >"$dir/t.txt"
"$cli" train --model gpt --layers 1 --width 32 --heads 2 --context 16 --sample-tokens 0 \
  --no-progress-bar --text "$dir/t.txt" --precision 16-mixed --lr 100 --max-steps 20 \
  --metrics-json "$dir/g.json" >"$dir/out_gpt.txt" 2>&1
rc=$?
[ $rc -eq 4 ] || fail "GPT 16-mixed at lr 100: exit status $rc, expected 4"
grep -q '\[train\] the validation loss of the final weights is nan (16-mixed, after 20 optimizer steps)' \
  "$dir/out_gpt.txt" || fail "GPT 16-mixed at lr 100: no message saying what diverged"
grep -q '"diverged": "the validation loss of the final weights is nan' "$dir/g.json" ||
  fail "GPT 16-mixed at lr 100: the metrics JSON does not say diverged"

# Divergence the Trainer stops in a step: 4 as well (not 2).
"$cli" train --train-subset 256 --epochs 1 --lr 1e308 --no-progress-bar >"$dir/out_nan.txt" 2>&1
rc=$?
[ $rc -eq 4 ] || fail "lr 1e308: exit status $rc, expected 4"
grep -q 'the weights became non-finite in optimizer step 1' "$dir/out_nan.txt" ||
  fail "lr 1e308: not the Trainer's divergence error"

# Such a run writes its metrics JSON too (it wrote none): "diverged" with the Trainer's message,
# the steps and epoch it stopped after, and what it measured before. One healthy epoch of 4
# steps, then a resume at lr 1e308: step 5 leaves NaN weights, which step 6's loss shows.
mlp="--train-subset 1024 --hidden 64 --no-progress-bar --threads 2"
"$cli" train $mlp --epochs 1 --checkpoint-dir "$dir/ck_step" --metrics-json "$dir/healthy.json" \
  >"$dir/out_healthy.txt" 2>&1 || fail "the healthy first epoch failed"
"$cli" train $mlp --epochs 2 --checkpoint-dir "$dir/ck_step" \
  --resume "$dir/ck_step/last.safetensors" --lr 1e308 --metrics-json "$dir/stopped.json" \
  >"$dir/out_stopped.txt" 2>&1
rc=$?
[ $rc -eq 4 ] || fail "stopped in step 6: exit status $rc, expected 4"
grep -q '^mantissa: error: \[Trainer\] the weights became non-finite in optimizer step 5 .*Lower the learning rate' \
  "$dir/out_stopped.txt" || fail "stopped in step 6: no error with its advice"
grep -q "^metrics written to $dir/stopped.json" "$dir/out_stopped.txt" ||
  fail "stopped in step 6: does not say where the metrics went"
[ -f "$dir/stopped.json" ] || fail "stopped in step 6: no metrics JSON"
grep -q '"diverged": "\[Trainer\] the weights became non-finite in optimizer step 5 ' \
  "$dir/stopped.json" || fail "stopped in step 6: the metrics JSON does not say diverged"
[ "$(json_number "$dir/stopped.json" diverged_after_step)" = 5 ] ||
  fail "stopped in step 6: diverged_after_step is not 5"
[ "$(json_number "$dir/stopped.json" diverged_in_epoch)" = 2 ] ||
  fail "stopped in step 6: diverged_in_epoch is not 2"
# The weights it ends with are not finite: no final evaluation, not a made-up one.
grep -q '"final_test_accuracy": null' "$dir/stopped.json" ||
  fail "stopped in step 6: a final test accuracy of NaN weights"
# What the run had measured: the first epoch's numbers (those of the healthy run) and the five
# finite step losses.
[ "$(json_list "$dir/stopped.json" train_loss)" = "$(json_list "$dir/healthy.json" train_loss)" ] ||
  fail "stopped in step 6: the first epoch's train_loss is not the healthy run's"
[ "$(json_list "$dir/stopped.json" test_accuracy)" = "$(json_list "$dir/healthy.json" test_accuracy)" ] ||
  fail "stopped in step 6: the first epoch's test_accuracy is not the healthy run's"
[ "$(json_number "$dir/stopped.json" final_train_loss)" = "$(json_number "$dir/healthy.json" final_train_loss)" ] ||
  fail "stopped in step 6: final_train_loss is not the last finished epoch's"
[ "$(json_list "$dir/stopped.json" step_losses | head -n 4)" = "$(json_list "$dir/healthy.json" step_losses)" ] ||
  fail "stopped in step 6: the first four step losses are not the healthy run's"
[ "$(json_list "$dir/stopped.json" step_losses | wc -l)" -eq 5 ] ||
  fail "stopped in step 6: not five step losses"
json_list "$dir/stopped.json" step_losses | awk '$1 + 0 <= 0 || $1 !~ /^[0-9.e+-]+$/ { exit 1 }' ||
  fail "stopped in step 6: a step loss that is not a finite positive number"

# The GPT stopped in its first step: its JSON says so, with that step's loss and no final
# validation loss (its weights are NaN).
yes 'the quick brown fox jumps over the lazy dog' | head -n 60 >"$dir/t.txt"
"$cli" train --model gpt --layers 1 --width 32 --heads 2 --context 16 --sample-tokens 0 \
  --no-progress-bar --text "$dir/t.txt" --lr 1e308 --max-steps 20 \
  --metrics-json "$dir/g_stopped.json" >"$dir/out_gpt_stopped.txt" 2>&1
rc=$?
[ $rc -eq 4 ] || fail "GPT at lr 1e308: exit status $rc, expected 4"
grep -q '"diverged": "\[Trainer\] the weights became non-finite in optimizer step 1 ' \
  "$dir/g_stopped.json" || fail "GPT at lr 1e308: the metrics JSON does not say diverged"
[ "$(json_number "$dir/g_stopped.json" diverged_after_step)" = 1 ] &&
  [ "$(json_number "$dir/g_stopped.json" steps)" = 1 ] ||
  fail "GPT at lr 1e308: not stopped after step 1"
[ "$(json_list "$dir/g_stopped.json" step_losses | wc -l)" -eq 1 ] ||
  fail "GPT at lr 1e308: not one step loss"
grep -q val_loss_nats_per_char "$dir/g_stopped.json" &&
  fail "GPT at lr 1e308: a final validation loss of NaN weights"

# Anomaly detection finds the same divergence earlier and names the op: status 4 and the
# metrics JSON as well (it exited 2 and wrote none).
"$cli" train --train-subset 1024 --limit-test-batches 1 --limit-val-batches 1 --epochs 1 \
  --no-progress-bar --precision 16-true --lr 5 --detect-anomaly \
  --metrics-json "$dir/anomaly.json" >"$dir/out_anomaly.txt" 2>&1
rc=$?
[ $rc -eq 4 ] || fail "--detect-anomaly: exit status $rc, expected 4"
grep -q '^mantissa: error: \[detect_anomaly\] ' "$dir/out_anomaly.txt" ||
  fail "--detect-anomaly: no anomaly report"
grep -q '"diverged": "\[detect_anomaly\] ' "$dir/anomaly.json" ||
  fail "--detect-anomaly: the metrics JSON does not say diverged"

# compare: the precision is a diverged row, the comparison goes on (status 0).
"$cli" compare --hidden 64 --precisions 32-true,16-mixed --epochs 1 --train-subset 1024 \
  --rounds 1 --timed-steps 1 --untimed-steps 0 --lr 30 --quiet --json "$dir/c.json" \
  >"$dir/out_compare.txt" 2>&1
rc=$?
[ $rc -eq 0 ] || fail "compare with one diverged precision: exit status $rc, expected 0"
grep -q '^16-mixed     diverged: the test loss of the final weights is nan' "$dir/out_compare.txt" ||
  fail "compare: 16-mixed is not reported as diverged"
grep -q '"diverged": "the test loss of the final weights is nan' "$dir/c.json" ||
  fail "compare: the JSON does not say 16-mixed diverged"

# A healthy run: 0 and no "diverged"; a mistyped flag: 2.
"$cli" train $image --max-steps 2 --metrics-json "$dir/ok.json" >"$dir/out_ok.txt" 2>&1 ||
  fail "a healthy run failed"
grep -q diverged "$dir/ok.json" && fail "a healthy run says diverged"
"$cli" train --lr abc >"$dir/out_bad.txt" 2>&1
[ $? -eq 2 ] || fail "a bad flag: exit status is not 2"
exit 0
