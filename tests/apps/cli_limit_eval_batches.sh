#!/bin/sh
# `mantissa train --limit-val-batches X --limit-test-batches X` (Lightning's limit_val_batches and
# limit_test_batches; docs/cli.md, "Batch limits"): each validation reads --limit-val-batches'
# batches (0: no validation), the final evaluation after training --limit-test-batches' (0: none;
# the last validation's numbers when it read as many), for the image models (all batches by
# default) and the GPT (16 by default), from the command line, a --config file and a run's
# config.json; bad values are refused as --limit-train-batches' are. The batches are counted by
# --profiler simple's calls of validation_step and test_step. The flags did not exist ("unknown
# option --limit-val-batches").
# Usage: cli_limit_eval_batches.sh <mantissa binary>
set -u
cli="$1"
. "$(dirname "$0")/cli_test_lib.sh"

# calls FILE STEP: how often the profiler saw [TrainModule]STEP (0 when never), in its last report
# (the fit prints one, a validation or test after it another with the totals).
calls() {
  n=$(sed -n "s/^| \[TrainModule\]$2 *| *[0-9.]* *| *\([0-9]*\) .*/\1/p" "$1" | tail -n 1)
  echo "${n:-0}"
}
# expect NAME VALIDATION_STEPS TEST_STEPS: the counts of the run whose output is $dir/NAME.txt.
expect() {
  v=$(calls "$dir/$1.txt" validation_step)
  t=$(calls "$dir/$1.txt" test_step)
  [ "$v" = "$2" ] && [ "$t" = "$3" ] ||
    fail "$1: $v validation and $t test batches, expected $2 and $3"
  echo "$1: $v validation and $t test batches"
}
# train NAME FLAGS...: a run (2 epochs of 2 batches; the test set's 10 batches of 1000 validate).
train() {
  name=$1
  shift
  (cd "$dir" && "$cli" train --train-subset 256 --batch-size 128 --hidden 32 --epochs 2 \
    --seed 5 --no-progress-bar --profiler simple "$@" >"$dir/$name.txt" 2>&1) ||
    fail "$name: train $* failed"
}

train default
expect default 20 0 # the second epoch's validation is the final evaluation
train val2 --limit-val-batches 2
expect val2 4 10 # 2 per epoch; the final test accuracy is still the whole test set's
train fractions --limit-val-batches 0.1 --limit-test-batches 0.5
expect fractions 2 5
train same --limit-val-batches 1 --limit-test-batches 1 --metrics-json "$dir/same.json"
expect same 2 0 # the last validation read one batch too: its numbers
a=$(json_number "$dir/same.json" final_test_loss)
b=$(json_list "$dir/same.json" test_loss | tail -n 1)
[ -n "$a" ] && [ "$a" = "$b" ] || fail "same: final_test_loss $a is not the last validation's $b"

# The CNN and the ViT as the MLP (one step; one validation of 1 batch, a test of 2).
for model in cnn vit; do
  train $model --model $model --max-steps 1 --limit-val-batches 1 --limit-test-batches 2
  expect $model 1 2
done

# 0: no validation (no test numbers in the epoch lines or the JSON); the final evaluation runs.
train noval --limit-val-batches 0 --metrics-json "$dir/noval.json"
expect noval 0 10
! grep -q 'test loss' "$dir/noval.txt" || fail "noval: an epoch line has a test loss"
[ "$(json_list "$dir/noval.json" test_loss | sort -u)" = null ] || fail "noval: test_loss not null"
grep -q '^final test accuracy: 0\.' "$dir/noval.txt" || fail "noval: no final test accuracy"
# 0: no final evaluation, no final numbers.
train notest --limit-test-batches 0 --metrics-json "$dir/notest.json"
expect notest 20 0
grep -q '"final_test_accuracy": null' "$dir/notest.json" || fail "notest: final_test_accuracy"
grep -qx 'no test evaluation ran' "$dir/notest.txt" || fail "notest: summary"

