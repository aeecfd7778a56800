#!/bin/sh
# An int8-training run keeps its weights trainable in float32 (quantized for each product only),
# so its checkpoint holds plain weights, as a 32-true one does. eval refused it in every other
# precision ("holds int8-training weights, which evaluate only in int8-training ... evaluate the
# full-precision checkpoint it was fine-tuned from"), although --init-from takes the same file
# in any precision. It now evaluates as full-precision weights do: converted to a float
# precision, quantized on load for nf4/int8. The frozen 4-/8-bit modes are still refused.
# Usage: cli_eval_int8_training_checkpoint.sh <mantissa binary>
set -u
cli="$1"
. "$(dirname "$0")/cli_test_lib.sh"
mlp="--model mlp --hidden 32 --train-subset 512 --threads 1 --no-progress-bar"
"$cli" train $mlp --epochs 1 --precision int8-training --checkpoint-dir "$dir/i8t" >"$dir/i8t.txt" 2>&1 ||
  fail "the int8-training run failed"
acc=$(sed -n 's/^final test accuracy: \([0-9.]*\).*/\1/p' "$dir/i8t.txt")
[ -n "$acc" ] || fail "the int8-training run printed no final accuracy"
ck="$dir/i8t/last.safetensors"

# In its own precision: the accuracy the run printed.
"$cli" eval --checkpoint "$ck" --threads 1 >"$dir/own.txt" 2>&1 || fail "eval in int8-training failed"
grep -q "precision int8-training: test loss [0-9.]*, test accuracy $acc\$" "$dir/own.txt" ||
  fail "eval in int8-training: not the run's accuracy $acc"

for p in 32-true bf16-true nf4 int8; do
  "$cli" eval --checkpoint "$ck" --precision $p --threads 1 --metrics-json "$dir/$p.json" >"$dir/$p.txt" 2>&1
  [ $? -eq 0 ] || fail "eval of an int8-training checkpoint in $p: not status 0"
  grep -q "precision $p: test loss [0-9.]*, test accuracy 0\.[0-9]*\$" "$dir/$p.txt" ||
    fail "eval of an int8-training checkpoint in $p: no accuracy"
  a=$(json_number "$dir/$p.json" final_test_accuracy)
  # The same float32 weights: each precision lands within a few points of the run's accuracy.
  near "$a" "$acc" 0.05 || fail "eval in $p: accuracy $a, not near the run's $acc"
done
# In 32-true the float32 weights are used as they are; int8-training's products differ a little.
a32=$(json_number "$dir/32-true.json" final_test_accuracy)
near "$a32" "$acc" 0.02 || fail "eval in 32-true: $a32 against $acc"

# A frozen quantized checkpoint (int8: int8 codes + row scales) still evaluates only in its mode.
"$cli" train $mlp --epochs 1 --precision int8 --checkpoint-dir "$dir/i8" >"$dir/i8.txt" 2>&1 ||
  fail "the int8 run failed"
"$cli" eval --checkpoint "$dir/i8/last.safetensors" --precision 32-true >"$dir/i8eval.txt" 2>&1
[ $? -eq 2 ] || fail "eval of an int8 checkpoint in 32-true: not status 2"
grep -q "holds int8 weights, which evaluate only in int8" "$dir/i8eval.txt" ||
  fail "eval of an int8 checkpoint in 32-true: not the expected error"
exit 0
