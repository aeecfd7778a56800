#!/bin/sh
# Under ddp every training loss and accuracy mantissa train reports is the whole job's
# (docs/distributed.md, "What is synchronised"): the epoch line, the progress bar's mean loss,
# the metrics JSON's train_loss / train_accuracy and the CSV logger's train_loss are those of
# one process with the global batch. They were rank 0's (its half of the data) while
# step_losses was the mean over the ranks.
# Usage: cli_ddp_train_loss.sh <mantissa binary>
set -u
cli="$1"
. "$(dirname "$0")/cli_test_lib.sh"
args="--train-subset 2048 --epochs 1 --hidden 32 --seed 3"
# 2 ranks x 64 (16 steps of equal global batches), and 1 process x 128: the same global batches.
(cd "$dir" && "$cli" train --devices 2 $args --batch-size 64 --logger csv --log-dir logs \
  --log-every-n-steps 4 --metrics-json "$dir/ddp.json" >"$dir/ddp.txt" 2>&1) ||
  fail "train --devices 2 failed"
"$cli" train $args --batch-size 128 --no-progress-bar --metrics-json "$dir/one.json" \
  >"$dir/one.txt" 2>&1 || fail "the single-process run failed"
# The start banner names the ranks and the strategy.
grep -q '^mantissa train: model .*, 2 processes x [0-9]* threads* (ddp)$' "$dir/ddp.txt" ||
  fail "the banner does not say 2 processes (ddp)"
loss=$(json_number "$dir/ddp.json" train_loss)
steps=$(json_list "$dir/ddp.json" step_losses | awk '{ s += $1; n++ } END { if (n) printf "%.6f", s / n }')
near "$loss" "$steps" 1e-4 || fail "train_loss $loss, but the mean of step_losses is $steps"
one=$(json_number "$dir/one.json" train_loss)
near "$loss" "$one" 2e-3 || fail "train_loss $loss under 2 ranks, $one in one process"
acc=$(json_number "$dir/ddp.json" train_accuracy)
one_acc=$(json_number "$dir/one.json" train_accuracy)
near "$acc" "$one_acc" 2e-3 || fail "train_accuracy $acc under 2 ranks, $one_acc in one process"
line=$(sed -n 's/^epoch 1\/1  loss \([0-9.]*\)  train acc \([0-9.]*\) .*/\1 \2/p' "$dir/ddp.txt")
near "${line% *}" "$loss" 1e-3 || fail "the epoch line says loss ${line% *}, the JSON $loss"
near "${line#* }" "$acc" 1e-3 || fail "the epoch line says train acc ${line#* }, the JSON $acc"
# The bar's last mean loss (4 significant digits): its plain lines in a file (they were redrawn
# after '\r' on the terminal mpirun gave the ranks, cli.ddp_log_file_has_no_terminal_redraws).
bar=$(tr '\r' '\n' <"$dir/ddp.txt" | sed -n 's/^Epoch 1\/1 .* loss (epoch mean) \([0-9.]*\) .*/\1/p' | tail -n 1)
near "$bar" "$loss" 1e-3 || fail "the progress bar's mean loss is $bar, the JSON $loss"
# The CSV's train_loss of every 4th optimizer step k is step_losses[k - 1], in the row of step
# k - 1 (Lightning's numbering: the first step's row is step 0).
# Rank 0 alone makes the logger's directory: version_0, and no other beside it (every rank
# made one, and rank 0's metrics could land in version_1 beside an empty version_0).
csv=$(find "$dir/logs" -name metrics.csv | head -n 1)
[ -n "$csv" ] && [ -f "$csv" ] || fail "no metrics.csv"
case "$csv" in */version_0/metrics.csv) ;; *) fail "rank 0's metrics.csv is $csv, not in version_0" ;; esac
[ "$(find "$dir/logs" -mindepth 1 -maxdepth 1 -type d | wc -l)" -eq 1 ] ||
  fail "more than one log directory: $(find "$dir/logs" -mindepth 1 -maxdepth 1 -type d)"
col=$(head -n 1 "$csv" | tr ',' '\n' | grep -n '^train_loss$' | cut -d: -f1)
scol=$(head -n 1 "$csv" | tr ',' '\n' | grep -n '^step$' | cut -d: -f1)
[ -n "$col" ] && [ -n "$scol" ] || fail "metrics.csv lacks train_loss or step"
checked=0
for s in 3 7 11 15; do
  v=$(awk -F, -v c="$col" -v sc="$scol" -v s="$s" 'NR > 1 && $sc == s && $c != "" { print $c; exit }' "$csv")
  want=$(json_list "$dir/ddp.json" step_losses | sed -n "$((s + 1))p")
  near "$v" "$want" 1e-5 || fail "metrics.csv says train_loss $v at step $s, step_losses $want"
  checked=$((checked + 1))
done
echo "ddp train loss: $loss (mean step loss $steps, one process $one), acc $acc, $checked CSV rows"
