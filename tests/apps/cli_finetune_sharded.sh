#!/bin/sh
# `mantissa finetune --devices 2 --strategy S` on the tiny Llama fixture (docs/distributed.md,
# "Fine-tuning a Hugging Face model on several ranks"):
# - QLoRA (nf4-dq + LoRA rank 8, AdamW): zero1, zero2 and fsdp write the same peft adapter
#   file as ddp, byte for byte, with the same step losses, and the metrics JSON names the
#   strategy and 2 ranks; on plain text, ddp's step losses equal one process's with the same
#   global batch (the same examples, summed in another order) within 1e-5 at the first step
#   and 2e-3 after it (relative).
# - Full fine-tuning in 32-true, of the Llama and of the GPT-2 fixture, and of the Llama in
#   bf16-mixed with activation checkpointing and accumulation: fsdp writes ddp's
#   model.safetensors byte for byte.
# - --memory-limit: the full fine-tune that a budget refuses under ddp (every rank holds all the
#   gradients and AdamW state) trains under fsdp within it.
# Usage: cli_finetune_sharded.sh <mantissa binary> <fixtures dir>
set -u
cli="$1"
fx="$2/hf/finetune"
. "$(dirname "$0")/cli_test_lib.sh"
base="finetune --model-dir $fx/llama --block-size 32 --lr 3e-3 --warmup-steps 1 --max-steps 6
  --eval-interval 3 --threads 1 --seed 3 --no-progress-bar"
common="$base --data $fx/qa.jsonl"
qlora_flags="--precision nf4-dq --lora-rank 8 --optimizer adamw
  --lora-targets q_proj,k_proj,v_proj,o_proj,gate_proj,up_proj,down_proj"
qlora="$common $qlora_flags"

for s in ddp zero1 zero2 fsdp; do
  "$cli" $qlora --batch-size 2 --devices 2 --strategy $s --output-dir "$dir/q_$s" \
    --metrics-json "$dir/q_$s.json" >"$dir/q_$s.txt" 2>&1 || fail "QLoRA under $s failed"
  grep -q '"strategy": "'$s'"' "$dir/q_$s.json" || fail "$s: the metrics JSON does not name the strategy"
  grep -q "^mantissa finetune: .*, 2 processes x 1 thread ($s)\$" "$dir/q_$s.txt" ||
    fail "$s: the start line does not name the ranks and the strategy"
  [ "$(json_number "$dir/q_$s.json" world_size)" = 2 ] || fail "$s: world_size is not 2"
  json_list "$dir/q_$s.json" step_losses >"$dir/q_$s.losses"
  [ "$(wc -l <"$dir/q_$s.losses")" = 6 ] || fail "$s: not 6 step losses"
  if [ $s != ddp ]; then
    cmp -s "$dir/q_ddp/adapter_model.safetensors" "$dir/q_$s/adapter_model.safetensors" ||
      fail "$s's adapter differs from ddp's"
    cmp -s "$dir/q_ddp.losses" "$dir/q_$s.losses" || fail "$s's step losses differ from ddp's"
  fi
done
grep -q "peft adapter written to" "$dir/q_ddp.txt" || fail "rank 0 did not report the adapter"
[ "$(grep -c "peft adapter written to" "$dir/q_ddp.txt")" = 1 ] || fail "more than one rank reported"

# One process with the global batch (2 ranks x 2) sees the same examples in each step, and the
# step's loss is the mean over the tokens of both ranks' blocks (prompt/completion data with
# uneven completions: cli_finetune_token_average.sh).
# fp32 compute (--quant-dtype fp32): in bf16 the two sums' different order moves a loss by up
# to a bf16 ulp (2^-8) within a few steps, so only fp32 can show that the steps are the same.
text="$base --data $fx/corpus.txt $qlora_flags --quant-dtype fp32"
"$cli" $text --batch-size 2 --devices 2 --output-dir "$dir/t_ddp" --metrics-json "$dir/t_ddp.json" \
  >"$dir/t_ddp.txt" 2>&1 || fail "QLoRA on text under ddp failed"
"$cli" $text --batch-size 4 --output-dir "$dir/t_one" --metrics-json "$dir/t_one.json" \
  >"$dir/t_one.txt" 2>&1 || fail "QLoRA on text in one process failed"
