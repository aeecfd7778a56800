#!/bin/sh
# --fp8-recipe (docs/fp8.md "Recipes"): an unknown name is refused while the command line is
# parsed, listing the valid recipes. Under a precision without FP8 layers the recipe flags and
# switches are refused naming the precision. The delayed-only flags under current,
# --fp8-power-2-scales under delayed and rowwise and --fp8-format under rowwise and nvfp4 are
# refused naming the setting, at their default values too and before or after --fp8-recipe;
# --fp8-format under mxfp8, which reads it, is accepted. A --config file's false leaves a switch
# off; eval takes a switch of the file's recipe without --fp8-recipe, and the recipe's name in
# any case.
# Usage: cli_fp8_recipe_flag_refusals.sh MANTISSA
. "$(dirname "$0")/cli_test_lib.sh"
M=$1
cd "$dir" || exit 1

# refused NAME MESSAGE ARGS...: `train --model mlp --max-steps 1 ARGS` exits 2 (a command-line
# error) printing MESSAGE, before the run starts.
refused() {
  name=$1 msg=$2
  shift 2
  "$M" train --model mlp --max-steps 1 "$@" >"$name.txt" 2>&1
  [ $? -eq 2 ] || fail "$name was not refused: $(cat "$name.txt")"
  grep -q -- "$msg" "$name.txt" || fail "the $name message: $(cat "$name.txt")"
  if grep -q "transformer-engine' is emulated" "$name.txt"; then fail "$name was refused after the run started"; fi
}

refused unknown "--fp8-recipe: .*unknown fp8 recipe 'curent' (did you mean 'current'?); valid recipes are: delayed, current, rowwise, rowwise-gw-hp, block, mxfp8, mxfp4" \
  --precision transformer-engine --fp8-recipe curent
refused precision "--fp8-recipe applies to the transformer-engine precisions only, not 'bf16-mixed'" \
  --precision bf16-mixed --fp8-recipe current
refused stats-every "fp8-stats-every applies to the transformer-engine precisions only, not 'bf16-mixed'" \
  --precision bf16-mixed --fp8-stats-every 5
refused switch-precision "--fp8-disable-rht applies to the transformer-engine precisions only, not 'bf16-mixed'" \
  --precision bf16-mixed --fp8-disable-rht
refused margin "margin 2 applies to the delayed recipe only" \
  --precision transformer-engine --fp8-recipe current --fp8-margin 2
refused power-2 "use_power_2_scales (--fp8-power-2-scales) applies to the current and rowwise-gw-hp recipes only" \
  --precision transformer-engine --fp8-power-2-scales
refused rowwise-power-2 "the rowwise recipe rounds its scales down to powers of 2 already; leave it out" \
  --precision transformer-engine --fp8-recipe rowwise --fp8-power-2-scales
refused rowwise-format "fp8_format E4M3 applies to the delayed, current and mxfp8 recipes only; the rowwise recipe casts every tensor to E4M3" \
  --precision transformer-engine --fp8-recipe rowwise --fp8-format E4M3
refused margin-0 "margin 0 applies to the delayed recipe only; the current recipe" \
  --precision transformer-engine --fp8-recipe current --fp8-margin 0
refused margin-0-first "margin 0 applies to the delayed recipe only; the current recipe" \
  --precision transformer-engine --fp8-margin 0 --fp8-recipe current
refused history-default "amax_history_len 1024 applies to the delayed recipe only" \
  --precision transformer-engine --fp8-amax-history-len 1024 --fp8-recipe block
refused nvfp4-format "fp8_format HYBRID applies to the delayed, current and mxfp8 recipes only; the nvfp4 recipe" \
  --precision transformer-engine --fp8-recipe nvfp4 --fp8-format HYBRID

"$M" train --model mlp --precision transformer-engine --fp8-recipe mxfp8 --fp8-format HYBRID \
  --max-steps 1 >mxf.txt 2>&1 || fail "--fp8-format HYBRID under mxfp8 was refused: $(cat mxf.txt)"

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
