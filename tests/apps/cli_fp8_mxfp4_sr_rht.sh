#!/bin/sh
# --fp8-recipe mxfp4 with --fp8-enable-stochastic-rounding and --fp8-enable-rht (Tseng et al.'s
# MXFP4 training; docs/fp8.md "MX recipes"): a GPT run of 8 steps and the same run stopped at
# step 4 and resumed report the same losses and write the same weights and optimizer state byte
# for byte (their CRC-32s) and stochastic rounding stream at step 8; each switch alone gives another run than
# the recipe without switches and than both; a resume without the switches is refused naming
# both settings; the switches under another recipe or precision are refused naming the flag.
# Usage: cli_fp8_mxfp4_sr_rht.sh MANTISSA
. "$(dirname "$0")/cli_test_lib.sh"
M=$1
cd "$dir" || exit 1
yes 'the quick brown fox jumps over the lazy dog' | head -n 300 >fox.txt
G="--model gpt --text fox.txt --layers 1 --width 32 --heads 2 --context 16 --batch-size 4
  --max-steps 8 --eval-interval 4 --limit-val-batches 2 --limit-test-batches 2 --sample-tokens 0
  --seed 0 --threads 1 --no-progress-bar --precision transformer-engine --fp8-recipe mxfp4"
S="--fp8-enable-stochastic-rounding --fp8-enable-rht"
"$M" train $G $S --checkpoint-dir a --every-n-train-steps 4 --metrics-json a.json >a.txt 2>&1 ||
  fail "the 8-step run failed: $(cat a.txt)"
[ -f a/epoch=0-step=4.safetensors ] || fail "no step-4 checkpoint: $(ls a)"
"$M" train $G $S --checkpoint-dir b --resume a/epoch=0-step=4.safetensors --metrics-json b.json \
  >b.txt 2>&1 || fail "the resumed run failed: $(cat b.txt)"
for k in train_loss step_losses val_loss_curve test_loss; do
  sed -n "/\"$k\": \[/,/\]/p" a.json >a.$k
  sed -n "/\"$k\": \[/,/\]/p" b.json >b.$k
  [ -s a.$k ] || fail "a.json has no $k"
  cmp -s a.$k b.$k || fail "$k differs between the whole run and the resumed one"
done
# The step-8 checkpoints hold the same weights and optimizer state (the CRC-32 of each tensor's
# bytes, as the file records them) and the same stochastic rounding stream.
tensors() {
  grep -a -o '\\"\(model\|optimizer\)\.[a-zA-Z0-9_.]*\\":\\"[0-9a-f]\{8\}\\"' "$1" | grep -v fp8_
}
tensors a/epoch=0-step=8.safetensors >a.sums
tensors b/epoch=0-step=8.safetensors >b.sums
[ "$(wc -l <a.sums)" -ge 40 ] || fail "too few tensors in the checkpoint: $(cat a.sums)"
cmp -s a.sums b.sums || fail "the resumed run's weights or optimizer state differ: $(diff a.sums b.sums)"
grep -a -o 'sr_stream[^}]*}' a/epoch=0-step=8.safetensors >a.sr
grep -a -o 'sr_stream[^}]*}' b/epoch=0-step=8.safetensors | cmp -s - a.sr && [ -s a.sr ] ||
  fail "the stochastic rounding stream differs: $(cat a.sr)"

# Each switch changes the run.
"$M" train $G --metrics-json p.json >p.txt 2>&1 || fail "the run without switches failed: $(cat p.txt)"
json_list p.json step_losses >p.losses
json_list a.json step_losses >a.losses
cmp -s p.losses a.losses && fail "the switches changed nothing"
for F in stochastic-rounding rht; do
  "$M" train $G --fp8-enable-$F --metrics-json $F.json >$F.txt 2>&1 ||
    fail "the --fp8-enable-$F run failed: $(cat $F.txt)"
  json_list $F.json step_losses >$F.losses
  cmp -s $F.losses p.losses && fail "--fp8-enable-$F changed nothing"
  cmp -s $F.losses a.losses && fail "--fp8-enable-$F alone ran as both switches"
done

# The switches are part of the checkpoint's recipe.
"$M" train $G --checkpoint-dir c --resume a/epoch=0-step=4.safetensors >c.txt 2>&1 &&
  fail "a resume without the switches was accepted"
grep -q -F "stochastic_rounding=true, rht=true) but this run uses MXLinearConfig(elem_dtype=float4_e2m1fn_x2, block_size=32, scale_calculation_mode=FLOOR)" c.txt ||
  fail "the mismatch is not named: $(cat c.txt)"
grep -q -F -- "--fp8-enable-stochastic-rounding (checkpoint: given; this run: not given), --fp8-enable-rht (checkpoint: given; this run: not given)" c.txt ||
  fail "the flags to give are not named: $(cat c.txt)"

# Elsewhere: refused, naming the flag.
"$M" train --model mlp --precision transformer-engine --fp8-recipe nvfp4 --fp8-enable-rht \
  --max-steps 1 >n.txt 2>&1 && fail "--fp8-enable-rht under nvfp4 was accepted"
grep -q "enable_rht (--fp8-enable-rht) applies to the mxfp4 recipe only" n.txt ||
  fail "the enable-rht message: $(cat n.txt)"
"$M" train --model mlp --precision bf16-mixed --fp8-enable-stochastic-rounding --max-steps 1 \
  >q.txt 2>&1 && fail "--fp8-enable-stochastic-rounding under bf16-mixed was accepted"
grep -q "fp8-enable-stochastic-rounding" q.txt || fail "the precision message: $(cat q.txt)"
exit 0
