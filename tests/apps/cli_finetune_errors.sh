#!/bin/sh
# `mantissa finetune` refuses bad inputs before training, naming the file: a missing model
# directory, a JSONL line that is not JSON (its line number), a tokenizer larger than the
# model's embedding (both files), QLoRA without adapters, and --precision 64-true (the weights
# load as float32, bfloat16 or float16) naming the flag and the precisions finetune runs, and a
# --block-size past GPT-2's n_positions (past a Llama's max_position_embeddings: a warning), a
# LoRA or quantization flag that would set nothing, a --model-dir that is a file, and a
# --checkpoint-dir that is a file. A refused run leaves no --output-dir it created behind, nor a
# run that fails later or is stopped by a signal while it tokenizes (nor their --checkpoint-dir).
# A --resume with another --lora-alpha is refused, another --lora-dropout warned of.
# A run stopped by SIGINT during training writes the adapter of the step it stopped at (the same
# bytes as a run to that step).
# Usage: cli_finetune_errors.sh <mantissa binary> <fixtures dir>
set -u
cli="$1"
fx="$2/hf/finetune"
. "$(dirname "$0")/cli_test_lib.sh"
refused() {  # refused NAME MESSAGE ARGS...
  name=$1 msg=$2
  shift 2
  "$cli" finetune --threads 1 --output-dir "$dir/out_$name" "$@" >"$dir/$name.txt" 2>&1
  [ $? -eq 2 ] || fail "$name: not refused with status 2"
  grep -q -- "$msg" "$dir/$name.txt" || fail "$name: not the expected message '$msg'"
  [ ! -e "$dir/out_$name" ] || fail "$name: the refused run left its --output-dir behind"
}
refused missing "--model-dir '$dir/none': no such directory" --model-dir "$dir/none" --data "$fx/qa.jsonl"
printf '{"prompt": "a", "completion": " b"}\n{"prompt": "a", \n' >"$dir/bad.jsonl"
refused badline "bad.jsonl' line 2: not valid JSON" --model-dir "$fx/llama" --data "$dir/bad.jsonl" --lora-rank 4
printf '{"prompt": "a", "completion": " b"}\n{"question": "a"}\n' >"$dir/fields.jsonl"
refused fields "fields.jsonl' line 2: a record needs a 'text' field, or 'prompt' and 'completion' fields" \
  --model-dir "$fx/llama" --data "$dir/fields.jsonl" --lora-rank 4
