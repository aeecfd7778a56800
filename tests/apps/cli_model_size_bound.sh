#!/bin/sh
# A model no machine holds is refused before anything is built, with its parameter count, the
# memory it takes and the memory there is (--layers 100000000 built for ever at about 100 MB/s
# without a word): the GPT's and the MLP's flags, --memory-limit, a size whose count overflows
# int64, and a pretrained config.json with absurd sizes (a million layers) for finetune and
# generate. A machine with more than 138 GiB available would build the last two.
# Usage: cli_model_size_bound.sh <mantissa binary> <fixtures dir>
set -u
cli="$1"
fx="$2/hf/finetune"
. "$(dirname "$0")/cli_test_lib.sh"
yes 'the quick brown fox jumps over the lazy dog' | head -n 200 >"$dir/text.in"
refused() {  # refused NAME MESSAGE COMMAND ARGS...: exit 2 within 60 s, naming MESSAGE
  name=$1 msg=$2
  shift 2
  timeout 60 "$cli" "$@" >"$dir/$name.out" 2>"$dir/$name.err"
  rc=$?
  [ $rc -eq 2 ] || fail "$name: exit status $rc, expected 2 (124: still building after 60 s)"
  grep -q -- "$msg" "$dir/$name.err" || fail "$name: not the expected message '$msg'"
}
refused gpt_layers "--model gpt (--layers 100000000 --width 256 --context 128): the model has 7.9e+13 parameters, which take at least 1.12 PiB in 32-true (weights, gradients and adamw state, 16 bytes a parameter); this machine has [0-9.]* [KMGT]iB available" \
  train --model gpt --layers 100000000 --text "$dir/text.in" --threads 1
refused gpt_width_overflow "the model has more than 9.22e+18 parameters, which take more than 8 EiB" \
  train --model gpt --width 4000000000 --heads 1 --text "$dir/text.in" --threads 1
refused mlp_hidden "--model mlp --hidden 100000000,100000000: the model has 1e+16 parameters, which take at least 71.1 PiB in bf16-true" \
  train --hidden 100000000,100000000 --precision bf16-true --threads 1
refused mlp_limit "in 32-true (weights, gradients and adamw state, 16 bytes a parameter); --memory-limit 64MiB allows 64 MiB" \
  train --hidden 8192 --memory-limit 64MiB --threads 1
refused eval_gpt "the model has 7.9e+13 parameters, which take at least 287 TiB in 32-true (weights, 4 bytes a parameter)" \
  eval --model gpt --layers 100000000 --text "$dir/text.in" --checkpoint "$dir/none.safetensors" --threads 1
mkdir "$dir/llama"
cp "$fx"/llama/* "$dir/llama/" 2>/dev/null
sed 's/"num_hidden_layers": 2/"num_hidden_layers": 1000000/' "$fx/llama/config.json" >"$dir/llama/config.json"
refused finetune "llama/config.json': the model has 3.7e+10 parameters, which take at least 551 GiB in 32-true (weights, gradients and adamw state, 16 bytes a parameter)" \
  finetune --model-dir "$dir/llama" --data "$fx/qa.jsonl" --output-dir "$dir/ft" --threads 1
refused generate "llama/config.json': the model has 3.7e+10 parameters, which take at least 138 GiB in 32-true (weights, 4 bytes a parameter)" \
  generate --model-dir "$dir/llama" --prompt "a" --threads 1
# A size that fits still trains (the check is a lower bound, not a guess that refuses).
"$cli" train --hidden 32 --train-subset 256 --epochs 1 --no-progress-bar --threads 1 \
  --memory-limit 64MiB >"$dir/small.out" 2>"$dir/small.err" || fail "a small model was refused"
echo "absurd model sizes refused with their figures"
