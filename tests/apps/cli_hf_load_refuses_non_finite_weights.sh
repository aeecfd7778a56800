#!/bin/sh
# A model file or a peft adapter file with NaN or inf weights (bytes overwritten with 0xff, bf16
# and f32 NaNs) is refused at load by finetune and generate, naming the file and the tensor, as
# eval and --resume refuse a checkpoint's. finetune ran and blamed the learning rate at its
# first step ("the loss became NaN in optimizer step 1 ... lower the learning rate"), and
# generate printed the prompt and "1 tokens".
# Usage: cli_hf_load_refuses_non_finite_weights.sh <mantissa binary> <tests/fixtures>
set -u
cli="$1"
F="$2/hf/finetune"
. "$(dirname "$0")/cli_test_lib.sh"

# poke FILE OFFSET: 64 bytes of 0xff at OFFSET.
poke() {
  head -c 64 /dev/zero | tr '\0' '\377' | dd of="$1" bs=1 seek="$2" conv=notrunc 2>/dev/null ||
    fail "could not write $1"
}

cp -r "$F/llama" "$dir/model"
chmod -R u+w "$dir/model"
# The file's 8-byte header size and 2064-byte header, then model.layers.0.mlp.down_proj.weight's
# bytes from 41088 on (the fixture's layout; checked here so a regenerated fixture is noticed).
grep -q '"model.layers.0.mlp.down_proj.weight":{"dtype":"BF16","shape":\[64,128\],"data_offsets":\[41088,57472\]}' \
  "$dir/model/model.safetensors" || fail "the fixture's layout changed: adjust the offsets"
poke "$dir/model/model.safetensors" $((8 + 2064 + 41088 + 1000))
want="'$dir/model/model.safetensors': tensor 'model.layers.0.mlp.down_proj.weight' holds a non-finite value (nan): the file is damaged, or the run that wrote it had diverged; download or write the model again"

"$cli" finetune --model-dir "$dir/model" --data "$F/qa.jsonl" --block-size 32 --batch-size 4 \
  --threads 1 --no-progress-bar --lora-rank 8 --max-steps 2 --output-dir "$dir/out" >"$dir/ft.txt" 2>&1
[ $? -eq 2 ] || fail "finetune of a model with NaN weights: not status 2"
grep -q -x -F -- "mantissa: error: [finetune] --model-dir: $want" "$dir/ft.txt" || fail "finetune: not the expected error"
! grep -q 'learning rate' "$dir/ft.txt" || fail "finetune blamed the learning rate"

"$cli" generate --model-dir "$dir/model" --prompt "The little robot" --max-new-tokens 4 \
  --threads 1 >"$dir/gen.txt" 2>&1
[ $? -eq 2 ] || fail "generate with NaN weights: not status 2"
grep -q -x -F -- "mantissa: error: [generate] --model-dir: $want" "$dir/gen.txt" || fail "generate: not the expected error"

# The adapter: base_model.model.model.layers.0.mlp.down_proj.lora_A.weight (F32) from byte 0 of
# the data, after its 3480-byte header.
cp -r "$F/llama/adapter" "$dir/adapter"
chmod -R u+w "$dir/adapter"
grep -q '"base_model.model.model.layers.0.mlp.down_proj.lora_A.weight":{"dtype":"F32","shape":\[4,128\],"data_offsets":\[0,2048\]}' \
  "$dir/adapter/adapter_model.safetensors" || fail "the adapter fixture's layout changed: adjust the offsets"
poke "$dir/adapter/adapter_model.safetensors" $((8 + 3480 + 256))
"$cli" generate --model-dir "$F/llama" --adapter "$dir/adapter" --prompt "A tired cat" \
  --max-new-tokens 4 --threads 1 >"$dir/gen_adapter.txt" 2>&1
[ $? -eq 2 ] || fail "generate with a NaN adapter: not status 2"
grep -q -x -F -- "mantissa: error: [generate] --adapter: '$dir/adapter/adapter_model.safetensors': tensor 'base_model.model.model.layers.0.mlp.down_proj.lora_A.weight' holds a non-finite value (nan): the file is damaged, or the run that trained the adapter had diverged; use another adapter (such as an earlier run's)" \
  "$dir/gen_adapter.txt" || fail "generate --adapter: not the expected error"
"$cli" finetune --model-dir "$F/llama" --adapter "$dir/adapter" --data "$F/qa.jsonl" --block-size 32 \
  --batch-size 4 --threads 1 --no-progress-bar --max-steps 2 --output-dir "$dir/out2" >"$dir/ft_adapter.txt" 2>&1
[ $? -eq 2 ] || fail "finetune with a NaN adapter: not status 2"
grep -q -F -- "tensor 'base_model.model.model.layers.0.mlp.down_proj.lora_A.weight' holds a non-finite value (nan)" \
  "$dir/ft_adapter.txt" || fail "finetune --adapter: not the expected error"
exit 0
