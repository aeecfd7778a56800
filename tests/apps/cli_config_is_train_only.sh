#!/bin/sh
# --config fills `mantissa train`'s flags only: given to another command it is refused saying so
# first, with status 2, whatever the file holds (a key of that command's own, such as
# finetune's block-size or generate's model-dir, was refused as "train has no flag" instead),
# and a stream given to it is not read.
# Usage: cli_config_is_train_only.sh <mantissa binary> <fixtures dir>
set -u
cli="$1"
fx="$2/hf/finetune"
. "$(dirname "$0")/cli_test_lib.sh"
train_only() {  # train_only NAME COMMAND ARGS...: refused naming COMMAND
  name=$1 command=$2
  shift 2
  "$cli" "$@" >"$dir/$name.txt" 2>&1
  [ $? -eq 2 ] || fail "$name: not refused with status 2"
  grep -q "^mantissa: error: \[command line\] --config is read by \`mantissa train\` only; give \`mantissa $command\` its flags on the command line" \
    "$dir/$name.txt" || fail "$name: not the train-only message"
  grep -q "unknown key" "$dir/$name.txt" && fail "$name: the keys were checked against train's flags"
}
printf '{"block-size": 16}\n' >"$dir/finetune.json"
train_only finetune finetune --config "$dir/finetune.json" finetune --model-dir "$fx/llama" \
  --data "$fx/corpus.txt" --output-dir "$dir/out"
[ ! -e "$dir/out" ] || fail "the refused finetune wrote its --output-dir"
printf '{"model-dir": "%s"}\n' "$fx/llama" >"$dir/generate.json"
train_only generate generate generate --config "$dir/generate.json" --prompt hi
printf '{"max-steps": 1}\n' >"$dir/train.json"
train_only bench bench --config "$dir/train.json" bench
# A stream is not read: the refusal comes at once, not after the 10 s wait for a writer.
mkfifo "$dir/fifo"
train_only fifo eval --config "$dir/fifo" eval
echo "ok"
