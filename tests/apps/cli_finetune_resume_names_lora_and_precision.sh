#!/bin/sh
# finetune --resume of a checkpoint set up otherwise than the run, said as the setting to match
# before the model's weights load, in every precision:
# - a LoRA checkpoint resumed without --lora-rank (and a full fine-tune's with one) was refused
#   with the restore's tensor lists, or under transformer-engine as an --fp8-exclude mismatch
#   (the FP8 layers are named base_layer on one side); now it names the --lora-rank to pass;
# - a bf16-mixed checkpoint resumed under transformer-engine listed the missing fp8_scale
#   tensors; now both precisions are named, as the other direction names them, and the advice
#   is what works for a fine-tune (no `mantissa train --init-from` alone).
# Usage: cli_finetune_resume_names_lora_and_precision.sh <mantissa binary> <tests/fixtures>
set -u
cli="$1"
F="$2/hf/finetune"
. "$(dirname "$0")/cli_test_lib.sh"
T="--model-dir $F/llama --data $F/qa.jsonl --block-size 32 --batch-size 4 --threads 1 --no-progress-bar"
TE="--precision transformer-engine"

"$cli" finetune $T --precision bf16-mixed --lora-rank 8 --max-steps 2 --output-dir "$dir/o1" --checkpoint-dir "$dir/lora" \
  >"$dir/lora.txt" 2>&1 || fail "the LoRA run failed"
"$cli" finetune $T --max-steps 2 --output-dir "$dir/o2" --checkpoint-dir "$dir/full" \
  >"$dir/full.txt" 2>&1 || fail "the full fine-tune failed"
"$cli" finetune $T $TE --fp8-recipe current --lora-rank 8 --max-steps 2 --output-dir "$dir/o3" \
  --checkpoint-dir "$dir/te" >"$dir/te.txt" 2>&1 || fail "the transformer-engine run failed"

ck="$dir/lora/last.safetensors"
lora_msg="mantissa: error: [--resume] $ck holds LoRA adapters of rank 8 (it was trained with --lora-rank 8), and --lora-rank is 0 here, where they would have no place: resume with --lora-rank 8"
for p in "--precision bf16-mixed" "$TE --fp8-recipe mxfp8" "$TE --fp8-recipe current"; do
  "$cli" finetune $T $p --max-steps 300 --output-dir "$dir/x" --resume "$ck" >"$dir/r1.txt" 2>&1
  [ $? -eq 2 ] || fail "$p: LoRA checkpoint without --lora-rank: not status 2"
  grep -q -x -F -- "$lora_msg" "$dir/r1.txt" || fail "$p: LoRA checkpoint without --lora-rank: not the expected error"
  ! grep -q 'fp8-exclude\|unexpected' "$dir/r1.txt" || fail "$p: blames --fp8-exclude or lists tensors"
  [ ! -e "$dir/x" ] || fail "$p: --output-dir was written"
done

ck="$dir/full/last.safetensors"
"$cli" finetune $T $TE --fp8-recipe mxfp8 --lora-rank 4 --max-steps 300 --output-dir "$dir/x" \
  --resume "$ck" >"$dir/r2.txt" 2>&1
[ $? -eq 2 ] || fail "full checkpoint with --lora-rank: not status 2"
grep -q -x -F -- "mantissa: error: [--resume] $ck holds no LoRA adapters (it was trained without --lora-rank), and --lora-rank is 4 here: resume without --lora-rank; to train adapters on its weights, start a new fine-tune with --lora-rank from the model directory its run writes at the end (its --output-dir)" "$dir/r2.txt" ||
  fail "full checkpoint with --lora-rank: not the expected error"

# A bf16-mixed checkpoint under transformer-engine, and the reverse: both precisions named.
fix="Resume with precision 'bf16-mixed' (CLI: --precision bf16-mixed), or start from its weights only"
ck="$dir/lora/last.safetensors"
"$cli" finetune $T $TE --fp8-recipe current --lora-rank 8 --max-steps 300 --output-dir "$dir/x" \
  --resume "$ck" >"$dir/r3.txt" 2>&1
[ $? -eq 2 ] || fail "bf16-mixed checkpoint under transformer-engine: not status 2"
grep -q -F -- "$ck: the checkpoint was saved in precision 'bf16-mixed' and this run's is 'transformer-engine': its weights do not fit" "$dir/r3.txt" ||
  fail "bf16-mixed checkpoint under transformer-engine: the precisions are not named first"
grep -q -F -- "$fix" "$dir/r3.txt" || fail "bf16-mixed checkpoint under transformer-engine: no fix"
ck="$dir/te/last.safetensors"
"$cli" finetune $T --precision bf16-mixed --lora-rank 8 --max-steps 300 --output-dir "$dir/x" \
  --resume "$ck" >"$dir/r4.txt" 2>&1
[ $? -eq 2 ] || fail "transformer-engine checkpoint under bf16-mixed: not status 2"
grep -q -F -- "$ck: the checkpoint was saved in precision 'transformer-engine' and this run's is 'bf16-mixed': the checkpoint holds TransformerEnginePrecision state" "$dir/r4.txt" ||
  fail "transformer-engine checkpoint under bf16-mixed: the precisions are not named"
for f in r3 r4; do
  grep -q -F -- "a new \`mantissa finetune\` with --model-dir the directory its run writes at the end, its --output-dir" "$dir/$f.txt" ||
    fail "$f: finetune's way to start from the weights is not said"
done
exit 0
