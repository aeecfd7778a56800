#!/bin/sh
# --fp8-recipe RECIPE (current, rowwise, rowwise-gw-hp, block, mxfp8, mxfp4, nvfp4; docs/fp8.md
# "Recipes"): a GPT run of 8 steps and the same run stopped at step 4 and resumed report the same
# training losses, validation curve and test loss, and their last checkpoints evaluate to the same loss (same
# weights; eval reads the recipe from the file); resuming that checkpoint under delayed scaling
# is refused naming both recipes; the run differs from a delayed one. For current: with
# --fp8-power-2-scales every scale in the metrics is a power of 2, and without it not.
# Usage: cli_fp8_recipe_resume_is_exact.sh MANTISSA RECIPE
. "$(dirname "$0")/cli_test_lib.sh"
M=$1
R=$2
cd "$dir" || exit 1
yes 'the quick brown fox jumps over the lazy dog' | head -n 300 >fox.txt
G="--model gpt --text fox.txt --layers 1 --width 32 --heads 2 --context 16 --batch-size 4
  --max-steps 8 --eval-interval 4 --limit-val-batches 2 --limit-test-batches 2 --sample-tokens 0
  --seed 0 --threads 1 --no-progress-bar --precision transformer-engine"
"$M" train $G --fp8-recipe $R --checkpoint-dir a --every-n-train-steps 4 \
  --metrics-json a.json >a.txt 2>&1 || fail "the 8-step run failed"
[ -f a/epoch=0-step=4.safetensors ] || fail "no step-4 checkpoint"
"$M" train $G --fp8-recipe $R --checkpoint-dir b --resume a/epoch=0-step=4.safetensors \
  --metrics-json b.json >b.txt 2>&1 || fail "the resumed run failed"
for k in train_loss step_losses val_loss_curve test_loss; do
  sed -n "/\"$k\": \[/,/\]/p" a.json >a.$k
  sed -n "/\"$k\": \[/,/\]/p" b.json >b.$k
  [ -s a.$k ] || fail "a.json has no $k"
  cmp -s a.$k b.$k || fail "$k differs between the whole run and the resumed one"
done
[ "$(json_number a.json final_test_loss)" = "$(json_number b.json final_test_loss)" ] ||
  fail "final_test_loss differs"
# The same weights: both last checkpoints evaluate alike (eval takes the recipe from the file).
"$M" eval --checkpoint a/last.safetensors --text fox.txt --limit-test-batches 2 >ea.txt 2>&1 ||
  fail "eval of the whole run's checkpoint failed"
"$M" eval --checkpoint b/last.safetensors --text fox.txt --limit-test-batches 2 >eb.txt 2>&1 ||
  fail "eval of the resumed run's checkpoint failed"
# "a/last.safetensors: model gpt, ...: validation loss 5.5155 nats/byte ...", the path cut off.
grep 'validation loss' ea.txt | sed 's/^[^:]*: //' >ea.loss && [ -s ea.loss ] ||
  fail "eval printed no loss"
grep 'validation loss' eb.txt | sed 's/^[^:]*: //' | cmp -s - ea.loss ||
  fail "the two checkpoints evaluate differently"

# Another recipe than the checkpoint's: refused, naming both.
"$M" train $G --fp8-recipe delayed --checkpoint-dir c --resume a/epoch=0-step=4.safetensors \
  >c.txt 2>&1 && fail "a resume under delayed scaling was accepted"
case $R in
current) class="Float8CurrentScaling(fp8_format=HYBRID, use_power_2_scales=false, amax_epsilon=0)" ;;
rowwise) class="ROWWISE(round_scales_to_power_of_2=true)" ;;
rowwise-gw-hp) class="ROWWISE_WITH_GW_HP(round_scales_to_power_of_2=false)" ;;
block) class="Float8BlockScaling(fp8_format=E4M3, power_2_scale=true, amax_epsilon=0, x_block_scaling_dim=1, w_block_scaling_dim=2, grad_block_scaling_dim=1)" ;;
mxfp8) class="MXFP8BlockScaling(fp8_format=HYBRID, block=1x32, scale=E8M0 rounded up)" ;;
mxfp4) class="MXLinearConfig(elem_dtype=float4_e2m1fn_x2, block_size=32, scale_calculation_mode=FLOOR)" ;;
nvfp4) class="NVFP4BlockScaling(fp4_format=E2M1, fp8_format=E4M3, disable_rht=false, disable_stochastic_rounding=false, disable_2d_quantization=false)" ;;
*) fail "unknown recipe $R" ;;
esac
grep -q -F "the checkpoint was trained with the FP8 recipe '$R' ($class) but this run uses 'delayed' (DelayedScaling(" c.txt ||
  fail "the recipe mismatch is not named"
grep -q -- "resume with --fp8-recipe $R" c.txt || fail "the fix is not named"

# Delayed scaling trains differently from step 1 on (its first step casts with scale 1).
"$M" train $G --checkpoint-dir d --metrics-json d.json >d.txt 2>&1 || fail "the delayed run failed"
sed -n '/"step_losses": \[/,/\]/p' d.json | cmp -s - a.step_losses &&
  fail "$R and delayed scaling gave the same losses"
[ "$R" = current ] || exit 0

"$M" train $G --fp8-recipe current --fp8-power-2-scales --metrics-json p.json >p.txt 2>&1 ||
  fail "the --fp8-power-2-scales run failed"
scales_of p.json >p.scales
[ "$(wc -l <p.scales)" -ge 9 ] || fail "fewer than 9 scales in p.json"
[ "$(not_powers_of_2 p.scales)" = 0 ] || fail "a scale is not a power of 2: $(cat p.scales)"
scales_of a.json >a.scales
[ "$(not_powers_of_2 a.scales)" -gt 0 ] || fail "without --fp8-power-2-scales every scale was a power of 2 too"
exit 0
