#!/bin/sh
# --fp8-recipe (docs/fp8.md "Recipes"): an unknown name is refused while the command line is
# parsed, listing the valid recipes; under a precision without FP8 layers the flag is refused
# naming the precision; the delayed-only flags under current, --fp8-power-2-scales under
# delayed and rowwise and --fp8-format E4M3 under rowwise are refused naming the setting.
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
exit 0
