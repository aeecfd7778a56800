#!/bin/sh
# `mantissa finetune` on prompt/completion data whose prompts are much longer than
# --block-size: most windows hold prompt tokens only, and a step whose batches train no token
# has no token to learn from and no loss (transformers' Trainer's is NaN). Such a step's step_losses
# entry is null (it was 0.0), the validation lines' train loss is the mean of the steps that
# trained (they say how many did not), and the run warns once why (the completions fall outside
# the windows) and what to do (a larger --block-size). Such a step takes no optimizer step
# (as Lightning skips one whose training_step returns None): with weight decay, a run of five such
# steps writes the adapter of a run of one (AdamW's decay moved it at each). Runs with every
# window trained are
# unchanged (cli_finetune_qlora.sh, cli_finetune_token_average.sh).
# Usage: cli_finetune_untrained_steps.sh <mantissa binary> <fixtures dir>
set -u
cli="$1"
fx="$2/hf/finetune"
. "$(dirname "$0")/cli_test_lib.sh"

# 24 records: a prompt of some 40 tokens (a phrase said eight times), a one-word completion.
prompt=$(printf 'the old sailor dreams of the silver sea %.0s' 1 2 3 4 5 6 7 8)
for i in $(seq 24); do
  printf '{"prompt": "%s", "completion": " yes."}\n' "$prompt"
done >"$dir/long.jsonl"

run="finetune --model-dir $fx/llama --data $dir/long.jsonl --block-size 4 --lora-rank 4
  --threads 1 --no-progress-bar --eval-interval 10"
"$cli" $run --batch-size 4 --max-steps 40 --output-dir "$dir/b4" --metrics-json "$dir/b4.json" \
  >"$dir/b4.txt" 2>&1 || fail "the run of batch size 4 failed"
json_list "$dir/b4.json" step_losses >"$dir/b4.losses"
[ "$(wc -l <"$dir/b4.losses")" -eq 40 ] || fail "not 40 step losses"
grep -q "^0\.0*$\|^0$" "$dir/b4.losses" && fail "a step without a trained token has loss 0.0"
empty=$(grep -c "^null$" "$dir/b4.losses")
[ "$empty" -gt 20 ] || fail "fewer than half the steps ($empty) have no loss: the data does not test this"
[ "$(grep -c "warning: $empty of the 40 optimizer steps trained no token" "$dir/b4.txt")" -eq 1 ] ||
  fail "no single warning of the $empty steps without a trained token"
grep -q "a larger --block-size puts the completions in the windows" "$dir/b4.txt" ||
  fail "the warning does not say what to do"
grep -q "^step 10/40  train loss (last 10 steps, [0-9]* trained no token) [0-9]" "$dir/b4.txt" ||
  fail "the validation line does not say how many steps trained no token"
# train_loss (one entry a validation): the mean of the steps that trained, so above the lowest
# of them (with the empty steps' 0.0 it fell below).
lowest=$(grep -v null "$dir/b4.losses" | sort -g | head -n 1)
json_list "$dir/b4.json" train_loss | while read -r l; do
  [ "$l" = null ] || awk -v l="$l" -v m="$lowest" 'BEGIN { exit !(l >= m) }' ||
    fail "train_loss $l is below the lowest trained step's loss $lowest"
done || exit 1

# One block a step: every step of this short run trains no token.
"$cli" $run --batch-size 1 --max-steps 5 --output-dir "$dir/b1" --metrics-json "$dir/b1.json" \
  >"$dir/b1.txt" 2>&1 || fail "the run of batch size 1 failed"
json_list "$dir/b1.json" step_losses | grep -q -v "^null$" && fail "a step of batch size 1 has a loss"
grep -q "warning: 5 of the 5 optimizer steps trained no token" "$dir/b1.txt" ||
  fail "no warning for batch size 1"
for n in 1 5; do
  "$cli" $run --batch-size 1 --max-steps $n --weight-decay 0.1 --output-dir "$dir/wd$n" \
    >"$dir/wd$n.txt" 2>&1 || fail "the run of $n steps with weight decay failed"
done
cmp -s "$dir/wd1/adapter_model.safetensors" "$dir/wd5/adapter_model.safetensors" ||
  fail "steps without a trained token moved the weights (weight decay)"
echo "finetune: steps without a trained token have no loss and no update, and the run says why"
