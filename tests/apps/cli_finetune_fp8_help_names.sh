#!/bin/sh
# finetune's --fp8-* help and errors speak of the Hugging Face model's module names
# (lm_head, model.layers.0.mlp.down_proj), not train's (net.0, h0), and the integer flags
# show INT (they showed TEXT), under train too.
# Usage: cli_finetune_fp8_help_names.sh <mantissa binary> <fixtures dir>
set -u
cli="$1"
fx="$2/hf/finetune"
. "$(dirname "$0")/cli_test_lib.sh"
cd "$dir" || exit 1
"$cli" finetune --help >ft_help.txt 2>&1 || fail "finetune --help failed"
"$cli" train --help >train_help.txt 2>&1 || fail "train --help failed"
grep -A2 -- '--fp8-exclude' ft_help.txt | grep -q 'lm_head,model.layers.0.mlp.down_proj' ||
  fail "finetune's --fp8-exclude help gives no Hugging Face module names"
! grep -A2 -- '--fp8-exclude' ft_help.txt | grep -q 'h0' ||
  fail "finetune's --fp8-exclude help gives train's module names"
grep -A2 -- '--fp8-exclude' train_help.txt | grep -q 'net.0,h0' ||
  fail "train's --fp8-exclude help lost its module names"
for h in ft_help.txt train_help.txt; do
  for flag in --fp8-amax-history-len --fp8-margin; do
    grep -Eq -- "$flag INT( |$)" $h || fail "$h: $flag does not show INT"
  done
done
"$cli" finetune --model-dir "$fx/llama" --data "$fx/qa.jsonl" --precision transformer-engine \
  --fp8-exclude 'lm_head,' >err.txt 2>&1
[ $? -eq 2 ] || fail "an empty --fp8-exclude name was not refused with status 2"
grep -q 'such as lm_head,model.layers.0.mlp.down_proj' err.txt ||
  fail "the --fp8-exclude error gives no Hugging Face module names"
! grep -q 'net.0\|h0' err.txt || fail "the --fp8-exclude error gives train's module names"
exit 0
