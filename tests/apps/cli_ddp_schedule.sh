#!/bin/sh
# An epoch of a ddp run is each rank's shard: --lr-schedule cosine / onecycle over --epochs and
# the GPT's schedule and "batches per epoch" count its batches, so 2 ranks x 32 train as
# 1 process x 64, and the GPT validates the windows of the global batch. They counted the whole loader's batches: at 2 ranks the cosine ran over twice
# the run's steps (the lr ended at half its peak instead of 0) and the GPT printed twice the
# batches an epoch has.
# Usage: cli_ddp_schedule.sh <mantissa binary>
set -u
cli="$1"
. "$(dirname "$0")/cli_test_lib.sh"
args="--train-subset 512 --epochs 2 --hidden 32 --seed 1 --no-progress-bar"
for schedule in cosine onecycle; do
  "$cli" train --devices 2 $args --batch-size 32 --lr-schedule $schedule \
    --metrics-json "$dir/ddp-$schedule.json" >"$dir/ddp.txt" 2>&1 || fail "$schedule: --devices 2 failed"
  "$cli" train $args --batch-size 64 --lr-schedule $schedule --metrics-json "$dir/one-$schedule.json" \
    >"$dir/one.txt" 2>&1 || fail "$schedule: the single-process run failed"
  json_list "$dir/ddp-$schedule.json" step_losses >"$dir/ddp.losses"
  json_list "$dir/one-$schedule.json" step_losses >"$dir/one.losses"
  [ "$(wc -l <"$dir/one.losses")" = 16 ] || fail "$schedule: not 16 steps"
  # Reduction order alone separates them (1e-6 in practice); the old schedule moved the last
  # steps' losses by ~0.05.
  paste "$dir/ddp.losses" "$dir/one.losses" |
    awk '{ d = $1 - $2; if (d < 0) d = -d; if (d > 1e-4) bad = 1 } END { exit bad }' ||
    fail "$schedule: the step losses of 2 ranks x 32 differ from 1 process x 64"
done
# The GPT's banner: an epoch of 2 ranks x 4 has the batches of 1 process x 8.
# Varied lines: on a text of one repeated line every window has the same loss.
awk 'BEGIN { for (i = 1; i <= 600; i++) print i * 7919 % 10007, "the fox", i % 13, "jumps" }' >"$dir/text.txt"
gpt="--model gpt --layers 1 --width 32 --heads 2 --context 16 --sample-tokens 0 --no-progress-bar --text $dir/text.txt --max-steps 2 --eval-interval 2"
"$cli" train --devices 2 $gpt --batch-size 4 --metrics-json "$dir/gpt_ddp.json" >"$dir/gpt_ddp.txt" 2>&1 ||
  fail "gpt --devices 2 failed"
"$cli" train $gpt --batch-size 8 --metrics-json "$dir/gpt_one.json" >"$dir/gpt_one.txt" 2>&1 ||
  fail "gpt in one process failed"
per_epoch() { sed -n 's/.*(\([0-9]*\) batches per epoch)$/\1/p' "$1"; }
[ -n "$(per_epoch "$dir/gpt_one.txt")" ] || fail "no 'batches per epoch' in the GPT's banner"
[ "$(per_epoch "$dir/gpt_ddp.txt")" = "$(per_epoch "$dir/gpt_one.txt")" ] ||
  fail "gpt: $(per_epoch "$dir/gpt_ddp.txt") batches per epoch at 2 ranks x 4, $(per_epoch "$dir/gpt_one.txt") at 1 x 8"
# Validation (not sharded) reads the first 16 batches of the global batch on every rank: the
# validation loss of 2 ranks x 4 is that of 1 process x 8 (it read 16 x 4 windows, another loss).
ddp_val=$(json_number "$dir/gpt_ddp.json" val_loss_nats_per_char)
one_val=$(json_number "$dir/gpt_one.json" val_loss_nats_per_char)
near "$ddp_val" "$one_val" 1e-5 || fail "gpt: val loss $ddp_val at 2 ranks x 4, $one_val at 1 x 8"
echo "ddp schedules and epochs count each rank's batches; the GPT validates the global batch's windows"
