#!/bin/sh
# A switch given twice is refused as a value flag given twice is, in every command: exit 2 and
# "--X was given 2 times; give it once", before anything runs (CLI11 counted a repeated switch
# and went on). A switch given once, or set by --config and given on the command line, still
# runs.
# Usage: cli_repeated_switches_refused.sh <mantissa binary> <fixtures dir>
set -u
cli="$1"
fx="$2/hf/finetune"
. "$(dirname "$0")/cli_test_lib.sh"
cd "$dir" || exit 1
refused() {  # refused NAME SWITCH COMMAND ARGS...
  name=$1 switch=$2
  shift 2
  "$cli" "$@" >"$name.txt" 2>&1
  [ $? -eq 2 ] || fail "$name: $switch given twice was not refused with status 2"
  grep -q -- "$switch was given 2 times; give it once" "$name.txt" ||
    fail "$name: not the expected message"
}
refused train_npb --no-progress-bar train --no-progress-bar --max-steps 1 --no-progress-bar
refused train_rht --fp8-disable-rht train --precision transformer-engine --fp8-recipe nvfp4 \
  --fp8-disable-rht --fp8-disable-rht
refused finetune_rht --fp8-disable-rht finetune --model-dir "$fx/llama" --data "$fx/qa.jsonl" \
  --precision transformer-engine --fp8-recipe nvfp4 --fp8-disable-rht --fp8-disable-rht
refused finetune_ac --activation-checkpointing finetune --model-dir "$fx/llama" \
  --data "$fx/qa.jsonl" --activation-checkpointing --activation-checkpointing=true
refused generate --no-prompt generate --model-dir "$fx/llama" --prompt a --no-prompt --no-prompt
refused compare --quiet compare --quiet --quiet
refused plan --activation-checkpointing plan --activation-checkpointing --activation-checkpointing
refused eval --overwrite-output-dir eval --overwrite-output-dir --overwrite-output-dir
refused bench --activation-checkpointing bench --activation-checkpointing --activation-checkpointing

# Once on the command line and once in --config: the command line's, as for a value flag.
printf '{"no-progress-bar": true}' >cfg.json
"$cli" train --config cfg.json --no-progress-bar --model mlp --hidden 8 --train-subset 64 \
  --batch-size 32 --max-steps 1 --threads 1 >once.txt 2>&1 ||
  fail "a switch in --config and on the command line was refused"
exit 0
