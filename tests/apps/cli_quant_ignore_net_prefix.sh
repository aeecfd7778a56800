#!/bin/sh
# --quant-ignore net.2 was refused asking for '2', while --fp8-exclude net.2 and --optim-bits-32
# net.2 (the model summary's spelling) are the names those flags take. For the image models both
# spellings now mean the same layer: the run keeps it in full precision (its checkpoint records
# '2'), eval takes either spelling against the checkpoint; a name that is no layer is still refused.
# Usage: cli_quant_ignore_net_prefix.sh <mantissa binary>
set -u
cli="$1"
. "$(dirname "$0")/cli_test_lib.sh"
run="--model mlp --hidden 32 --train-subset 256 --epochs 1 --threads 1 --no-progress-bar --precision nf4"
"$cli" train $run --quant-ignore net.2 --checkpoint-dir "$dir/a" --metrics-json "$dir/a.json" \
  >"$dir/out.a" 2>"$dir/err.a" || fail "--quant-ignore net.2 refused"
"$cli" train $run --quant-ignore 2 --metrics-json "$dir/b.json" >"$dir/out.b" 2>"$dir/err.b" ||
  fail "--quant-ignore 2 refused"
# The same layer kept: the same numbers.
[ "$(json_number "$dir/a.json" final_test_accuracy)" = "$(json_number "$dir/b.json" final_test_accuracy)" ] ||
  fail "net.2 and 2 trained differently"
[ "$(json_number "$dir/a.json" trainable_parameters)" = "$(json_number "$dir/b.json" trainable_parameters)" ] ||
  fail "net.2 and 2 kept different layers"
for spelling in 2 net.2; do
  "$cli" eval --checkpoint "$dir/a/last.safetensors" --quant-ignore $spelling >"$dir/out" 2>"$dir/err.eval" ||
    fail "eval --quant-ignore $spelling refused"
done
"$cli" train $run --quant-ignore net.7 >"$dir/out" 2>"$dir/err.bad"
[ $? = 2 ] || fail "--quant-ignore net.7: not exit status 2"
grep -q -F "names '7', but no layer of the model (Sequential) starts with it" "$dir/err.bad" ||
  fail "--quant-ignore net.7: no error naming the layer"
exit 0