mkdir "$dir/small"
cp "$fx"/llama/* "$dir/small/" 2>/dev/null
sed 's/"vocab_size": 320/"vocab_size": 200/' "$fx/llama/config.json" >"$dir/small/config.json"
refused vocab "small/tokenizer.json' holds 300 tokens but '.*small/config.json' gives vocab_size 200" \
  --model-dir "$dir/small" --data "$fx/qa.jsonl" --lora-rank 4
refused qlora "fine-tunes through LoRA adapters only" --model-dir "$fx/llama" --data "$fx/qa.jsonl" --precision nf4
# Errors of the shared flags name the command that was run.
refused optimizer "^mantissa: error: \[finetune\] unknown --optimizer 'adamx' (did you mean 'adamw'?)" \
  --model-dir "$fx/llama" --data "$fx/qa.jsonl" --lora-rank 4 --optimizer adamx
refused quantdtype "^mantissa: error: \[finetune\] --quant-dtype must be bf16, fp16 or fp32, got 'bf17'" \
  --model-dir "$fx/llama" --data "$fx/qa.jsonl" --lora-rank 4 --precision nf4 --quant-dtype bf17
# A flag that would set nothing is refused, given at any value (its default too): the LoRA flags
# without --lora-rank (a full fine-tune), or beside --adapter (its adapter_config.json sets
# them); --quant-dtype and --quant-ignore with a precision that quantizes nothing. An unknown
# --quant-dtype is refused whatever the precision.
i=0
for flags in "--lora-alpha 16" "--lora-alpha 32" "--lora-dropout 1.5" "--lora-dropout 0" \
  "--lora-targets c_attn" "--lora-rank 0 --lora-alpha 16"; do
  i=$((i + 1))
  flag=${flags##*--}
  flag="--${flag%% *}"
  refused "full_lora_$i" "^mantissa: error: \[finetune\] $flag sets the LoRA adapters, and without --lora-rank (or --adapter) there are none: this is a full fine-tune; give --lora-rank (16, say) to train adapters, or leave $flag out" \
    --model-dir "$fx/llama" --data "$fx/qa.jsonl" $flags
done
for flags in "--lora-alpha 64" "--lora-dropout 0.1" "--lora-targets q_proj" "--lora-rank 8" "--lora-rank 0"; do
  i=$((i + 1))
  refused "adapter_lora_$i" "^mantissa: error: \[finetune\] --adapter brings its own rank, alpha, dropout and targets (its adapter_config.json): leave ${flags%% *} out" \
    --model-dir "$fx/llama" --data "$fx/qa.jsonl" --adapter "$fx/llama/adapter" $flags
done
refused quant_fp8 "^mantissa: error: \[finetune\] --quant-dtype must be bf16, fp16 or fp32, got 'fp8'" \
  --model-dir "$fx/llama" --data "$fx/qa.jsonl" --quant-dtype fp8
for flags in "--quant-dtype bf16" "--quant-dtype fp16 --lora-rank 4 --precision bf16-mixed" \
  "--quant-ignore lm_head --lora-rank 4"; do
  i=$((i + 1))
  refused "quant_$i" "^mantissa: error: \[finetune\] ${flags%% *} applies to the quantized precisions (nf4, nf4-dq, fp4, fp4-dq, int8, int8-training), not to " \
    --model-dir "$fx/llama" --data "$fx/qa.jsonl" $flags
done
# A file of the model directory given for it is named as a file, with the directory to give.
refused model_file "^mantissa: error: \[finetune\] --model-dir '$fx/llama/model.safetensors' is a file: --model-dir takes the directory that holds config.json, model.safetensors and tokenizer.json (here, perhaps --model-dir '$fx/llama')" \
  --model-dir "$fx/llama/model.safetensors" --data "$fx/qa.jsonl"
# An empty --lora-targets name is refused (the list's empty names adapted every Linear layer).
for targets in , q_proj,,v_proj v_proj,; do
  refused targets "--lora-targets: '$targets' has an empty layer name" \
    --model-dir "$fx/llama" --data "$fx/qa.jsonl" --lora-rank 4 --lora-targets "$targets"
done
# A regular expression in --lora-targets (peft's target_modules as a string) is refused as that:
# the flag takes layer names (a regex comes from an --adapter's adapter_config.json).
refused targets_regex "--lora-targets: 'model.*self_attn.*(q|v)_proj' is a regular expression, not a layer name: --lora-targets takes names of Linear layers" \
  --model-dir "$fx/llama" --data "$fx/qa.jsonl" --lora-rank 4 \
  --lora-targets 'k_proj,model\.layers\.\d+\.self_attn\.(q|v)_proj'
# A --block-size past GPT-2's n_positions (its learned position table) is refused after
# config.json is read, before tokenizing, and leaves no --checkpoint-dir behind.
refused block "\[finetune\] --block-size 128 exceeds the model's n_positions 64 (config.json)" \
  --model-dir "$fx/gpt2" --data "$fx/corpus.txt" --lora-rank 4 --block-size 128 --checkpoint-dir "$dir/ck_block"
grep -q "tokenizing" "$dir/block.txt" && fail "block: refused only after tokenizing"
[ ! -e "$dir/ck_block" ] || fail "block: the refused run left its --checkpoint-dir behind"
# Past a Llama's max_position_embeddings it warns (rotary positions run on) and trains.
mkdir "$dir/short"
cp "$fx"/llama/*.json "$fx"/llama/*.safetensors "$dir/short/"
sed 's/"max_position_embeddings": 256/"max_position_embeddings": 16/' "$fx/llama/config.json" >"$dir/short/config.json"
"$cli" finetune --threads 1 --no-progress-bar --model-dir "$dir/short" --data "$fx/qa.jsonl" --lora-rank 4 \
  --block-size 32 --max-steps 1 --output-dir "$dir/out_short" >"$dir/short.txt" 2>&1 ||
  fail "a Llama --block-size past max_position_embeddings was refused: $(tail -2 "$dir/short.txt")"
grep -q -F "warning: --block-size 32 exceeds the model's max_position_embeddings 16 (config.json)" "$dir/short.txt" ||
  fail "no warning of a --block-size past max_position_embeddings"
refused f64 "--precision 64-true does not apply to finetune; use one of: 32-true, 16-mixed, bf16-mixed, 16-true, bf16-true, transformer-engine, transformer-engine-float16, nf4, nf4-dq, fp4, fp4-dq, int8, int8-training$" \
  --model-dir "$fx/llama" --data "$fx/qa.jsonl" --lora-rank 4 --precision 64-true

# A --checkpoint-dir that is a file is refused with the other outputs, before tokenizing.
: >"$dir/ck_file"
refused ck_file "^mantissa: error: \[output\] --checkpoint-dir '$dir/ck_file' exists and is not a directory" \
  --model-dir "$fx/llama" --data "$fx/qa.jsonl" --lora-rank 4 --checkpoint-dir "$dir/ck_file"
grep -q "tokenizing\|^mantissa finetune:" "$dir/ck_file.txt" && fail "ck_file: refused only after tokenizing"
# A run that fails after it started takes back the --checkpoint-dir it made while still empty.
"$cli" finetune --threads 1 --no-progress-bar --model-dir "$fx/llama" --data "$fx/qa.jsonl" --lora-rank 4 \
  --block-size 32 --max-steps 1 --output-dir "$dir/out_monitor" --checkpoint-dir "$dir/ck_monitor/a" \
  --checkpoint-monitor val_acc >"$dir/monitor.txt" 2>&1 && fail "monitor: a run watching val_acc succeeded"
[ ! -e "$dir/ck_monitor" ] && [ ! -e "$dir/out_monitor" ] ||
  fail "monitor: the failed run left its --checkpoint-dir or --output-dir behind"
# Stopped by a signal while it tokenizes (nothing trained yet): the output directories it made
# are taken back.
cat "$fx/corpus.txt" >"$dir/big.txt"
for i in 1 2 3 4 5 6 7 8 9 10 11 12; do cat "$dir/big.txt" "$dir/big.txt" >"$dir/big2.txt" && mv "$dir/big2.txt" "$dir/big.txt"; done
"$cli" finetune --threads 1 --no-progress-bar --model-dir "$fx/llama" --data "$dir/big.txt" --lora-rank 4 \
  --output-dir "$dir/tok/out" --merge-to "$dir/tok/merged" --checkpoint-dir "$dir/tok/ck" \
  >"$dir/tok.txt" 2>&1 &
pid=$!
wait_for_line "^tokenizing .*: 10 %" "$dir/tok.txt"
[ -d "$dir/tok/out" ] && [ -d "$dir/tok/merged" ] && [ -d "$dir/tok/ck" ] || fail "tok: the run made no output directories before tokenizing"
kill -INT $pid
wait $pid
[ $? -eq 130 ] || fail "tok: the run stopped while tokenizing did not exit with 130"
grep -q "interrupted by SIGINT while tokenizing the data: stopped before training" "$dir/tok.txt" ||
  fail "tok: not stopped while tokenizing"
[ ! -e "$dir/tok" ] || fail "tok: the stopped run left its output directories behind: $(find "$dir/tok")"
rm "$dir/big.txt"

# A resume with another --lora-alpha is refused before the model loads (the saved adapters
# would compute another function); another --lora-dropout is applied with a warning.
lora="--model-dir $fx/llama --data $fx/qa.jsonl --lora-rank 4 --block-size 32 --threads 1 --no-progress-bar"
"$cli" finetune $lora --lora-alpha 32 --max-steps 3 --every-n-train-steps 2 --output-dir "$dir/ra" --checkpoint-dir "$dir/ra_ck" \
  >"$dir/ra.txt" 2>&1 || fail "the run to resume failed: $(tail -2 "$dir/ra.txt")"
"$cli" finetune $lora --lora-alpha 64 --max-steps 3 --output-dir "$dir/ra_alpha" \
  --resume "$dir/ra_ck/epoch=0-step=2.safetensors" >"$dir/ra_alpha.txt" 2>&1
[ $? -eq 2 ] || fail "a resume with another --lora-alpha was not refused with status 2"
grep -q -F "ra_ck/epoch=0-step=2.safetensors was trained with --lora-alpha 32, but --lora-alpha is 64 here: its adapters were trained scaled by alpha / rank = 8 and would be scaled by 16" \
  "$dir/ra_alpha.txt" || fail "ra_alpha: not the expected message"
grep -q '^mantissa finetune:' "$dir/ra_alpha.txt" && fail "ra_alpha: refused only after loading"
[ ! -e "$dir/ra_alpha" ] || fail "ra_alpha: the refused run left its --output-dir behind"
"$cli" finetune $lora --lora-alpha 32 --lora-dropout 0.1 --max-steps 3 --output-dir "$dir/ra_dropout" \
  --resume "$dir/ra_ck/epoch=0-step=2.safetensors" >"$dir/ra_dropout.txt" 2>&1 ||
  fail "a resume with another --lora-dropout failed: $(tail -2 "$dir/ra_dropout.txt")"
grep -q -F "warning: resuming: the LoRA dropout (--lora-dropout) was 0 in the checkpoint and is 0.1 in this run: applying 0.1 from step 2 on" \
  "$dir/ra_dropout.txt" || fail "ra_dropout: no warning of the changed --lora-dropout"

# Stopped by a signal during training, without --checkpoint-dir: nothing is lost. The adapter
# of the step it stopped at is written to --output-dir (new or existing), as its output, its
# message and the metrics JSON say. In warm-up (--warmup-steps beyond the step it stops at) the
# learning rate does not depend on the run's length, so a run of --max-steps N writes the same
# adapter.
long="--model-dir $fx/llama --data $fx/qa.jsonl --lora-rank 4 --block-size 32 --lr 0.02
  --warmup-steps 1000 --eval-interval 1 --limit-val-batches 1 --threads 1 --no-progress-bar"
for case in new existing; do
  out="$dir/stop_$case/adapter"
  [ $case = existing ] && mkdir -p "$out"
  "$cli" finetune $long --max-steps 100000 --output-dir "$out" --metrics-json "$dir/stop_$case.json" \
    >"$dir/stop_$case.txt" 2>&1 &
  pid=$!
  wait_for_line "^step 2/" "$dir/stop_$case.txt"
  kill -INT $pid
  wait $pid
  [ $? -eq 130 ] || fail "$case: the stopped run did not exit with 130 (128 + SIGINT)"
  step=$(sed -n 's/.*"interrupted_after_step": *\([0-9][0-9]*\).*/\1/p' "$dir/stop_$case.json")
  [ -n "$step" ] && [ "$step" -ge 2 ] && [ "$step" -lt 1000 ] || fail "$case: metrics JSON interrupted_after_step is '$step'"
  grep -q '"interrupted_by": "SIGINT"' "$dir/stop_$case.json" || fail "$case: no interrupted_by"
  tr -d ' \n' <"$dir/stop_$case.json" | grep -q -F "\"interrupted_weights_written_to\":[\"$out\"]" ||
    fail "$case: metrics JSON lacks interrupted_weights_written_to"
  grep -q -F "peft adapter of step $step (interrupted) written to $out" "$dir/stop_$case.txt" ||
    fail "$case: the output does not say the adapter holds step $step"
  grep -q -F "mantissa: interrupted by SIGINT after step $step; the weights of step $step are written to $out; no checkpoint was written" \
    "$dir/stop_$case.txt" || fail "$case: no message naming the step and the adapter: $(tail -1 "$dir/stop_$case.txt")"
  [ -f "$out/adapter_config.json" ] && [ -f "$out/adapter_model.safetensors" ] ||
    fail "$case: the stopped run wrote no adapter"
done
"$cli" finetune $long --max-steps "$step" --output-dir "$dir/to_step" >"$dir/to_step.txt" 2>&1 ||
  fail "the run to step $step failed: $(tail -2 "$dir/to_step.txt")"
tensor_data "$out/adapter_model.safetensors" >"$dir/stopped.bin"
tensor_data "$dir/to_step/adapter_model.safetensors" >"$dir/to_step.bin"
cmp -s "$dir/stopped.bin" "$dir/to_step.bin" ||
  fail "the stopped run's adapter is not that of a run of --max-steps $step"
echo "finetune: bad inputs refused; a stopped run writes the adapter of its last step"
