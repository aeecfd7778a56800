#!/bin/sh
# --resume of a checkpoint with LoRA adapters but no --lora-rank (or the reverse) was refused by
# the restore with every tensor name that did not fit ("the weights do not fit ImageClassifier:
# missing [model.net.0.bias, ...], unexpected [model.net.0.base_layer.bias, ...]"), where another
# rank was already named with its fix. Both sides now get an error naming --lora-rank and what to
# pass; nothing runs.
# Usage: cli_resume_adapters_on_one_side.sh <mantissa binary>
set -u
cli="$1"
. "$(dirname "$0")/cli_test_lib.sh"
mlp="train --model mlp --train-subset 256 --batch-size 128 --threads 1 --no-progress-bar"
"$cli" $mlp --epochs 1 --checkpoint-dir "$dir/plain" >"$dir/plain.txt" 2>&1 || fail "the plain run failed"
"$cli" $mlp --epochs 1 --precision nf4-dq --lora-rank 8 --init-from "$dir/plain/last.safetensors" \
  --checkpoint-dir "$dir/qlora" >"$dir/qlora.txt" 2>&1 || fail "the QLoRA run failed"

ck="$dir/qlora/last.safetensors"
"$cli" $mlp --epochs 2 --precision nf4-dq --resume "$ck" --checkpoint-dir "$dir/r1" >"$dir/r1.txt" 2>&1
[ $? -eq 2 ] || fail "resume without --lora-rank: not status 2"
grep -q -x -F -- "mantissa: error: [--resume] $ck holds LoRA adapters of rank 8 (it was trained with --lora-rank 8), and --lora-rank is 0 here, where they would have no place: resume with --lora-rank 8" "$dir/r1.txt" ||
  fail "resume without --lora-rank: not the expected error"
! grep -q unexpected "$dir/r1.txt" || fail "resume without --lora-rank: tensor lists"
[ ! -e "$dir/r1/last.safetensors" ] || fail "resume without --lora-rank: a checkpoint was written"

ck="$dir/plain/last.safetensors"
"$cli" $mlp --epochs 2 --lora-rank 4 --resume "$ck" >"$dir/r2.txt" 2>&1
[ $? -eq 2 ] || fail "resume with --lora-rank of a plain run: not status 2"
grep -q -x -F -- "mantissa: error: [--resume] $ck holds no LoRA adapters (it was trained without --lora-rank), and --lora-rank is 4 here: resume without --lora-rank; to fine-tune its weights with adapters, start a new run from them with --init-from instead of --resume" "$dir/r2.txt" ||
  fail "resume with --lora-rank of a plain run: not the expected error"
exit 0
