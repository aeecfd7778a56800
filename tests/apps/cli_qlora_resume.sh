#!/bin/sh
# A QLoRA run resumed with other adapter or quantization flags than its checkpoint's
# (docs/trainer.md, "What a resume may change"): another --lora-alpha is refused (the saved
# adapters would count another multiple of what they learned), another --lora-dropout or
# --quant-dtype is applied with a warning. Another --quant-ignore is refused naming the layers
# quantized on one side only (not "the weights do not fit LanguageModel: missing [], unexpected
# [...absmax, ...]"), and --init-from given the QLoRA checkpoint lists at most 8 names of each
# kind (all of them made one line of 3.5 KB here).
# Usage: cli_qlora_resume.sh <mantissa binary>
set -u
cli="$1"
. "$(dirname "$0")/cli_test_lib.sh"
yes 'the quick brown fox' | head -n 400 >"$dir/fox.corpus"
q="train --model gpt --layers 2 --width 64 --heads 4 --context 64 --batch-size 8 --threads 1
  --seed 0 --precision nf4-dq --lora-rank 8 --optimizer adamw8bit --text $dir/fox.corpus
  --warmup-steps 5 --eval-interval 20 --max-steps 30 --every-n-train-steps 15 --sample-tokens 0
  --no-progress-bar"
"$cli" $q --checkpoint-dir "$dir/ck" >"$dir/first.txt" 2>&1 || fail "the first run failed"
ck="$dir/ck/epoch=1-step=15.safetensors"
[ -f "$ck" ] || fail "no checkpoint after step 15"

# Unchanged: no warning.
"$cli" $q --resume "$ck" --checkpoint-dir "$dir/same" >"$dir/same.txt" 2>&1 ||
  fail "the unchanged resume failed"
! grep -q 'warning: resuming' "$dir/same.txt" || fail "the unchanged resume warned"

# --lora-alpha: refused, naming both values and the fix.
"$cli" $q --lora-alpha 64 --resume "$ck" --checkpoint-dir "$dir/alpha" >"$dir/alpha.txt" 2>&1
[ $? -eq 2 ] || fail "--lora-alpha 64 was not refused"
grep -q -- "\[--resume\] $ck was trained with --lora-alpha 16, but --lora-alpha is 64 here: its adapters were trained scaled by alpha / rank = 2 and would be scaled by 8" "$dir/alpha.txt" ||
  fail "--lora-alpha: not the expected error"
grep -q -- 'pass --lora-alpha 16$' "$dir/alpha.txt" || fail "--lora-alpha: no fix named"
[ ! -e "$dir/alpha/last.safetensors" ] || fail "--lora-alpha: the refused run wrote a checkpoint"

# --lora-dropout: warned, applied (the new checkpoint records it).
"$cli" $q --lora-dropout 0.1 --resume "$ck" --checkpoint-dir "$dir/dropout" >"$dir/dropout.txt" 2>&1 ||
  fail "the --lora-dropout resume failed"
grep -q -- 'mantissa: warning: resuming: the LoRA dropout (--lora-dropout) was 0 in the checkpoint and is 0.1 in this run: applying 0.1 from step 15 on' "$dir/dropout.txt" ||
  fail "--lora-dropout: no warning"
grep -a -q 'lora-dropout\\":0.1' "$dir/dropout/last.safetensors" ||
  fail "--lora-dropout: the new checkpoint does not record 0.1"

# --quant-dtype: warned, applied (the plugin of the new checkpoint computes in float16).
"$cli" $q --quant-dtype fp16 --resume "$ck" --checkpoint-dir "$dir/dtype" >"$dir/dtype.txt" 2>&1 ||
  fail "the --quant-dtype resume failed"
grep -q -- 'mantissa: warning: resuming: the quantized layers computed in bf16 in the checkpoint and compute in fp16 in this run (--quant-dtype): applying fp16 from step 15 on' "$dir/dtype.txt" ||
  fail "--quant-dtype: no warning"
grep -a -q 'BitsandbytesPrecision\\":{\\"dtype\\":\\"float16\\"' "$dir/dtype/last.safetensors" ||
  fail "--quant-dtype: the new checkpoint's plugin is not float16"

# --quant-ignore: refused, saying that the quantized layers differ, which, and what to pass.
"$cli" $q --quant-ignore h0 --resume "$ck" --checkpoint-dir "$dir/ignore" >"$dir/ignore.txt" 2>&1
[ $? -eq 2 ] || fail "--quant-ignore h0 was not refused"
grep -q -- "\[checkpoint\] $ck: the set of quantized layers differs from the checkpoint's: quantized in the checkpoint but kept in full precision here: h0.attn.in_proj, h0.attn.out_proj, h0.mlp.fc1, h0.mlp.fc2. It was written with ignore_modules \[\] (--quant-ignore \"\") and this run has \[\"h0\"\] (--quant-ignore h0): --quant-ignore must match the run that wrote the checkpoint; resume with --quant-ignore \"\"$" "$dir/ignore.txt" ||
  fail "--quant-ignore: not the expected error"
! grep -q 'unexpected' "$dir/ignore.txt" || fail "--quant-ignore: the error lists tensor names"
# Another spelling of the same layers is no change.
"$cli" $q --checkpoint-dir "$dir/kept" --quant-ignore h1.mlp >"$dir/kept.txt" 2>&1 ||
  fail "the run with --quant-ignore h1.mlp failed"
"$cli" $q --quant-ignore h1.mlp.fc1,h1.mlp.fc2 --resume "$dir/kept/epoch=1-step=15.safetensors" \
  --checkpoint-dir "$dir/kept2" >"$dir/kept2.txt" 2>&1 || fail "the same layers, spelled otherwise, were refused"

# --init-from with the QLoRA checkpoint: refused, 8 names of each list and how many more.
"$cli" $q --init-from "$dir/ck/last.safetensors" --checkpoint-dir "$dir/init" >"$dir/init.txt" 2>&1
[ $? -eq 2 ] || fail "--init-from a QLoRA checkpoint was not refused"
grep -q -- 'holds LoRA adapters or quantized weights' "$dir/init.txt" || fail "--init-from: not the expected error"
# Its advice named "its --save-weights file" for the GPT, which a QLoRA run's file is not.
grep -q -- 'for the GPT also the --save-weights file of such a run: one written by a quantized or --lora-rank run holds these tensors too, and evaluates with mantissa eval)' "$dir/init.txt" ||
  fail "--init-from: the advice does not tell a QLoRA run's --save-weights file apart"
grep -q -- 'h0.mlp.fc2.bias, ... and 8 more\], unexpected \[' "$dir/init.txt" ||
  fail "--init-from: the missing names are not cut after 8"
grep -q -- ', ... and 64 more\]$' "$dir/init.txt" || fail "--init-from: the unexpected names are not cut after 8"
[ "$(grep error "$dir/init.txt" | wc -c)" -lt 1200 ] || fail "--init-from: the error is still long"
exit 0
