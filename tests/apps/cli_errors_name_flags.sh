#!/bin/sh
# Errors reach the command line in its words, not the library's ("[EarlyStopping] patience",
# "[ModelCheckpoint] every_n_train_steps", "[Trainer] fast_dev_run", "gradient_clip_algorithm
# 'l2'", "Trainer(amp_backend='apex', precision='32-true')" with "Try amp_backend='native'", or
# a config switch error reading "(expected see --help)"). Each names the flag as typed and the
# values it takes, before any data is read (the data directory here does not exist).
# Usage: cli_errors_name_flags.sh <mantissa binary>
set -u
cli="$1"
. "$(dirname "$0")/cli_test_lib.sh"
mlp="train --model mlp --data-dir $dir/none --max-steps 1 --no-progress-bar"

# expect_error "FLAGS" "EXPECTED LINE": `mantissa $mlp FLAGS` ends with status 2 and says exactly
# EXPECTED LINE, in no library's words.
expect_error() {
  # shellcheck disable=SC2086
  "$cli" $mlp $1 >"$dir/out" 2>"$dir/err" </dev/null
  status=$?
  [ $status = 2 ] || fail "$1: exit status $status, not 2"
  grep -q -x -F -- "$2" "$dir/err" || fail "$1: not the error '$2'"
  for word in '[EarlyStopping]' '[ModelCheckpoint]' '[Trainer]' '[precision]' 'Trainer(' \
    'amp_backend' 'amp_level' 'every_n_train_steps' 'fast_dev_run' 'gradient_clip_algorithm' \
    'save_top_k' 'min_delta' 'see --help)'; do
    ! grep -q -F -- "$word" "$dir/err" || fail "$1: the error says '$word'"
  done
}

expect_error "--early-stopping-monitor val_loss --early-stopping-patience -1" \
  "mantissa: error: [train] --early-stopping-patience must be 0 or more (validation checks without improvement before the run stops), got -1"
expect_error "--early-stopping-monitor val_loss --early-stopping-mode best" \
  "mantissa: error: [train] --early-stopping-mode must be min or max, got 'best'"
expect_error "--checkpoint-dir $dir/ckpt --every-n-train-steps -1" \
  "mantissa: error: [train] --every-n-train-steps must be 0 (a checkpoint per epoch) or a positive number of optimizer steps, got -1"
expect_error "--checkpoint-dir $dir/ckpt --save-top-k -2" \
  "mantissa: error: [train] --save-top-k must be -1 (keep every checkpoint), 0 (only last.safetensors) or a positive count, got -2"
expect_error "--checkpoint-dir $dir/ckpt --checkpoint-monitor val_loss --checkpoint-mode up" \
  "mantissa: error: [train] --checkpoint-mode must be min or max, got 'up'"
expect_error "--fast-dev-run -1" \
  "mantissa: error: [train] --fast-dev-run must be 0 (off) or a positive number of batches, got -1"
expect_error "--gradient-clip-algorithm l2" \
  "mantissa: error: [train] --gradient-clip-algorithm must be norm or value, got 'l2'"
expect_error "--check-val-every-n-epoch 0" \
  "mantissa: error: [train] --check-val-every-n-epoch must be at least 1, got 0"
expect_error "--num-sanity-val-steps -2" \
  "mantissa: error: [train] --num-sanity-val-steps must be -1 (every validation batch), 0 (none) or a positive number of batches, got -2"
for precision in 32-true bf16-mixed nf4; do
  expect_error "--amp-backend apex --precision $precision" \
    "mantissa: error: [train] --amp-backend apex runs with --precision 16-mixed only, got --precision '$precision'; leave --amp-backend out (native, the default) for other precisions"
done
expect_error "--amp-backend apx" "mantissa: error: [train] --amp-backend must be native or apex, got 'apx'"
expect_error "--amp-level O1" \
  "mantissa: error: [train] --amp-level 'O1' applies to --amp-backend apex (with --precision 16-mixed) only; leave it out, or add --amp-backend apex"
expect_error "--amp-backend apex --precision 16-mixed --amp-level O4" \
  "mantissa: error: [train] --amp-level must be O0, O1, O2 or O3 (letter O, then a digit), got 'O4'"

expect_error "--profiler simpel" \
  "mantissa: error: [train] unknown --profiler 'simpel' (did you mean 'simple'?); valid values are: simple, none"
expect_error "--strategy dp" \
  "mantissa: error: [train] unknown --strategy 'dp' (did you mean 'ddp'?); valid values are: auto, ddp, zero1, zero2, fsdp, single_device"
expect_error "--strategy zero3" \
  "mantissa: error: [train] --strategy zero3: ZeRO stage 3 (parameters, gradients and optimizer state sharded) is --strategy fsdp here"
expect_error "--accelerator gpus" \
  "mantissa: error: [train] unknown --accelerator 'gpus' (did you mean 'gpu'?); valid values are: cpu, gpu, cuda, auto"
expect_error "--accelerator mps" \
  "mantissa: error: [train] --accelerator mps is not available: mantissa has no mps backend; use --accelerator cpu, gpu (CUDA) or auto"
expect_error "--float32-matmul-precision hihg" \
  "mantissa: error: [train] unknown --float32-matmul-precision 'hihg' (did you mean 'high'?); valid values are: highest, high, medium"
# Refused before the data loads (it was checked after).
expect_error "--optimizer sgdd" \
  "mantissa: error: [train] unknown --optimizer 'sgdd' (did you mean 'sgd'?); valid values are: adamw, adam, sgd, adamw8bit, adam8bit"

