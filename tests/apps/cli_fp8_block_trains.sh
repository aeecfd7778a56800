#!/bin/sh
# --fp8-recipe block (TransformerEngine's Float8BlockScaling, docs/fp8.md "Block scaling"): the
# MLP and the GPT train a few steps under transformer-engine and transformer-engine-float16 with
# finite losses whose last is below the first; every scale in the metrics is a power of 2, and
# with --fp8-fp32-scales one is not; --fp8-fp32-scales under another recipe and
# --fp8-power-2-scales under block are refused naming the setting.
# Usage: cli_fp8_block_trains.sh MANTISSA
. "$(dirname "$0")/cli_test_lib.sh"
M=$1
cd "$dir" || exit 1

for P in transformer-engine transformer-engine-float16; do
  "$M" train --model mlp --precision $P --fp8-recipe block --train-subset 512 --hidden 64 \
    --batch-size 32 --max-steps 12 --lr 0.01 --limit-test-batches 2 --seed 0 --threads 1 \
    --no-progress-bar --metrics-json mlp_$P.json >mlp_$P.txt 2>&1 || fail "the $P MLP run failed: $(cat mlp_$P.txt)"
  finite_and_falling mlp_$P.json
done

yes 'the quick brown fox jumps over the lazy dog' | head -n 300 >fox.txt
G="--model gpt --text fox.txt --layers 1 --width 32 --heads 2 --context 16 --batch-size 4
  --max-steps 12 --limit-val-batches 2 --limit-test-batches 2 --sample-tokens 0 --seed 0
  --threads 1 --no-progress-bar --precision transformer-engine --fp8-recipe block"
"$M" train $G --metrics-json gpt.json >gpt.txt 2>&1 || fail "the GPT run failed: $(cat gpt.txt)"
finite_and_falling gpt.json

# Powers of 2 by default; --fp8-fp32-scales keeps the mantissa bits.
scales_of gpt.json >p2.scales
[ "$(wc -l <p2.scales)" -ge 9 ] || fail "fewer than 9 scales in gpt.json"
[ "$(not_powers_of_2 p2.scales)" = 0 ] || fail "a block scale is not a power of 2: $(cat p2.scales)"
"$M" train $G --fp8-fp32-scales --metrics-json f.json >f.txt 2>&1 ||
  fail "the --fp8-fp32-scales run failed: $(cat f.txt)"
finite_and_falling f.json
scales_of f.json >f.scales
[ "$(not_powers_of_2 f.scales)" -gt 0 ] || fail "with --fp8-fp32-scales every scale was a power of 2"

"$M" train --model mlp --precision transformer-engine --fp8-recipe current --fp8-fp32-scales \
  --max-steps 1 >f32.txt 2>&1 && fail "--fp8-fp32-scales under current was accepted"
grep -q "use_fp32_scales (--fp8-fp32-scales) applies to the block recipe only" f32.txt ||
  fail "the fp32-scales message: $(cat f32.txt)"
"$M" train --model mlp --precision transformer-engine --fp8-recipe block --fp8-power-2-scales \
  --max-steps 1 >p2.txt 2>&1 && fail "--fp8-power-2-scales under block was accepted"
grep -q "the block recipe rounds its scales to powers of 2 already" p2.txt ||
  fail "the block power-of-2 message: $(cat p2.txt)"
exit 0
