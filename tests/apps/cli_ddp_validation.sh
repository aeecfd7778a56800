#!/bin/sh
# Under --devices N validation is sharded (docs/distributed.md, "Validation and test"): each rank
# evaluates its own part of the set, every example on exactly one rank, and the sums are added
# up over the ranks, so the reported validation loss and accuracy are those of one process on
# the same weights: `mantissa eval` of the run's last checkpoint, for every model. Each rank
# validates its share (rank 0's profiler counts 5 of the 10 test batches of 1000).
# Usage: cli_ddp_validation.sh <mantissa binary>
set -u
cli="$1"
. "$(dirname "$0")/cli_test_lib.sh"

# The MLP, trained 2 epochs under early stopping on val_loss (ranks that judged their own shards
# would disagree on stopping and hang or abort the job).
(cd "$dir" && "$cli" train --devices 2 --train-subset 512 --epochs 2 --hidden 32 --seed 5 \
  --early-stopping-monitor val_loss --checkpoint-dir "$dir/ck_mlp" --profiler simple \
  --no-progress-bar --metrics-json "$dir/mlp.json" >"$dir/mlp.txt" 2>&1) ||
  fail "mlp: train --devices 2 failed"
# Rank 0's share: 5 of the 10 test batches of 1000 per validation, one validation per epoch
# (it ran all 10).
calls=$(sed -n 's/^| \[TrainModule\]validation_step *| *[0-9.]* *| *\([0-9]*\) .*/\1/p' "$dir/mlp.txt")
[ "$calls" = 10 ] || fail "mlp: rank 0 ran $calls validation steps, expected 10 (2 x 5)"

check() { # model, eval flags...
  model=$1
  shift
  "$cli" eval --model "$model" "$@" --checkpoint "$dir/ck_$model/last.safetensors" \
    --metrics-json "$dir/e_$model.json" >"$dir/e_$model.txt" 2>&1 || fail "$model: eval failed"
  for key in final_test_loss final_test_accuracy; do
    a=$(json_number "$dir/$model.json" $key)
    b=$(json_number "$dir/e_$model.json" $key)
    # float32 sums in another order: a few 1e-7 of the loss; the accuracy exactly.
    near "$a" "$b" 1e-6 || fail "$model: $key $a under 2 ranks, $b in one process"
    echo "$model $key: 2 ranks $a, one process $b"
  done
}
check mlp --hidden 32

# The CNN (batch norm: the ranks' running statistics differ, rank 0's are evaluated) and the ViT,
# one step each.
for model in cnn vit; do
  (cd "$dir" && "$cli" train --devices 2 --model $model --train-subset 128 --batch-size 32 \
    --max-steps 1 --checkpoint-dir "$dir/ck_$model" --no-progress-bar \
    --metrics-json "$dir/$model.json" >"$dir/$model.txt" 2>&1) ||
    fail "$model: train --devices 2 failed"
  check $model
done

# The GPT: its validation split has 27 windows of 16 bytes, fewer than 16 global batches of 2 x 4,
# so the run validates all of them (14 on rank 0, 13 on rank 1), as eval does in one process.
awk 'BEGIN { for (i = 1; i <= 480; i++) printf "%s %d\n", (i % 7 ? "num" : "seven"), (i * 7919) % 10007 }' \
  >"$dir/t.txt"
(cd "$dir" && "$cli" train --devices 2 --model gpt --layers 1 --width 32 --heads 2 --context 16 \
  --sample-tokens 0 --text "$dir/t.txt" --batch-size 4 --max-steps 3 --no-progress-bar \
  --checkpoint-dir "$dir/ck_gpt" --metrics-json "$dir/gpt.json" >"$dir/gpt.txt" 2>&1) ||
  fail "gpt: train --devices 2 failed"
"$cli" eval --model gpt --layers 1 --width 32 --heads 2 --context 16 --text "$dir/t.txt" \
  --checkpoint "$dir/ck_gpt/last.safetensors" --metrics-json "$dir/e_gpt.json" \
  >"$dir/e_gpt.txt" 2>&1 || fail "gpt: eval failed"
a=$(json_number "$dir/gpt.json" val_loss_nats_per_char)
b=$(json_number "$dir/e_gpt.json" val_loss_nats_per_char)
near "$a" "$b" 1e-6 || fail "gpt: val_loss_nats_per_char $a under 2 ranks, $b in one process"
echo "gpt val_loss_nats_per_char: 2 ranks $a, one process $b"
exit 0
