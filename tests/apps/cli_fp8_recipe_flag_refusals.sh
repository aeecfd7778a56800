#!/bin/sh
# --fp8-recipe (docs/fp8.md "Recipes"): an unknown name is refused while the command line is
# parsed, listing the valid recipes; under a precision without FP8 layers the flag is refused
# naming the precision; the delayed-only flags under current, --fp8-power-2-scales under
# delayed and rowwise and --fp8-format E4M3 under rowwise are refused naming the setting, and so
# are a delayed-only flag or --fp8-format given at their default values, before or after
# --fp8-recipe; --fp8-format under mxfp8, which reads it, is accepted. A switch under a precision
# without FP8 layers is refused naming the precision; a --config file's false leaves a switch
# off; eval takes a switch of the file's recipe without --fp8-recipe, and the recipe's name in
# any case.
# Usage: cli_fp8_recipe_flag_refusals.sh MANTISSA
. "$(dirname "$0")/cli_test_lib.sh"
M=$1
cd "$dir" || exit 1

"$M" train --precision transformer-engine --fp8-recipe curent >bad.txt 2>&1
[ $? -eq 2 ] || fail "an unknown recipe was not a command-line error"
grep -q -- "--fp8-recipe: .*unknown fp8 recipe 'curent' (did you mean 'current'?); valid recipes are: delayed, current, rowwise, rowwise-gw-hp, block, mxfp8, mxfp4" bad.txt ||
  fail "the unknown recipe's message"

"$M" train --model mlp --precision bf16-mixed --fp8-recipe current --max-steps 1 >prec.txt 2>&1 &&
  fail "--fp8-recipe under bf16-mixed was accepted"
grep -q -- "--fp8-recipe applies to the transformer-engine precisions only, not 'bf16-mixed'" prec.txt ||
  fail "the wrong-precision message"

"$M" train --model mlp --precision bf16-mixed --fp8-stats-every 5 --max-steps 1 >se.txt 2>&1 &&
  fail "--fp8-stats-every under bf16-mixed was accepted"
grep -q "fp8-stats-every applies to the transformer-engine precisions only, not 'bf16-mixed'" se.txt ||
  fail "the --fp8-stats-every message: $(cat se.txt)"

"$M" train --model mlp --precision transformer-engine --fp8-recipe current --fp8-margin 2 \
  --max-steps 1 >margin.txt 2>&1 && fail "--fp8-margin under current was accepted"
grep -q "margin 2 applies to the delayed recipe only" margin.txt || fail "the margin message"

"$M" train --model mlp --precision transformer-engine --fp8-power-2-scales --max-steps 1 \
  >p2.txt 2>&1 && fail "--fp8-power-2-scales under delayed was accepted"
grep -q "use_power_2_scales (--fp8-power-2-scales) applies to the current and rowwise-gw-hp recipes only" p2.txt ||
  fail "the power-of-2 message"

"$M" train --model mlp --precision transformer-engine --fp8-recipe rowwise --fp8-power-2-scales \
  --max-steps 1 >rp2.txt 2>&1 && fail "--fp8-power-2-scales under rowwise was accepted"
grep -q "the rowwise recipe rounds its scales down to powers of 2 already; leave it out" rp2.txt ||
  fail "the rowwise power-of-2 message: $(cat rp2.txt)"

"$M" train --model mlp --precision transformer-engine --fp8-recipe rowwise --fp8-format E4M3 \
  --max-steps 1 >fmt.txt 2>&1 && fail "--fp8-format under rowwise was accepted"
grep -q "fp8_format E4M3 applies to the delayed, current and mxfp8 recipes only; the rowwise recipe casts every tensor to E4M3" fmt.txt ||
  fail "the rowwise format message"
for flags in "--fp8-recipe current --fp8-margin 0" "--fp8-margin 0 --fp8-recipe current"; do
  # shellcheck disable=SC2086
  "$M" train --model mlp --precision transformer-engine $flags --max-steps 1 >m0.txt 2>&1
  [ $? -eq 2 ] || fail "$flags was not refused"
  grep -q "margin 0 applies to the delayed recipe only; the current recipe" m0.txt ||
    fail "the default margin's message ($flags): $(cat m0.txt)"
  grep -q "is emulated" m0.txt && fail "the refusal came after the run started ($flags)"
done

"$M" train --model mlp --precision transformer-engine --fp8-amax-history-len 1024 \
  --fp8-recipe block --max-steps 1 >h0.txt 2>&1 && fail "the default history length under block was accepted"
grep -q "amax_history_len 1024 applies to the delayed recipe only" h0.txt ||
  fail "the default history length's message: $(cat h0.txt)"

"$M" train --model mlp --precision transformer-engine --fp8-recipe nvfp4 --fp8-format HYBRID \
  --max-steps 1 >nvf.txt 2>&1 && fail "--fp8-format HYBRID under nvfp4 was accepted"
grep -q "fp8_format HYBRID applies to the delayed, current and mxfp8 recipes only; the nvfp4 recipe" nvf.txt ||
  fail "the nvfp4 format message: $(cat nvf.txt)"

"$M" train --model mlp --precision transformer-engine --fp8-recipe mxfp8 --fp8-format HYBRID \
  --max-steps 1 >mxf.txt 2>&1 || fail "--fp8-format HYBRID under mxfp8 was refused: $(cat mxf.txt)"

"$M" train --model mlp --precision bf16-mixed --fp8-disable-rht --max-steps 1 >sw.txt 2>&1 &&
  fail "--fp8-disable-rht under bf16-mixed was accepted"
grep -q -- "--fp8-disable-rht applies to the transformer-engine precisions only, not 'bf16-mixed'" sw.txt ||
  fail "the switch's wrong-precision message: $(cat sw.txt)"

echo '{"precision": "transformer-engine", "fp8-power-2-scales": false}' >off.json
"$M" train --config off.json --model mlp --max-steps 1 --train-subset 256 --limit-test-batches 1 \
  >off.txt 2>&1 || fail "a --config file's false switch was taken as given: $(cat off.txt)"

"$M" train --model mlp --precision transformer-engine --fp8-recipe NVFP4 --max-steps 1 \
  --train-subset 256 --limit-test-batches 1 --checkpoint-dir ck >nv.txt 2>&1 ||
  fail "the nvfp4 run: $(cat nv.txt)"
"$M" eval --checkpoint ck/last.safetensors --limit-test-batches 1 --fp8-disable-rht >ev.txt 2>&1 ||
  fail "eval refused a switch of the file's recipe: $(cat ev.txt)"
"$M" eval --checkpoint ck/last.safetensors --limit-test-batches 1 --fp8-recipe Nvfp4 >evr.txt 2>&1 ||
  fail "eval refused the file's recipe in another case: $(cat evr.txt)"
exit 0
