#!/bin/sh
# A checkpoint of a 4-/8-bit run holds the layers it quantized in that form and those
# --quant-ignore kept as plain ones. eval given another --quant-ignore says which
# --quant-ignore the file was trained with and to leave the flag out (not the loader's tensor
# list, "size mismatch for net.0.base_layer.weight ..."); the same list (in any order) is
# accepted, and full-precision weights
# quantized on load take any list.
# Usage: cli_eval_quant_ignore.sh <mantissa binary>
set -u
cli="$1"
. "$(dirname "$0")/cli_test_lib.sh"
mlp="--model mlp --hidden 32,16 --train-subset 512 --threads 1 --no-progress-bar"
"$cli" train $mlp --epochs 1 --precision nf4 --lora-rank 2 --quant-ignore 2 --checkpoint-dir "$dir/q" >"$dir/q.txt" 2>&1 ||
  fail "the nf4 run failed"
acc=$(sed -n 's/^final test accuracy: \([0-9.]*\).*/\1/p' "$dir/q.txt")
ck="$dir/q/last.safetensors"

# Without the flag, and with the recorded list: the run's accuracy.
for flags in "" "--quant-ignore 2"; do
  "$cli" eval --checkpoint "$ck" $flags --threads 1 >"$dir/ok.txt" 2>&1 || fail "eval $flags failed"
  grep -q "test accuracy $acc\$" "$dir/ok.txt" || fail "eval $flags: not the run's accuracy $acc"
done

# Another list: an error naming the flag, the recorded value and the fix; no metrics written.
for other in 0 "0,2" 4; do
  "$cli" eval --checkpoint "$ck" --quant-ignore "$other" --metrics-json "$dir/m.json" >"$dir/bad.txt" 2>&1
  [ $? -eq 2 ] || fail "eval --quant-ignore $other: not status 2"
  grep -q -x -F "mantissa: error: [eval] $ck holds the nf4 layers of a run with --quant-ignore 2, but --quant-ignore is $other here, which would build other layers: leave --quant-ignore out (the file records it)" "$dir/bad.txt" ||
    fail "eval --quant-ignore $other: not the expected error"
  [ ! -e "$dir/m.json" ] || fail "eval --quant-ignore $other: metrics written"
done

# Plain weights are quantized as they load: any --quant-ignore applies.
"$cli" train $mlp --epochs 1 --checkpoint-dir "$dir/f" >"$dir/f.txt" 2>&1 || fail "the 32-true run failed"
"$cli" eval --checkpoint "$dir/f/last.safetensors" --precision nf4 --quant-ignore 0 --threads 1 >"$dir/fq.txt" 2>&1 ||
  fail "eval of plain weights in nf4 with --quant-ignore failed"
grep -q "precision nf4: test loss" "$dir/fq.txt" || fail "eval of plain weights in nf4: no result"
exit 0