json_list "$dir/t_one.json" step_losses >"$dir/t_one.losses"
json_list "$dir/t_ddp.json" step_losses >"$dir/t_ddp.losses"
[ "$(wc -l <"$dir/t_ddp.losses")" = 6 ] || fail "ddp on text: not 6 step losses"
# Every step's loss agrees to 1e-5 (fp32 sums in another order; 4e-7 measured).
paste "$dir/t_one.losses" "$dir/t_ddp.losses" | awk '{ d = $1 - $2; if (d < 0) d = -d;
  if (d > 1e-5 * $1) { print "step " NR ": " $1 " vs " $2; bad = 1 } }
  END { exit bad }' || fail "ddp's step losses are not one process's"

# Full fine-tuning: every weight sharded under fsdp.
for s in ddp fsdp; do
  "$cli" $common --batch-size 2 --precision 32-true --lora-rank 0 --devices 2 --strategy $s \
    --output-dir "$dir/f_$s" --metrics-json "$dir/f_$s.json" >"$dir/f_$s.txt" 2>&1 ||
    fail "full fine-tuning under $s failed"
done
cmp -s "$dir/f_ddp/model.safetensors" "$dir/f_fsdp/model.safetensors" ||
  fail "fsdp's fine-tuned model differs from ddp's"
# bf16-mixed with activation checkpointing (fsdp gathers a unit again for its recomputation)
# and gradient accumulation (the gradients add up whole inside the window) the same.
for s in ddp fsdp; do
  "$cli" $common --batch-size 2 --precision bf16-mixed --lora-rank 0 --activation-checkpointing \
    --accumulate-grad-batches 2 --devices 2 --strategy $s --output-dir "$dir/c_$s" \
    >"$dir/c_$s.txt" 2>&1 || fail "checkpointed bf16-mixed fine-tuning under $s failed"
done
cmp -s "$dir/c_ddp/model.safetensors" "$dir/c_fsdp/model.safetensors" ||
  fail "fsdp's checkpointed, accumulated bf16-mixed fine-tune differs from ddp's"
# GPT-2 (its blocks in transformer.h, learned positions, dropout) the same.
for s in ddp fsdp; do
  "$cli" finetune --model-dir "$fx/gpt2" --data "$fx/corpus.txt" --block-size 32 --lr 3e-3 \
    --warmup-steps 1 --max-steps 6 --eval-interval 3 --threads 1 --seed 3 --no-progress-bar \
    --batch-size 2 --precision 32-true --lora-rank 0 --devices 2 --strategy $s \
    --output-dir "$dir/g_$s" >"$dir/g_$s.txt" 2>&1 || fail "GPT-2 full fine-tuning under $s failed"
done
cmp -s "$dir/g_ddp/model.safetensors" "$dir/g_fsdp/model.safetensors" ||
  fail "fsdp's fine-tuned GPT-2 differs from ddp's"

# A budget ddp cannot train in and fsdp can.
limit=1200KiB
"$cli" $common --batch-size 2 --precision 32-true --lora-rank 0 --devices 2 --strategy ddp \
  --memory-limit $limit --output-dir "$dir/m_ddp" >"$dir/m_ddp.txt" 2>&1 &&
  fail "ddp trained within --memory-limit $limit"
grep -q "memory-limit $limit allows .*--strategy fsdp" "$dir/m_ddp.txt" ||
  fail "ddp's refusal does not name the budget and fsdp"
"$cli" $common --batch-size 2 --precision 32-true --lora-rank 0 --devices 2 --strategy fsdp \
  --memory-limit $limit --output-dir "$dir/m_fsdp" >"$dir/m_fsdp.txt" 2>&1 ||
  fail "fsdp did not train within --memory-limit $limit"
# Bad distributed flags are refused once, in finetune's words, before any rank starts.
"$cli" $qlora --devices 2 --strategy zero2 --fsdp-param-dtype bfloat16 --output-dir "$dir/bad" \
  >"$dir/bad.txt" 2>&1 && fail "--fsdp-param-dtype under zero2 accepted"
[ "$(grep -c 'error: \[finetune\] --fsdp-param-dtype' "$dir/bad.txt")" = 1 ] ||
  fail "the refusal is not said once by finetune"
# --sharded-checkpoint with nothing to write is said once.
"$cli" $qlora --batch-size 2 --devices 2 --strategy zero2 --sharded-checkpoint \
  --output-dir "$dir/w" >"$dir/w.txt" 2>&1 || fail "--sharded-checkpoint without --checkpoint-dir failed"
[ "$(grep -c 'sharded-checkpoint has no effect without --checkpoint-dir' "$dir/w.txt")" = 1 ] ||
  fail "no single warning for --sharded-checkpoint without --checkpoint-dir"
echo "finetune --devices 2: zero1, zero2, fsdp adapters = ddp's; ddp = one process; fsdp full = ddp"
