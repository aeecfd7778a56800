#!/bin/sh
# The two training losses a language-model run prints are labelled with what they average: each
# validation line's "train loss (last K steps)" is the mean of the K step losses since the
# previous validation, and the progress bar's "loss (epoch mean)" the mean of the epoch's step
# losses, also under gradient accumulation with the fine-tune's token-weighted loss (where each
# batch returns only its share of the step's loss). The numbers are checked against the metrics
# JSON's step_losses.
# Usage: cli_loss_labels.sh <mantissa binary> <fixtures dir>
set -u
cli="$1"
fx="$2/hf/finetune"
. "$(dirname "$0")/cli_test_lib.sh"
cd "$dir" || exit 1
# Not a terminal: the bar prints a plain line at the epoch's end (12 steps of 2 batches).
"$cli" finetune --model-dir "$fx/llama" --data "$fx/qa.jsonl" --lora-rank 4 --block-size 32 \
  --batch-size 1 --accumulate-grad-batches 2 --max-steps 12 --eval-interval 5 --threads 1 \
  --output-dir out --metrics-json m.json >run.txt 2>&1 || fail "the fine-tune failed"
json_list m.json step_losses >steps.txt
[ "$(wc -l <steps.txt)" -eq 12 ] || fail "not 12 step losses"
# mean FIRST LAST FORMAT: the mean of step losses FIRST..LAST (1-based), printed with FORMAT.
mean() { awk -v a="$1" -v b="$2" -v f="$3" 'NR >= a && NR <= b { s += $1; n++ } END { printf f, s / n }' steps.txt; }
for v in "5 1 5" "10 6 10" "12 11 12"; do
  set -- $v
  want="step $1/12  train loss (last $(($3 - $2 + 1)) steps) $(mean "$2" "$3" %.4f)  val loss "
  grep -q -F "$want" run.txt || fail "no line '$want'"
done
# %.4g as the bar prints it (C's and fmt's agree for these values).
want="Epoch 1 [====================] 24/24 "
line=$(grep -F "$want" run.txt | tail -n 1)
[ -n "$line" ] || fail "no epoch-end bar line"
bar=$(echo "$line" | sed -n 's/.* loss (epoch mean) \([0-9.]*\) .*/\1/p')
[ "$bar" = "$(mean 1 12 %.4g)" ] || fail "the bar's loss (epoch mean) is $bar, the steps' mean $(mean 1 12 %.4g)"
echo "train loss (last K steps) and loss (epoch mean): the step losses' means"
exit 0
