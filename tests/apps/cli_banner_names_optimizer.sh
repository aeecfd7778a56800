#!/bin/sh
# The start banner names the model, the precision, the optimizer, and the --init-from file with
# the step of the run that wrote it (a --save-weights file records none).
# Usage: cli_banner_names_optimizer.sh <mantissa binary>
set -u
cli="$1"
. "$(dirname "$0")/cli_test_lib.sh"
yes 'the quick brown fox jumps over the lazy dog' | head -n 60 >"$dir/corpus"
gpt="train --model gpt --layers 1 --width 16 --heads 2 --context 8 --sample-tokens 0 --no-progress-bar --text $dir/corpus"

"$cli" $gpt --max-steps 2 --optimizer sgd --checkpoint-dir "$dir/ckpt" \
  --save-weights "$dir/weights.safetensors" >"$dir/out" 2>&1 || fail "the first GPT run failed"
grep -q '^mantissa train: model gpt (.*), precision 32-true, optimizer sgd, ' "$dir/out" ||
  fail "the GPT banner does not name the optimizer sgd"
! grep -q '^weights from' "$dir/out" || fail "a run without --init-from names a file"

"$cli" $gpt --max-steps 1 --init-from "$dir/ckpt/last.safetensors" >"$dir/out" 2>&1 ||
  fail "the --init-from run failed"
grep -q '^mantissa train: model gpt (.*), precision 32-true, optimizer adamw, ' "$dir/out" ||
  fail "the GPT banner does not name the default optimizer adamw"
grep -q -x -F -- "weights from '$dir/ckpt/last.safetensors' (step 2 of the run that wrote it)" "$dir/out" ||
  fail "the banner does not name the --init-from checkpoint and its step"

"$cli" $gpt --max-steps 1 --init-from "$dir/weights.safetensors" >"$dir/out" 2>&1 ||
  fail "the --init-from --save-weights run failed"
grep -q -x -F -- "weights from '$dir/weights.safetensors' (a --save-weights file: no step recorded)" "$dir/out" ||
  fail "the banner does not name the --init-from weights file"

# The image models' banner.
"$cli" train --model mlp --hidden 8 --train-subset 64 --batch-size 64 --max-steps 1 \
  --no-progress-bar --optimizer adam >"$dir/out" 2>&1 || fail "the MLP run failed"
grep -q '^mantissa train: model mlp 784-8-10 ([0-9]* parameters), precision 32-true, optimizer adam, ' "$dir/out" ||
  fail "the MLP banner does not name the optimizer adam"
exit 0