# A --config file's switch given a value that is no truth value names the key and true/false.
printf '{"no-progress-bar": "maybe"}\n' >"$dir/run.json"
"$cli" --config "$dir/run.json" $mlp >"$dir/out" 2>"$dir/err" </dev/null
[ $? = 2 ] || fail "config switch \"maybe\": not exit status 2"
grep -q -F -- "[config] $dir/run.json: key 'no-progress-bar' is a switch: give true or false, not 'maybe'" "$dir/err" ||
  fail "config switch \"maybe\": not named as a switch"
! grep -q -F -- "see --help)" "$dir/err" || fail "config switch \"maybe\": '(expected see --help)'"

# A switch written with "=" takes true or false only ("=2" was counted as on, "=" taken as on).
expect_error "--detect-anomaly=2" \
  "mantissa: error: [command line] --detect-anomaly is a switch: give it alone, or ={true,false}, not '2'"
expect_error "--detect-anomaly=" \
  "mantissa: error: [command line] --detect-anomaly is a switch: give it alone, or ={true,false}, not ''"
# A decimal number past double's range would read as inf.
# shellcheck disable=SC2086
"$cli" $mlp --lr 1e400 >"$dir/out" 2>"$dir/err" </dev/null
[ $? = 2 ] || fail "--lr 1e400: not exit status 2"
grep -q -F -- "mantissa: error: [command line] --lr: '1e400' is out of range (expected a number such as 0.001, the default)" "$dir/err" ||
  fail "--lr 1e400: not refused as out of range"

# An error the library reports about a flag's value (in its own words, under its own tag) comes
# out under the command with the flag as typed in front: a precision, a model, a path.
# expect_named "COMMAND ARGS" "EXPECTED LINE": status 2 and exactly EXPECTED LINE.
expect_named() {
  # shellcheck disable=SC2086
  "$cli" $1 >"$dir/out" 2>"$dir/err" </dev/null
  status=$?
  [ $status = 2 ] || fail "$1: exit status $status, not 2"
  grep -q -x -F -- "$2" "$dir/err" || fail "$1: not the error '$2'"
}
valid="32-true, 64-true, 16-mixed, bf16-mixed, 16-true, bf16-true, transformer-engine, transformer-engine-float16, nf4, nf4-dq, fp4, fp4-dq, int8, int8-training (legacy aliases: 16, 32, 64, bf16)"
expect_named "$mlp --precision nan" \
  "mantissa: error: [train] --precision: unknown precision 'nan' (did you mean 'nf4'?); valid values are: $valid"
expect_named "eval --checkpoint $dir/none.safetensors --precision bf16_mixed" \
  "mantissa: error: [eval] --precision: unknown precision 'bf16_mixed' (did you mean 'bf16-mixed'?); valid values are: $valid"
expect_named "train --model mpl --max-steps 1" \
  "mantissa: error: [train] --model: unknown model 'mpl' (did you mean 'mlp'?); valid values are: mlp, cnn, vit, gpt"
long=$(printf '%05000d' 0)
"$cli" train --model "$long" >"$dir/out" 2>"$dir/err" </dev/null
grep -q "^mantissa: error: \[train\] --model: unknown model '00000" "$dir/err" ||
  fail "a 5000-character --model: the flag is not named"
expect_named "train --model gpt --text /dev/zero --max-steps 1" \
  "mantissa: error: [train] --text: '/dev/zero' is a character device; a text corpus is read from regular files only (devices and pipes can be endless)"
expect_named "train --model mlp --data-dir /dev/zero --max-steps 1" \
  "mantissa: error: [train] --data-dir: cannot open '/dev/zero/train-images-idx3-ubyte.gz': Not a directory"
expect_named "eval --checkpoint $dir/none.safetensors" \
  "mantissa: error: [eval] --checkpoint: checkpoint file '$dir/none.safetensors' does not exist"

# Sizes and rates the library refused in its own words ("[GPT] sizes must be positive",
# "[AdamW] Invalid weight_decay value", "[ViT] patch size -7") are refused naming the flag; a huge
# --context is refused at once (finding the text length it needs took seconds).
yes 'the quick brown fox jumps over the lazy dog' | head -n 200 >"$dir/text.txt"
gpt="train --model gpt --text $dir/text.txt --width 32 --heads 2 --max-steps 1 --no-progress-bar"
expect_named "$gpt --layers -7" "mantissa: error: [train] --layers must be at least 1, got -7"
expect_named "train --model vit --patch -7 --max-steps 1" \
  "mantissa: error: [train] --patch must divide the image size 28 (4 or 7 make 49 or 16 patches), got -7"
expect_named "plan --model vit --patch 5 --memory 1GiB" \
  "mantissa: error: [plan] --patch must divide the image size 28 (4 or 7 make 49 or 16 patches), got 5"
fx="$(dirname "$0")/../fixtures/hf/finetune"
expect_named "finetune --model-dir $fx/llama --data $fx/qa.jsonl --output-dir $dir/ft --weight-decay -7" \
  "mantissa: error: [finetune] --weight-decay must be a finite number >= 0, got -7"
start=$(date +%s)
expect_named "$gpt --context 2147483647" \
  "mantissa: error: [TextCorpus] --text '$dir/text.txt' holds 8800 bytes; its training part (the first 90 %) has 7920, fewer than one window of --context + 1 = 2147483648 bytes; use a text of at least 21474836480 bytes or a shorter --context"
[ $(($(date +%s) - start)) -lt 5 ] || fail "--context 2147483647 took $(($(date +%s) - start)) s to refuse"

# train --help describes both kinds of model.
"$cli" train --help | head -n 3 >"$dir/help"
grep -q -F -- "Fashion-MNIST" "$dir/help" && grep -q -F -- "--model gpt" "$dir/help" ||
  fail "train --help does not say that --model gpt trains on text"
exit 0
