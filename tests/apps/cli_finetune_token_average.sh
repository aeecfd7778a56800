#!/bin/sh
# `mantissa finetune --devices 2` on prompt/completion data whose blocks train very different
# numbers of completion tokens (docs/pretrained.md, "The loss over every rank's tokens"): the
# tiny Llama fixture fine-tuned with LoRA in 32-true (the loader takes no fp64 weights).
# - By default a step's loss is the mean over the trained tokens of every rank's batches: the
#   2-rank ddp run's step losses and validation losses equal one process's with the same global
#   batch (the same blocks, summed in another order) within 1e-5 (relative; 3e-7 measured), and
#   so do those of fsdp's 2 ranks and of the same split accumulated (--accumulate-grad-batches 2
#   with half the batch) in one process, where --no-average-tokens-across-ranks changes nothing
#   (and is said to).
# - --no-average-tokens-across-ranks averages each rank's own tokens and then the ranks (PyTorch
#   DDP's): its losses differ from one process's by more than 1e-2 (relative; 0.44 measured) at
#   some step, which shows the comparison above can see the difference.
# Usage: cli_finetune_token_average.sh <mantissa binary> <fixtures dir>
set -u
cli="$1"
fx="$2/hf/finetune"
. "$(dirname "$0")/cli_test_lib.sh"

# Records of two kinds, alternating: a long prompt with a one-word completion, and a three-word
# prompt with a long completion. A block of 32 tokens then trains almost none or almost all of
# its targets, and the ranks' batches of a step hold very different counts.
long="The little robot walks to the green hill and looks at a warm loaf of bread while the old
sailor dreams of the silver sea and sings about an open window in the long winter"
long=$(echo $long)
i=0
while [ $i -lt 24 ]; do
  printf '{"prompt": "%s", "completion": " yes."}\n' "$long"
  printf '{"prompt": "A tired cat", "completion": " %s. %s."}\n' "$long" "$long"
  i=$((i + 1))
done >"$dir/mixed.jsonl"

run="finetune --model-dir $fx/llama --data $dir/mixed.jsonl --block-size 32 --lr 1e-2
  --warmup-steps 1 --max-steps 6 --eval-interval 3 --threads 1 --seed 5 --no-progress-bar
  --precision 32-true --lora-rank 8 --optimizer adamw"
"$cli" $run --batch-size 2 --devices 2 --output-dir "$dir/ddp" --metrics-json "$dir/ddp.json" \
  >"$dir/ddp.txt" 2>&1 || fail "2 ranks under ddp failed"
"$cli" $run --batch-size 4 --output-dir "$dir/one" --metrics-json "$dir/one.json" \
  >"$dir/one.txt" 2>&1 || fail "one process failed"
"$cli" $run --batch-size 2 --accumulate-grad-batches 2 --no-average-tokens-across-ranks \
  --output-dir "$dir/acc" --metrics-json "$dir/acc.json" >"$dir/acc.txt" 2>&1 ||
  fail "one process accumulating failed"
grep -q "no-average-tokens-across-ranks has no effect on one process" "$dir/acc.txt" ||
  fail "the flag on one process is not said to do nothing"
"$cli" $run --batch-size 2 --devices 2 --strategy fsdp --output-dir "$dir/fsdp" \
  --metrics-json "$dir/fsdp.json" >"$dir/fsdp.txt" 2>&1 || fail "2 ranks under fsdp failed"
"$cli" $run --batch-size 2 --devices 2 --no-average-tokens-across-ranks --output-dir "$dir/off" \
  --metrics-json "$dir/off.json" >"$dir/off.txt" 2>&1 ||
  fail "2 ranks with --no-average-tokens-across-ranks failed"
grep -q "prompt/completion data" "$dir/one.txt" || fail "the data was not read as prompt/completion"

for r in one ddp fsdp acc off; do
  json_list "$dir/$r.json" step_losses >"$dir/$r.losses"
  json_list "$dir/$r.json" val_loss_curve >>"$dir/$r.losses"
  [ "$(wc -l <"$dir/$r.losses")" -ge 8 ] || fail "$r: fewer than 6 step losses and 2 validations"
  grep -qi 'nan\|inf' "$dir/$r.losses" && fail "$r has a non-finite loss"
done
# rel A B: the largest relative difference between two runs' losses, line by line.
rel() {
  paste "$dir/$1.losses" "$dir/$2.losses" | awk '{ d = ($1 - $2) / $1; if (d < 0) d = -d;
    if (d > m) m = d } END { printf "%.3g\n", m + 0 }'
}
for r in ddp fsdp acc; do
  d=$(rel one $r)
  awk -v d="$d" 'BEGIN { exit !(d <= 1e-5) }' ||
    fail "$r's losses are not one process's (largest relative difference $d): $(paste "$dir/one.losses" "$dir/$r.losses")"
done
d=$(rel one off)
awk -v d="$d" 'BEGIN { exit !(d > 1e-2) }' ||
  fail "--no-average-tokens-across-ranks gives one process's losses (relative difference $d): the test cannot see the per-rank mean"
echo "finetune --devices 2 on uneven completions: ddp = fsdp = one process = accumulated (<= 1e-5); per-rank means differ by $d"
