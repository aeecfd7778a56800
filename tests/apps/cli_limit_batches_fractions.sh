#!/bin/sh
# Batch limits given as fractions that leave no batch, and `mantissa eval --limit-test-batches X
# / --limit-val-batches X` (docs/cli.md, "Batch limits"). A fraction of a loader smaller than one
# batch was quietly raised to one batch; it is now Lightning's error ("You requested to check
# 0.05 of the test dataloader but 0.05 * 10 < 1 ... Try at least --limit-test-batches=0.1"),
# naming the flag, before anything trains. eval did not take the flags ("unknown option
# --limit-test-batches"); it now reads that many batches of the test set (the GPT: of its
# validation text), the same for both flags.
# Usage: cli_limit_batches_fractions.sh <mantissa binary>
set -u
cli="$1"
. "$(dirname "$0")/cli_test_lib.sh"

# refused NAME MESSAGE FLAGS...: `mantissa FLAGS` exits 2 and says MESSAGE; nothing trained.
refused() {
  name=$1
  message=$2
  shift 2
  (cd "$dir" && "$cli" "$@" >"$dir/$name.txt" 2>&1)
  status=$?
  [ $status -eq 2 ] || fail "$name: exit status $status, expected 2"
  grep -qF -- "$message" "$dir/$name.txt" || fail "$name: no '$message'"
  ! grep -q '^epoch ' "$dir/$name.txt" || fail "$name: it trained before refusing"
  echo "$name: refused"
}
# The MLP run: 2 batches of 128 per epoch; the test set's 10 batches of 1000 validate.
run() {
  (cd "$dir" && "$cli" train --train-subset 256 --batch-size 128 --hidden 32 --epochs 1 \
    --seed 5 --no-progress-bar "$@")
}

refused train_frac "0.001 of the train dataloader but 0.001 * 2 < 1" \
  train --train-subset 256 --batch-size 128 --hidden 32 --limit-train-batches 0.001
grep -qF -- "--limit-train-batches=0.5" "$dir/train_frac.txt" || fail "train_frac: no suggestion"
refused val_frac "You requested to check 0.05 of the val dataloader but 0.05 * 10 < 1" \
  train --train-subset 256 --batch-size 128 --hidden 32 --limit-val-batches 0.05
grep -qF -- "Try at least --limit-val-batches=0.1" "$dir/val_frac.txt" || fail "val_frac: no suggestion"
# The final evaluation's limit is checked before training too, not after it.
refused test_frac "0.05 of the test dataloader but 0.05 * 10 < 1" \
  train --train-subset 256 --batch-size 128 --hidden 32 --limit-test-batches 0.05

run --checkpoint-dir "$dir/ck" >"$dir/train.txt" 2>&1 || fail "train failed"
ck="$dir/ck/last.safetensors"
[ -f "$ck" ] || fail "no checkpoint"
ev() { # name, flags...
  name=$1
  shift
  (cd "$dir" && "$cli" eval --checkpoint "$ck" --metrics-json "$dir/$name.json" "$@" \
    >"$dir/$name.txt" 2>&1) || fail "$name: eval $* failed"
  json_number "$dir/$name.json" final_test_loss
}
all=$(ev all)
ten=$(ev ten --limit-test-batches 10)
one=$(ev one --limit-test-batches 1)
val_one=$(ev val_one --limit-val-batches 1)
tenth=$(ev tenth --limit-test-batches 0.1)
both=$(ev both --limit-test-batches 1 --limit-val-batches 1)
echo "eval test loss: all $all, 10 batches $ten, 1 batch $one ($val_one, $tenth, $both)"
[ -n "$all" ] && [ "$all" = "$ten" ] || fail "10 of 10 batches ($ten) is not all ($all)"
[ -n "$one" ] && [ "$one" != "$all" ] || fail "1 batch ($one) evaluated the whole set ($all)"
[ "$val_one" = "$one" ] && [ "$tenth" = "$one" ] && [ "$both" = "$one" ] ||
  fail "--limit-val-batches 1 ($val_one), 0.1 ($tenth) and both flags ($both) differ from $one"

refused eval_frac "You requested to check 0.05 of the test dataloader but 0.05 * 10 < 1" \
  eval --checkpoint "$ck" --limit-test-batches 0.05
grep -qF -- "--limit-test-batches=0.1" "$dir/eval_frac.txt" || fail "eval_frac: no suggestion"
refused eval_disagree "--limit-test-batches 1 and --limit-val-batches 2 disagree" \
  eval --checkpoint "$ck" --limit-test-batches 1 --limit-val-batches 2
refused eval_zero "--limit-val-batches 0 leaves nothing to evaluate" \
  eval --checkpoint "$ck" --limit-val-batches 0
refused eval_bad "--limit-test-batches as a fraction must be at most 1.0, got 1.5" \
  eval --checkpoint "$ck" --limit-test-batches 1.5

# The GPT: its validation text has 27 windows of 16 bytes, 7 batches of 4.
awk 'BEGIN { for (i = 1; i <= 480; i++) printf "%s %d\n", (i % 7 ? "num" : "seven"), (i * 7919) % 10007 }' \
  >"$dir/t.txt"
(cd "$dir" && "$cli" train --model gpt --layers 1 --width 32 --heads 2 --context 16 \
  --sample-tokens 0 --text "$dir/t.txt" --batch-size 4 --max-steps 2 --no-progress-bar \
  --save-weights "$dir/gpt.safetensors" >"$dir/gpt_train.txt" 2>&1) || fail "gpt train failed"
gev() { # name, flags...
  name=$1
  shift
  (cd "$dir" && "$cli" eval --checkpoint "$dir/gpt.safetensors" --batch-size 4 \
    --metrics-json "$dir/$name.json" "$@" >"$dir/$name.txt" 2>&1) || fail "$name: eval $* failed"
  json_number "$dir/$name.json" val_loss_nats_per_char
}
g_all=$(gev g_all)
g_seven=$(gev g_seven --limit-test-batches 7)
g_one=$(gev g_one --limit-val-batches 1)
g_frac=$(gev g_frac --limit-test-batches 0.15)
echo "gpt eval loss: all $g_all, 7 batches $g_seven, 1 batch $g_one ($g_frac)"
[ -n "$g_all" ] && [ "$g_all" = "$g_seven" ] || fail "gpt: 7 of 7 batches ($g_seven) is not all ($g_all)"
[ -n "$g_one" ] && [ "$g_one" != "$g_all" ] && [ "$g_frac" = "$g_one" ] ||
  fail "gpt: 1 batch ($g_one, 0.15: $g_frac) against all ($g_all)"
refused gpt_frac "0.1 of the val dataloader but 0.1 * 7 < 1" \
  eval --checkpoint "$dir/gpt.safetensors" --batch-size 4 --limit-test-batches 0.1
grep -qF -- "--limit-test-batches=0.143" "$dir/gpt_frac.txt" || fail "gpt_frac: no suggestion"
exit 0
