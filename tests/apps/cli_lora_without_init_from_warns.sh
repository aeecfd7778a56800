#!/bin/sh
# --lora-rank freezes the wrapped weights: without --init-from (or --resume) they are the random
# initialisation and the adapters fine-tune nothing. Only the GPT in a 4-/8-bit mode other than
# int8-training said so; `train --precision nf4 --lora-rank 8` on the mlp ended near chance
# accuracy without a word. Every model and precision now warns, and a run with --init-from or
# --resume does not.
# Usage: cli_lora_without_init_from_warns.sh <mantissa binary>
set -u
cli="$1"
. "$(dirname "$0")/cli_test_lib.sh"
mlp="train --model mlp --train-subset 256 --batch-size 128 --threads 1 --no-progress-bar"
base="the last.safetensors of a 32-true run's --checkpoint-dir) to fine-tune it"

"$cli" $mlp --epochs 1 --precision nf4 --lora-rank 8 >"$dir/nf4.txt" 2>&1 || fail "the nf4 run failed"
grep -q -- "^mantissa: warning: precision 'nf4' with --lora-rank 8 but no --init-from: the frozen quantized base weights are the mlp's random initialisation, so the adapters train on top of random weights; pass --init-from with a trained mlp's checkpoint (such as $base$" "$dir/nf4.txt" ||
  fail "mlp nf4: no warning"

"$cli" $mlp --epochs 1 --precision 32-true --lora-rank 4 --checkpoint-dir "$dir/ck" >"$dir/fp32.txt" 2>&1 ||
  fail "the 32-true run failed"
grep -q -- "warning: precision '32-true' with --lora-rank 4 but no --init-from: the frozen base weights are the mlp's random initialisation" "$dir/fp32.txt" ||
  fail "mlp 32-true: no warning"

# int8-training trains its weights, but not under LoRA.
yes 'the quick brown fox jumps over the lazy dog' | head -n 60 >"$dir/fox.corpus"
gpt="train --model gpt --layers 1 --width 32 --heads 2 --context 16 --max-steps 1 --sample-tokens 0
  --no-progress-bar --text $dir/fox.corpus"
"$cli" $gpt --precision int8-training --lora-rank 2 >"$dir/gpt.txt" 2>&1 || fail "the gpt run failed"
grep -q -- "warning: precision 'int8-training' with --lora-rank 2 but no --init-from: the frozen quantized base weights are the GPT's random initialisation" "$dir/gpt.txt" ||
  fail "gpt int8-training: no warning"

# With the weights from a file, nothing to say.
"$cli" $mlp --epochs 1 --checkpoint-dir "$dir/plain" >"$dir/plain.txt" 2>&1 || fail "the plain run failed"
"$cli" $mlp --epochs 1 --precision nf4 --lora-rank 4 --init-from "$dir/plain/last.safetensors" >"$dir/init.txt" 2>&1 ||
  fail "the --init-from run failed"
! grep -q 'no --init-from' "$dir/init.txt" || fail "--init-from: warned"
"$cli" $mlp --precision 32-true --lora-rank 4 --epochs 2 --resume "$dir/ck/last.safetensors" >"$dir/resume.txt" 2>&1 ||
  fail "the --resume run failed"
! grep -q 'no --init-from' "$dir/resume.txt" || fail "--resume: warned"
# bench and plan measure speed and memory, which random base weights do not change: no warning.
"$cli" bench --model mlp --hidden 64 --precisions nf4 --lora-rank 8 --steps 1 --rounds 1 --threads 1 >"$dir/bench.txt" 2>&1 ||
  fail "the bench run failed"
! grep -q 'no --init-from' "$dir/bench.txt" || fail "bench: warned"
"$cli" plan --model mlp --precisions nf4 --lora-rank 8 --memory 64MiB --threads 1 >"$dir/plan.txt" 2>&1 ||
  fail "the plan run failed"
! grep -q 'no --init-from' "$dir/plan.txt" || fail "plan: warned"
exit 0
