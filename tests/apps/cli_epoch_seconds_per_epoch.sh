#!/bin/sh
# The metrics JSON's epoch_seconds and epoch_samples_per_second hold one entry per epoch the run
# trained, for the GPT and finetune as for the image models: the last entry is the part of an
# epoch that --max-steps cut short (the JSON's "epochs" has the fraction). Each entry's seconds
# times its samples/s is the samples of that epoch: the fixture's 67 blocks of 32 tokens in
# batches of 4 make 17 batches an epoch, all 67 blocks; 20 steps are one epoch and 3 batches of
# the second (12 blocks); 12 steps are 12 batches (48 blocks) of the first.
# Usage: cli_epoch_seconds_per_epoch.sh <mantissa binary> <fixtures dir>
set -u
cli="$1"
fx="$2/hf/finetune"
. "$(dirname "$0")/cli_test_lib.sh"
cd "$dir" || exit 1

# samples FILE: each entry's seconds x samples/s, rounded to a whole number, one a line.
samples() {
  json_list "$1" epoch_seconds >s.txt
  json_list "$1" epoch_samples_per_second >r.txt
  paste s.txt r.txt | awk '{ printf "%.0f\n", $1 * $2 }' | tr '\n' ' '
}
ft="finetune --model-dir $fx/llama --data $fx/qa.jsonl --lora-rank 4 --block-size 32
  --batch-size 4 --threads 1 --no-progress-bar"
for v in "epochs2:--epochs 2:67 67 :2.0" "steps20:--max-steps 20:67 12 :1.1764705882352942" \
  "steps12:--max-steps 12:48 :0.7058823529411765"; do
  name=${v%%:*}
  rest=${v#*:}
  flags=${rest%%:*}
  rest=${rest#*:}
  want=${rest%%:*}
  epochs=${rest#*:}
  # shellcheck disable=SC2086 # the flags split on purpose
  "$cli" $ft $flags --output-dir "out_$name" --metrics-json "$name.json" >"$name.txt" 2>&1 ||
    fail "$name: the fine-tune failed"
  [ "$(samples "$name.json")" = "$want" ] ||
    fail "$name: samples per epoch entry $(samples "$name.json"), expected $want"
  [ "$(json_number "$name.json" epochs)" = "$epochs" ] ||
    fail "$name: epochs $(json_number "$name.json" epochs), expected $epochs"
done

# The GPT: two whole epochs of the same windows.
"$cli" train --model gpt --layers 1 --width 32 --heads 2 --context 16 --sample-tokens 0 \
  --text "$fx/corpus.txt" --batch-size 8 --epochs 2 --threads 1 --no-progress-bar \
  --metrics-json gpt.json >gpt.txt 2>&1 || fail "the GPT run failed"
set -- $(samples gpt.json)
[ $# -eq 2 ] && [ "$1" = "$2" ] && [ "$1" -gt 0 ] || fail "gpt: samples per epoch entry $*"
echo "epoch_seconds: one entry per epoch, the cut-short one its part"
exit 0
