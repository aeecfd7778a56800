#!/bin/sh
# `mantissa finetune` with --early-stopping-monitor and --checkpoint-monitor:
# - the monitors are checked against what a fine-tune logs (train_loss, val_loss, val_ppl,
#   val_bpb), in finetune's name: val_ppl and val_bpb train, val_acc (an image model's metric)
#   is refused before training with status 2 (val_ppl was refused as a metric the mlp does not
#   log, and val_acc failed once training had started);
# - EarlyStopping judges every validation, those inside an epoch too (--eval-interval 5 over
#   17-batch epochs), as Lightning's does when a run validates inside its epochs: val_loss
#   0.1128 at step 5, 0.1432 at step 10, so patience 1 stops at step 10 with best 0.113 (it
#   was judged at epoch ends only and stopped at step 34 with best 0.190);
# - the early-stopping line follows the validation line it judges (it came before it: the
#   callback ran ahead of the validation printer);
# - resumed from a checkpoint of step 7 (--every-n-train-steps 7), the run stops where the
#   uninterrupted one does, with the same best and final validation loss (the callback's
#   state travels in the checkpoint).
# Usage: cli_finetune_early_stopping.sh <mantissa binary> <fixtures dir>
set -u
cli="$1"
fx="$2/hf/finetune"
. "$(dirname "$0")/cli_test_lib.sh"

run="finetune --model-dir $fx/llama --data $fx/qa.jsonl --block-size 32 --batch-size 4
  --lora-rank 4 --lr 1e-2 --threads 1 --no-progress-bar"

"$cli" $run --max-steps 60 --eval-interval 5 --output-dir "$dir/acc" \
  --early-stopping-monitor val_acc >"$dir/acc.txt" 2>&1
[ $? -eq 2 ] || fail "--early-stopping-monitor val_acc was not refused with status 2"
grep -q -F "mantissa: error: [finetune] --early-stopping-monitor 'val_acc' is not a metric a fine-tune logs while it trains; it logs train_loss, val_loss, val_ppl, val_bpb" \
  "$dir/acc.txt" || fail "val_acc: not the expected message"
grep -q "^step " "$dir/acc.txt" && fail "val_acc was refused only after training had started"

"$cli" $run --max-steps 4 --eval-interval 2 --output-dir "$dir/ppl" \
  --early-stopping-monitor val_ppl --checkpoint-dir "$dir/ck_ppl" --checkpoint-monitor val_bpb \
  >"$dir/ppl.txt" 2>&1 || fail "--early-stopping-monitor val_ppl --checkpoint-monitor val_bpb failed"

es="$run --max-steps 60 --eval-interval 5 --early-stopping-monitor val_loss
  --early-stopping-patience 1"
"$cli" $es --output-dir "$dir/es" --checkpoint-dir "$dir/ck" --every-n-train-steps 7 \
  --metrics-json "$dir/es.json" >"$dir/es.txt" 2>&1 || fail "the early-stopped run failed"
grep -q "did not improve in the last 1 records. Best score: 0.113" "$dir/es.txt" ||
  fail "early stopping did not stop with the best of step 5"
[ "$(json_number "$dir/es.json" steps)" = 10 ] || fail "early stopping did not stop at step 10"
awk '/^step 10\/60 .* val loss / { v = NR } /^mantissa: early stopping:/ { e = NR }
     END { exit !(v && e > v) }' "$dir/es.txt" ||
  fail "the early-stopping line is not printed after the validation line of step 10 it judges"
[ -e "$dir/ck/epoch=0-step=7.safetensors" ] || fail "no checkpoint of step 7"

"$cli" $es --output-dir "$dir/re" --resume "$dir/ck/epoch=0-step=7.safetensors" \
  --metrics-json "$dir/re.json" >"$dir/re.txt" 2>&1 || fail "the resumed run failed"
grep -q "did not improve in the last 1 records. Best score: 0.113" "$dir/re.txt" ||
  fail "the resumed run did not stop with the best of step 5"
[ "$(json_number "$dir/re.json" steps)" = 10 ] || fail "the resumed run did not stop at step 10"
[ "$(json_number "$dir/re.json" val_loss_nats_per_char)" = \
  "$(json_number "$dir/es.json" val_loss_nats_per_char)" ] ||
  fail "the resumed run's final validation loss differs"
echo "finetune: monitors checked against a fine-tune's metrics; early stopping at step 10, resumed exactly"
