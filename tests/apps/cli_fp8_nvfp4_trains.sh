#!/bin/sh
# --fp8-recipe nvfp4 (TransformerEngine's NVFP4BlockScaling, docs/fp8.md "NVFP4"): the MLP trains
# a few steps under transformer-engine and transformer-engine-float16 with finite losses whose
# last is below the first, and its metrics carry each layer's amax, scale and saturated and
# flushed shares; each --fp8-disable-* flag gives another run than the default (and the default
# repeats itself); a run with --fp8-disable-rht stopped at step 6 resumes with the flag to the
# whole run's losses, and without it is refused naming both recipes' settings; the flags under
# another recipe or precision, and --fp8-format under nvfp4, are refused naming the setting.
# Usage: cli_fp8_nvfp4_trains.sh MANTISSA
. "$(dirname "$0")/cli_test_lib.sh"
M=$1
cd "$dir" || exit 1

T="--model mlp --train-subset 512 --hidden 64 --batch-size 32 --max-steps 12 --lr 0.01
  --limit-test-batches 2 --seed 0 --threads 1 --no-progress-bar --fp8-recipe nvfp4"
for P in transformer-engine transformer-engine-float16; do
  "$M" train $T --precision $P --metrics-json $P.json >$P.txt 2>&1 ||
    fail "the $P run failed: $(cat $P.txt)"
  finite_and_falling $P.json
done
for k in amax scale saturated_fraction flushed_fraction; do
  grep -q "\"$k\": " transformer-engine.json || fail "no $k in the metrics"
done

"$M" train $T --precision transformer-engine --metrics-json again.json >again.txt 2>&1 ||
  fail "the repeated run failed: $(cat again.txt)"
json_list again.json step_losses | cmp -s - transformer-engine.json.losses ||
  fail "the same seed gave other losses"
for F in rht stochastic-rounding 2d-quantization; do
  "$M" train $T --precision transformer-engine --fp8-disable-$F --metrics-json $F.json >$F.txt 2>&1 ||
    fail "the --fp8-disable-$F run failed: $(cat $F.txt)"
  finite_and_falling $F.json
  json_list $F.json step_losses | cmp -s - transformer-engine.json.losses &&
    fail "--fp8-disable-$F changed nothing"
done

# The switch is part of the checkpoint's recipe: a resume with it continues the run it came
# from, one without it is refused.
"$M" train $T --precision transformer-engine --fp8-disable-rht --checkpoint-dir ck \
  --every-n-train-steps 6 >ck.txt 2>&1 || fail "the checkpointed run failed: $(cat ck.txt)"
[ -f ck/epoch=0-step=6.safetensors ] || fail "no step-6 checkpoint: $(ls ck)"
"$M" train $T --precision transformer-engine --fp8-disable-rht \
  --resume ck/epoch=0-step=6.safetensors --metrics-json resumed.json >resumed.txt 2>&1 ||
  fail "the resume failed: $(cat resumed.txt)"
json_list resumed.json step_losses | cmp -s - rht.json.losses ||
  fail "the resumed run's losses differ from the --fp8-disable-rht run's"
"$M" train $T --precision transformer-engine --resume ck/epoch=0-step=6.safetensors \
  >noflag.txt 2>&1 && fail "a resume without --fp8-disable-rht was accepted"
grep -q "disable_rht=true, .* but this run uses NVFP4BlockScaling(.*disable_rht=false" noflag.txt ||
  fail "the mismatch is not named: $(cat noflag.txt)"

"$M" train --model mlp --precision transformer-engine --fp8-recipe block --fp8-disable-rht \
  --max-steps 1 >b.txt 2>&1 && fail "--fp8-disable-rht under block was accepted"
grep -q "disable_rht (--fp8-disable-rht) applies to the nvfp4 recipe only" b.txt ||
  fail "the disable-rht message: $(cat b.txt)"
"$M" train --model mlp --precision bf16-mixed --fp8-disable-stochastic-rounding \
  --max-steps 1 >p.txt 2>&1 && fail "--fp8-disable-stochastic-rounding under bf16-mixed was accepted"
grep -q "fp8-disable-stochastic-rounding" p.txt || fail "the precision message: $(cat p.txt)"
"$M" train --model mlp --precision transformer-engine --fp8-recipe nvfp4 --fp8-format E4M3 \
  --max-steps 1 >f.txt 2>&1 && fail "--fp8-format under nvfp4 was accepted"
grep -q "the nvfp4 recipe casts every tensor to E2M1" f.txt || fail "the format message: $(cat f.txt)"
exit 0