# Refused as --limit-train-batches' values are (exit status 2), naming the flag.
refused() { # message, flags...
  msg=$1
  shift
  out=$("$cli" train --train-subset 256 "$@" 2>&1)
  status=$?
  [ $status -eq 2 ] || fail "train $*: exit status $status, expected 2: $out"
  echo "$out" | grep -qF -- "$msg" || fail "train $*: no '$msg' in: $out"
}
refused "--limit-val-batches expects a fraction like 0.25 or a batch count like 10, got '-1'" \
  --limit-val-batches -1
refused "--limit-test-batches expects a fraction like 0.25 or a batch count like 10, got 'all'" \
  --limit-test-batches all
refused "--limit-test-batches as a fraction must be at most 1.0, got 1.5" --limit-test-batches 1.5
refused "--limit-val-batches: the value is empty (an unset shell variable?)" --limit-val-batches ''
refused "--early-stopping-monitor val_loss is a validation metric, but --limit-val-batches 0 turns validation off" \
  --limit-val-batches 0 --early-stopping-monitor val_loss
refused "--checkpoint-monitor val_acc is a validation metric, but --limit-val-batches 0.0 turns validation off" \
  --limit-val-batches 0.0 --checkpoint-dir "$dir/ck_refused" --checkpoint-monitor val_acc
[ ! -e "$dir/ck_refused/config.json" ] || fail "a refused run wrote its config.json"

# A --config file (keys with - or _), and the config.json a run writes: its replay reads as many.
printf '{"limit_val_batches": 2, "limit-test-batches": 0.5}\n' >"$dir/cfg.json"
train config --config "$dir/cfg.json"
expect config 4 5
train recorded --limit-val-batches 2 --limit-test-batches 0.5 --checkpoint-dir "$dir/ck"
grep -q '"limit-val-batches": 2,' "$dir/ck/config.json" || fail "config.json: limit-val-batches"
grep -q '"limit-test-batches": 0.5,' "$dir/ck/config.json" || fail "config.json: limit-test-batches"
# Into a new --checkpoint-dir: ck holds the recorded run's files.
(cd "$dir" && "$cli" train --config "$dir/ck/config.json" --checkpoint-dir "$dir/ck_replay" \
  >"$dir/replay.txt" 2>&1) ||
  fail "replay of config.json failed"
expect replay 4 5
# Not given, they are not recorded: the GPT's replay keeps its 16 batches.
train unrecorded --checkpoint-dir "$dir/ck2"
! grep -q 'limit-val-batches\|limit-test-batches' "$dir/ck2/config.json" ||
  fail "config.json records limits that were not given"

# The GPT: its validation text has 27 windows of 16 bytes, 7 batches of 4. One validation (at
# the last step); 16 batches by default for each, all 7 here.
awk 'BEGIN { for (i = 1; i <= 480; i++) printf "%s %d\n", (i % 7 ? "num" : "seven"), (i * 7919) % 10007 }' \
  >"$dir/t.txt"
gpt() { # name, flags...
  name=$1
  shift
  (cd "$dir" && "$cli" train --model gpt --layers 1 --width 32 --heads 2 --context 16 \
    --sample-tokens 0 --text "$dir/t.txt" --batch-size 4 --max-steps 3 --no-progress-bar \
    --profiler simple "$@" >"$dir/$name.txt" 2>&1) || fail "$name: train --model gpt $* failed"
}
gpt gpt_default
expect gpt_default 7 0
gpt gpt_val1 --limit-val-batches 1
expect gpt_val1 1 7
gpt gpt_val0 --limit-val-batches 0 --limit-test-batches 0.5
expect gpt_val0 0 3
! grep -q '^step 3/3' "$dir/gpt_val0.txt" || fail "gpt_val0: a validation line"
grep -q '^final validation loss: ' "$dir/gpt_val0.txt" || fail "gpt_val0: no final validation loss"
gpt gpt_notest --limit-test-batches 0 --limit-val-batches 2 --metrics-json "$dir/gpt_notest.json"
expect gpt_notest 2 0
grep -q '^step 3/3 ' "$dir/gpt_notest.txt" || fail "gpt_notest: no validation line"
! grep -q '"val_loss_nats_per_char"' "$dir/gpt_notest.json" || fail "gpt_notest: a final loss"
exit 0
