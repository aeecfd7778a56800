#!/bin/sh
# --quant-ignore that keeps every Linear layer would quantize nothing while the run goes on under
# the quantized precision's name (its metrics: 0 bits per quantized weight): an error. In compare
# and bench a name that starts no layer (a typo) is refused before anything runs, not when the
# first quantized precision starts, after the precisions before it have trained.
# Usage: cli_quant_ignore_checked_first.sh <mantissa binary>
set -u
cli="$1"
. "$(dirname "$0")/cli_test_lib.sh"
mlp="--model mlp --epochs 1 --train-subset 256 --batch-size 128 --threads 1"
every="mantissa: error: [BitsandbytesPrecision] ignore_modules (--quant-ignore 0,2) keeps every Linear layer of the model (Sequential: 0, 2) in full precision, so precision 'nf4' would quantize nothing; leave at least one layer out of --quant-ignore, or choose a precision that does not quantize (such as bf16-mixed)"

"$cli" train $mlp --precision nf4 --quant-ignore 0,2 --no-progress-bar --metrics-json "$dir/m.json" >"$dir/train.txt" 2>&1
[ $? -eq 2 ] || fail "train: keeping every layer was not refused with status 2"
grep -q -x -F -- "$every" "$dir/train.txt" || fail "train: not the expected error"
[ ! -e "$dir/m.json" ] || fail "train: metrics were written"

# One layer kept: runs, and only the other is counted as quantized.
"$cli" train $mlp --precision nf4 --quant-ignore 2 --no-progress-bar --metrics-json "$dir/one.json" >"$dir/one.txt" 2>&1 ||
  fail "train: --quant-ignore 2 failed"
[ "$(json_number "$dir/one.json" quantized_bits_per_parameter)" = 4.5 ] || fail "train: not 4.5 bits"

for cmd in compare bench; do
  args="$mlp"
  [ "$cmd" = bench ] && args="--model mlp --batch-size 128 --threads 1 --steps 1 --rounds 1 --hidden 64"
  "$cli" $cmd $args --precisions 32-true,nf4 --quant-ignore fc1 --json "$dir/$cmd.json" >"$dir/$cmd.txt" 2>&1
  [ $? -eq 2 ] || fail "$cmd: the typo was not refused with status 2"
  grep -q -x -F -- "mantissa: error: [BitsandbytesPrecision] ignore_modules (--quant-ignore) names 'fc1', but no layer of the model (Sequential) starts with it; closest names: 0, 2" "$dir/$cmd.txt" ||
    fail "$cmd: not the expected error"
  ! grep -q '32-true' "$dir/$cmd.txt" || fail "$cmd: 32-true ran before the error"
done
"$cli" compare $mlp --precisions 32-true,nf4 --quant-ignore 0,2 >"$dir/compare_every.txt" 2>&1
[ $? -eq 2 ] || fail "compare: keeping every layer was not refused with status 2"
[ "$(cat "$dir/compare_every.txt")" = "$every" ] || fail "compare: not the error alone"
# The summary's name of the MLP's head, net.2, is taken as 2 now (cli_quant_ignore_net_prefix.sh);
# another prefix before a layer's name (a checkpoint key's "model.") still gets the hint.
"$cli" train $mlp --precision nf4 --quant-ignore model.2 >"$dir/summary_name.txt" 2>&1
[ $? -eq 2 ] || fail "train: --quant-ignore model.2 not refused with status 2"
grep -q -F -- "starts with it (names are relative to the model, without the 'model.' the summary shows before them: pass '2'); closest names: 2, 0" "$dir/summary_name.txt" ||
  fail "train: --quant-ignore model.2 does not say to pass 2"
exit 0
