#!/bin/sh
# Under ddp every throughput mantissa train reports is the whole job's (docs/cli.md, "Metrics
# JSON"): the epoch line, the progress bar, epoch_samples_per_second and samples_per_second of
# an image model (--devices 2), the GPT's step lines, final line and tokens_per_second (mpirun
# -np 2). The epoch lines and epoch_samples_per_second were one rank's (half the job's at 2
# ranks) while samples_per_second was the job's.
# Usage: cli_ddp_throughput.sh <mantissa binary> <mpirun>
set -u
cli="$1"
mpirun="$2"
. "$(dirname "$0")/cli_test_lib.sh"

# An image model, 2 ranks, one epoch, with the progress bar.
"$cli" train --devices 2 --train-subset 2048 --epochs 1 --batch-size 64 --hidden 32 \
  --metrics-json "$dir/mlp.json" >"$dir/mlp.txt" 2>&1 || fail "train --devices 2 failed"
grep -q '"world_size": 2' "$dir/mlp.json" || fail "world_size is not 2"
job=$(json_number "$dir/mlp.json" samples_per_second)
epoch=$(json_number "$dir/mlp.json" epoch_samples_per_second)
# One epoch: the run's samples/s is its epoch's.
close "$job" "$epoch" 1.001 || fail "samples_per_second $job but epoch_samples_per_second $epoch"
line=$(sed -n 's/^epoch 1\/1 .*  \([0-9]*\) samples\/s .*/\1/p' "$dir/mlp.txt")
close "$line" "$epoch" 1.01 || fail "the epoch line says $line samples/s, the JSON $epoch"
final=$(sed -n 's/^final test accuracy: .*(\([0-9]*\) samples\/s.*/\1/p' "$dir/mlp.txt")
close "$final" "$job" 1.01 || fail "the final line says $final samples/s, the JSON $job"
# The bar keeps its own clock: close to the epoch line, far from half of it. (mpirun gives the
# ranks a terminal: the bar redraws its line after '\r'.)
bar=$(tr '\r' '\n' <"$dir/mlp.txt" | sed -n 's/^Epoch 1\/1 .* \([0-9]*\) samples\/s.*/\1/p' | tail -n 1)
# One-sided toward the bug (one rank's rate reads half the line): the bar's last redraw and the
# epoch line time different spans of a 25 ms epoch, and with no bug the bar read 1.45x the line
# under a neighbour's load and 2.3x (203 708 against 89 134 samples/s) on a quiet machine.
awk -v b="$bar" -v l="$line" 'BEGIN { exit !(b > 0 && l > 0 && b >= 0.75 * l && b <= 10 * l) }' ||
  fail "the progress bar says $bar samples/s, the epoch line $line"

# The GPT, 2 ranks: the last validation's step line and the final line give the JSON's
# tokens/s (the last validation is at the last step, so all three cover the same time).
yes 'the quick brown fox jumps over the lazy dog' | head -n 60 >"$dir/text"
OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMP_NUM_THREADS=1 \
  "$mpirun" --oversubscribe --bind-to none -np 2 "$cli" train --model gpt --layers 1 --width 32 \
  --heads 2 --context 16 --sample-tokens 0 --no-progress-bar --text "$dir/text" --max-steps 4 \
  --eval-interval 2 --metrics-json "$dir/gpt.json" >"$dir/gpt.txt" 2>&1 || fail "gpt under mpirun failed"
grep -q '"world_size": 2' "$dir/gpt.json" || fail "gpt world_size is not 2"
tokens=$(json_number "$dir/gpt.json" tokens_per_second)
# (Under mpirun's terminal each line ends in "\r\n" and a step line starts by clearing the
# bar's line.)
step=$(tr -d '\r' <"$dir/gpt.txt" | sed -n 's/.*step 4\/4 .*  \([0-9]*\) tokens\/s$/\1/p')
close "$step" "$tokens" 1.01 || fail "the step line says $step tokens/s, the JSON $tokens"
final=$(sed -n 's/^final validation loss: .*(\([0-9]*\) tokens\/s.*/\1/p' "$dir/gpt.txt")
close "$final" "$tokens" 1.01 || fail "the final line says $final tokens/s, the JSON $tokens"
samples=$(json_number "$dir/gpt.json" samples_per_second)
# A sample is one window of --context 16 tokens.
close "$tokens" "$(awk -v s="$samples" 'BEGIN { print 16 * s }')" 1.001 ||
  fail "tokens_per_second $tokens is not 16 x samples_per_second $samples"
echo "ddp throughput: mlp $job samples/s (epoch line $line, bar $bar), gpt $tokens tokens/s"
