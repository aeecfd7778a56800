#!/bin/sh
# --fp8-recipe mxfp8 | mxfp4 (docs/fp8.md "MX recipes"): the MLP trains a few steps under
# transformer-engine and transformer-engine-float16, and the GPT under transformer-engine, with
# finite losses whose last is below the first; every scale in the metrics is a power of 2;
# --fp8-format E4M3 under mxfp4, --fp8-power-2-scales and --fp8-fp32-scales under mxfp8 are
# refused naming the setting.
# Usage: cli_fp8_mx_trains.sh MANTISSA
. "$(dirname "$0")/cli_test_lib.sh"
M=$1
cd "$dir" || exit 1

yes 'the quick brown fox jumps over the lazy dog' | head -n 300 >fox.txt
for R in mxfp8 mxfp4; do
  for P in transformer-engine transformer-engine-float16; do
    "$M" train --model mlp --precision $P --fp8-recipe $R --train-subset 512 --hidden 64 \
      --batch-size 32 --max-steps 12 --lr 0.01 --limit-test-batches 2 --seed 0 --threads 1 \
      --no-progress-bar --metrics-json mlp_${R}_$P.json >mlp_${R}_$P.txt 2>&1 ||
      fail "the $R $P MLP run failed: $(cat mlp_${R}_$P.txt)"
    finite_and_falling mlp_${R}_$P.json
  done
  "$M" train --model gpt --text fox.txt --layers 1 --width 32 --heads 2 --context 16 \
    --batch-size 4 --max-steps 12 --limit-val-batches 2 --limit-test-batches 2 --sample-tokens 0 \
    --seed 0 --threads 1 --no-progress-bar --precision transformer-engine --fp8-recipe $R \
    --metrics-json gpt_$R.json >gpt_$R.txt 2>&1 || fail "the $R GPT run failed: $(cat gpt_$R.txt)"
  finite_and_falling gpt_$R.json
  # E8M0 scales: every recorded scale is a power of 2.
  scales_of gpt_$R.json >$R.scales
  [ "$(wc -l <$R.scales)" -ge 9 ] || fail "fewer than 9 scales in gpt_$R.json"
  [ "$(not_powers_of_2 $R.scales)" = 0 ] || fail "an $R scale is not a power of 2: $(cat $R.scales)"
done

"$M" train --model mlp --precision transformer-engine --fp8-recipe mxfp4 --fp8-format E4M3 \
  --max-steps 1 >fmt.txt 2>&1 && fail "--fp8-format under mxfp4 was accepted"
grep -q "the mxfp4 recipe casts every tensor to E2M1: leave --fp8-format out" fmt.txt ||
  fail "the mxfp4 format message: $(cat fmt.txt)"
"$M" train --model mlp --precision transformer-engine --fp8-recipe mxfp8 --fp8-power-2-scales \
  --max-steps 1 >p2.txt 2>&1 && fail "--fp8-power-2-scales under mxfp8 was accepted"
grep -q "the mxfp8 recipe's E8M0 scales are powers of 2 already" p2.txt ||
  fail "the mxfp8 power-of-2 message: $(cat p2.txt)"
"$M" train --model mlp --precision transformer-engine --fp8-recipe mxfp8 --fp8-fp32-scales \
  --max-steps 1 >f32.txt 2>&1 && fail "--fp8-fp32-scales under mxfp8 was accepted"
grep -q "use_fp32_scales (--fp8-fp32-scales) applies to the block recipe only; the mxfp8 recipe's E8M0 scales are powers of 2 by their format" f32.txt ||
  fail "the fp32-scales message: $(cat f32.txt)"
exit 0
