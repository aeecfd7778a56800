#!/bin/sh
# Under ddp a mid-epoch checkpoint carries the whole job's running sums of the epoch in progress
# (docs/distributed.md, "Resuming"): resumed there, the epoch reports the loss and accuracy of
# the run that was not stopped. It carried rank 0's sums, which every rank then took back, so
# the epoch's end counted the first part once per rank and rank 1's share of it not at all.
# The GPT's interval losses (the train loss of each validation) travel the same way.
# Usage: cli_ddp_mid_epoch_resume.sh <mantissa binary>
set -u
cli="$1"
. "$(dirname "$0")/cli_test_lib.sh"
# 2 ranks x 64 over 512 samples: 4 steps an epoch, a checkpoint after step 2 (mid-epoch).
args="train --devices 2 --train-subset 512 --epochs 1 --batch-size 64 --hidden 32 --seed 5 --no-progress-bar"
"$cli" $args --every-n-train-steps 2 --checkpoint-dir "$dir/ckpt" --metrics-json "$dir/whole.json" \
  >"$dir/whole.txt" 2>&1 || fail "the whole run failed"
[ -f "$dir/ckpt/epoch=0-step=2.safetensors" ] || fail "no checkpoint after step 2"
"$cli" $args --resume "$dir/ckpt/epoch=0-step=2.safetensors" --metrics-json "$dir/resumed.json" \
  >"$dir/resumed.txt" 2>&1 || fail "the resumed run failed"
for key in train_loss train_accuracy; do
  a=$(json_number "$dir/whole.json" $key)
  b=$(json_number "$dir/resumed.json" $key)
  near "$a" "$b" 1e-9 || fail "$key: $a in the whole run, $b resumed after step 2"
done
# The GPT: validations every 4 steps, a checkpoint after step 6 (between two validations).
yes 'the quick brown fox jumps over the lazy dog' | head -n 200 >"$dir/text.corpus"
gpt="train --devices 2 --model gpt --layers 1 --width 32 --heads 2 --context 16 --batch-size 4
  --sample-tokens 0 --no-progress-bar --text $dir/text.corpus --max-steps 8 --eval-interval 4 --seed 5"
"$cli" $gpt --every-n-train-steps 6 --checkpoint-dir "$dir/gckpt" --metrics-json "$dir/gwhole.json" \
  >"$dir/gwhole.txt" 2>&1 || fail "the whole GPT run failed"
g=$(ls "$dir"/gckpt/*step=6*.safetensors 2>/dev/null | head -n 1)
[ -n "$g" ] || fail "no GPT checkpoint after step 6"
"$cli" $gpt --resume "$g" --metrics-json "$dir/gresumed.json" >"$dir/gresumed.txt" 2>&1 ||
  fail "the resumed GPT run failed"
# The last validation's train loss: the mean over steps 5-8.
a=$(json_number "$dir/gwhole.json" final_train_loss)
b=$(json_number "$dir/gresumed.json" final_train_loss)
near "$a" "$b" 1e-6 || fail "GPT train loss of steps 5-8: $a in the whole run, $b resumed after step 6"
echo "resumed mid-epoch under 2 ranks: the epoch's loss and accuracy and the GPT's interval loss as the whole run's"
