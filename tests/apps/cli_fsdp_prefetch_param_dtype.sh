#!/bin/sh
# fsdp's prefetch and its gathers in the compute dtype (docs/distributed.md, "How fsdp works")
# under mpirun -np NP:
# - the GPT (2 blocks: units wpe, h0, h1 and ln_f) writes the same checkpoint bytes with and
#   without --no-fsdp-prefetch: the prefetch gathers the same bytes, earlier;
# - the MLP 784-64-32-10 under bf16-mixed and 16-mixed writes the same bytes with
#   --fsdp-param-dtype bfloat16 / float16 as with float32: its units are Linears, whose weights
#   and biases autocast rounds to the compute dtype anyway;
# - the GPT under bf16-mixed with --fsdp-param-dtype bfloat16 (its LayerNorms and position
#   embedding compute in float32 with the weights rounded to bfloat16) ends within 1e-2
#   (relative) of the float32 gather's last step loss;
# - a gather dtype that is not the run's compute dtype, or without --strategy fsdp, is refused.
# Usage: cli_fsdp_prefetch_param_dtype.sh MANTISSA MPIEXEC NP
. "$(dirname "$0")/cli_test_lib.sh"
M=$1
MPIEXEC=$2
NP=$3
cd "$dir" || exit 1

run() { "$MPIEXEC" --oversubscribe --bind-to none -np "$NP" "$M" "$@"; }

yes 'the quick brown fox jumps over the lazy dog' | head -n 60 >text.corpus
mlp="train --train-subset 128 --epochs 1 --batch-size $((64 / NP)) --hidden 64,32 --seed 3"
gpt="train --model gpt --layers 2 --width 32 --heads 2 --context 16 --sample-tokens 0
  --text text.corpus --max-steps 3 --batch-size $((8 / NP)) --seed 3"
train() {
  tag=$1
  shift
  run "$@" --strategy fsdp --no-progress-bar --checkpoint-dir "ck-$tag" \
    --metrics-json "$tag.json" >"$tag.txt" 2>&1 || fail "$tag failed: $(tail -n 3 "$tag.txt")"
  tensor_data "ck-$tag/last.safetensors" >"$tag.bin"
  [ -s "$tag.bin" ] || fail "$tag wrote no checkpoint"
}

train gpt-prefetch $gpt
train gpt-blocking $gpt --no-fsdp-prefetch
cmp -s gpt-prefetch.bin gpt-blocking.bin || fail "the prefetching run's weights differ"

for p in bf16-mixed:bfloat16 16-mixed:float16; do
  precision=${p%%:*}
  dtype=${p#*:}
  train "mlp-$precision-f32" $mlp --precision "$precision"
  train "mlp-$precision-$dtype" $mlp --precision "$precision" --fsdp-param-dtype "$dtype"
  cmp -s "mlp-$precision-f32.bin" "mlp-$precision-$dtype.bin" ||
    fail "the MLP under $precision gathered in $dtype trained other weights"
done

train gpt-bf16-f32 $gpt --precision bf16-mixed
train gpt-bf16-bf16 $gpt --precision bf16-mixed --fsdp-param-dtype bfloat16
a=$(json_list gpt-bf16-f32.json step_losses | tail -n 1)
b=$(json_list gpt-bf16-bf16.json step_losses | tail -n 1)
near "$a" "$b" "$(awk -v a="$a" 'BEGIN { print (a < 0 ? -a : a) * 1e-2 }')" ||
  fail "the GPT's last step loss $b with bfloat16 gathers is not within 1e-2 of float32's $a"

run $mlp --strategy fsdp --fsdp-param-dtype bfloat16 >wrong.txt 2>&1 &&
  fail "--fsdp-param-dtype bfloat16 under 32-true was accepted"
grep -q "bfloat16 only under the precision that computes in it (bf16-mixed)" wrong.txt ||
  fail "the refusal does not name the precision: $(cat wrong.txt)"
"$M" $mlp --strategy zero2 --fsdp-param-dtype bfloat16 >zero2.txt 2>&1 &&
  fail "--fsdp-param-dtype under zero2 was accepted"
grep -q "applies to --strategy fsdp" zero2.txt || fail "the refusal is not named: $(cat zero2.txt)"
echo "at $NP ranks: prefetch = blocking bytes; the MLP's narrow gathers = float32's bytes;" \
  "the GPT's bfloat16-gathered last loss $b vs float32's $a"
