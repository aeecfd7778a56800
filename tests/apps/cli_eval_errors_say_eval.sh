#!/bin/sh
# An `eval` whose --lora-alpha is out of range was reported as "[train] --lora-alpha ..." (the
# checks it shares with train were tagged with train). They now name the command that runs:
# "[eval] ..." in eval, "[train] ..." in train; for the image models and the GPT.
# Usage: cli_eval_errors_say_eval.sh <mantissa binary>
set -u
cli="$1"
. "$(dirname "$0")/cli_test_lib.sh"
yes 'the quick brown fox jumps over the lazy dog' | head -n 60 >"$dir/corpus.txt"
gpt="--model gpt --layers 1 --width 16 --heads 2 --context 8 --text $dir/corpus.txt"
"$cli" train $gpt --max-steps 1 --sample-tokens 0 --no-progress-bar --precision nf4 \
  --lora-rank 4 --checkpoint-dir "$dir/g" >"$dir/out" 2>&1 || fail "gpt: training failed"
"$cli" train --model mlp --hidden 32 --train-subset 256 --epochs 1 --no-progress-bar \
  --precision nf4 --lora-rank 4 --checkpoint-dir "$dir/m" >"$dir/out" 2>&1 || fail "mlp: training failed"
for ck in "$dir/g" "$dir/m"; do
  "$cli" eval --checkpoint "$ck/last.safetensors" --lora-alpha 1e9 >"$dir/out" 2>"$dir/err"
  [ $? = 2 ] || fail "$ck: eval --lora-alpha 1e9: not exit status 2"
  grep -q -F "mantissa: error: [eval] --lora-alpha 1000000000 with --lora-rank 4 scales" "$dir/err" ||
    fail "$ck: eval --lora-alpha 1e9: the error is not tagged [eval]"
done
# train keeps its tag.
"$cli" train --model mlp --precision nf4 --lora-rank 4 --lora-alpha 1e9 >"$dir/out" 2>"$dir/err"
grep -q -F "mantissa: error: [train] --lora-alpha 1000000000 with --lora-rank 4 scales" "$dir/err" ||
  fail "train --lora-alpha 1e9: the error is not tagged [train]"
exit 0
