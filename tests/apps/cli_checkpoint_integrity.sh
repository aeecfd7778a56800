#!/bin/sh
# Damage that every other check of a checkpoint lets through, each refused by
# eval and --resume naming what is damaged (docs/checkpoints.md, "What a resume checks" and
# "Checksums"): an nf4 LoRA checkpoint whose recorded lora-rank or quant-dtype its tensors and
# plugin state contradict (not resumed, nor only warned about); an exp_avg whose header
# relabels its BF16 bytes as F16 (not resumed as other numbers); a flipped digit of the stored
# RNG state (not resumed inexactly).
# Usage: cli_checkpoint_integrity.sh <mantissa binary>
set -u
cli="$1"
. "$(dirname "$0")/cli_test_lib.sh"
yes 'the quick brown fox' | head -n 200 >"$dir/fox.corpus"
base="train --model gpt --layers 1 --width 32 --heads 2 --context 16 --batch-size 8 --threads 1
  --seed 0 --text $dir/fox.corpus --max-steps 4 --eval-interval 2 --sample-tokens 0
  --no-progress-bar"
nf4="$base --precision nf4-dq --lora-rank 8 --optimizer adamw8bit"
bf16="$base --precision bf16-true --optimizer adamw"
"$cli" $nf4 --checkpoint-dir "$dir/nf4" >"$dir/nf4.txt" 2>&1 || fail "the nf4 run failed"
"$cli" $bf16 --checkpoint-dir "$dir/bf16" >"$dir/bf16.txt" 2>&1 || fail "the bf16 run failed"

# damage NAME FROM SED: a copy of FROM with SED applied, of the same length (the header's size
# stays right) and changed.
damage() {
  LC_ALL=C sed "$3" "$2" >"$dir/$1.safetensors"
  [ "$(wc -c <"$dir/$1.safetensors")" -eq "$(wc -c <"$2")" ] || fail "$1: the copy changed size"
  ! cmp -s "$2" "$dir/$1.safetensors" || fail "$1: the edit changed nothing"
}
# refused NAME MESSAGE CMD...: CMD exits 2 with MESSAGE (a grep pattern) and writes no checkpoint.
refused() {
  name="$1"
  message="$2"
  shift 2
  "$@" >"$dir/err_$name.txt" 2>&1
  status=$?
  [ $status -eq 2 ] || fail "$name: exit status $status, expected 2"
  grep -q -- "$message" "$dir/err_$name.txt" || fail "$name: not the expected error"
  [ ! -e "$dir/out_$name/last.safetensors" ] || fail "$name: the refused run wrote a checkpoint"
}

ck="$dir/nf4/epoch=0-step=2.safetensors"
damage rank "$ck" 's/lora-rank\\":8,/lora-rank\\":9,/'
refused eval_rank "rank.safetensors: hyper_parameters.lora-rank is 9, but 'model.h0.attn.in_proj.lora_A.weight' has rank 8 (its rows); the file is damaged" \
  "$cli" eval --checkpoint "$dir/rank.safetensors"
refused resume_rank "\[--resume\] .*rank.safetensors: hyper_parameters.lora-rank is 9, but 'model.h0.attn.in_proj.lora_A.weight' has rank 8 (its rows); the file is damaged: use an earlier checkpoint" \
  "$cli" $nf4 --resume "$dir/rank.safetensors" --checkpoint-dir "$dir/out_resume_rank"
damage dtype "$ck" 's/quant-dtype\\":\\"bf16/quant-dtype\\":\\"bf17/'
refused resume_dtype "dtype.safetensors: hyper_parameters.quant-dtype is 'bf17', which is none of bf16, fp16, fp32; the file is damaged" \
  "$cli" $nf4 --resume "$dir/dtype.safetensors" --checkpoint-dir "$dir/out_resume_dtype"
damage fp32 "$ck" 's/quant-dtype\\":\\"bf16/quant-dtype\\":\\"fp32/'
refused eval_fp32 "fp32.safetensors: hyper_parameters.quant-dtype is 'fp32', but the precision plugin's state says its quantized layers compute in 'bfloat16'" \
  "$cli" eval --checkpoint "$dir/fp32.safetensors"

ck="$dir/bf16/epoch=0-step=2.safetensors"
grep -a -q '"optimizer.0.state.5.exp_avg":{"dtype":"BF16"' "$ck" || fail "exp_avg is not BF16"
damage relabel "$ck" 's/"optimizer\.0\.state\.5\.exp_avg":{"dtype":"BF16"/"optimizer.0.state.5.exp_avg":{"dtype":"F16" /'
refused resume_relabel "relabel.safetensors: tensor 'optimizer.0.state.5.exp_avg' is stored as F16 (float16), but AdamW keeps the exp_avg of the bfloat16 parameter '.*' in BF16 (bfloat16): the file is damaged" \
  "$cli" $bf16 --resume "$dir/relabel.safetensors" --checkpoint-dir "$dir/out_resume_relabel"
# The RNG state's first number, one digit changed (it still parses).
damage rng "$ck" 's/rng\\":\\"\([0-9]*\)[0-8] /rng\\":\\"\19 /; t; s/rng\\":\\"\([0-9]*\)9 /rng\\":\\"\18 /'
refused resume_rng "rng.safetensors: field 'rng' of the 'mantissa.trainer' metadata does not match its checksum" \
  "$cli" $bf16 --resume "$dir/rng.safetensors" --checkpoint-dir "$dir/out_resume_rng"
# The undamaged checkpoint resumes.
"$cli" $bf16 --resume "$ck" --checkpoint-dir "$dir/out_clean" >"$dir/out_clean.txt" 2>&1 ||
  fail "the undamaged resume failed"
exit 0
