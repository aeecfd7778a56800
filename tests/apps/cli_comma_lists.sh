#!/bin/sh
# Every comma-separated flag refuses an empty item ("32-true,", ",,", ","), naming the flag,
# the value and what the items may be, before any work (apps/comma_list.h). CLI11's delimiter
# and the lists' parsers dropped empty items without a word: `compare --precisions 32-true,`
# compared one precision, `--hidden 16,` built one layer, `--quant-ignore ,` kept nothing.
# (An empty value, "", is every flag's error: cli_empty_flag_values.sh.)
# Usage: cli_comma_lists.sh <mantissa binary>
set -u
cli="$1"
. "$(dirname "$0")/cli_test_lib.sh"
n=0
# refused FLAG VALUE TAKES COMMAND ARGS...: the command exits with status 2, saying
# "FLAG: 'VALUE' has an empty ..." and TAKES, and trains or measures nothing.
refused() {
  flag="$1" value="$2" takes="$3"
  shift 3
  n=$((n + 1))
  "$@" "$flag" "$value" >"$dir/out_$n.txt" 2>&1
  rc=$?
  [ $rc -eq 2 ] || fail "$* $flag '$value': exit status $rc, expected 2 (out_$n.txt)"
  grep -q -- "$flag: '$value' has an empty " "$dir/out_$n.txt" ||
    fail "$* $flag '$value': the error does not name the flag and value (out_$n.txt)"
  grep -q -- "$takes" "$dir/out_$n.txt" ||
    fail "$* $flag '$value': the error does not say what the flag takes (out_$n.txt)"
  grep -q -- 'samples/s\|test accuracy' "$dir/out_$n.txt" && fail "$* $flag '$value': it ran"
  return 0
}
valid='valid precisions: 32-true, 64-true, 16-mixed, bf16-mixed, 16-true, bf16-true, transformer-engine'
for value in '32-true,' ',,' ',32-true' '32-true,,bf16-true' ' '; do
  refused --precisions "$value" "$valid" "$cli" compare --hidden 16 --train-subset 64
  refused --precisions "$value" "$valid" "$cli" bench --hidden 16 --steps 1
  refused --precisions "$value" "$valid" "$cli" plan --model mlp --memory 64MiB
done
sizes='give positive integers separated by commas, such as 512,256'
quick='--max-steps 1 --train-subset 64 --no-progress-bar'
for value in '16,' ',16' '16,,16'; do
  refused --hidden "$value" "$sizes" "$cli" train $quick
  refused --hidden "$value" "$sizes" "$cli" bench --precisions 32-true --steps 1
  refused --hidden "$value" "$sizes" "$cli" compare --precisions 32-true --train-subset 64
  refused --hidden "$value" "$sizes" "$cli" plan --model mlp --memory 64MiB
  refused --hidden "$value" "$sizes" "$cli" eval --checkpoint none.safetensors
done
for value in 'net.0,' ','; do
  refused --quant-ignore "$value" 'name prefixes of Linear layers' "$cli" train --precision nf4 $quick
  refused --quant-ignore "$value" 'name prefixes of Linear layers' \
    "$cli" compare --precisions nf4 --train-subset 64
  refused --fp8-exclude "$value" 'module names separated by commas' \
    "$cli" train --precision transformer-engine $quick
  refused --fp8-exclude "$value" 'module names separated by commas' \
    "$cli" bench --precisions transformer-engine --steps 1
  refused --optim-bits-32 "$value" '(parts of) parameter names' \
    "$cli" train --optimizer adamw8bit $quick
done
# A --config file's list goes through the same check, named as the file's.
echo '{"hidden": "16,"}' >"$dir/c.json"
"$cli" train --config "$dir/c.json" >"$dir/out_config.txt" 2>&1
[ $? -eq 2 ] || fail "--config with hidden '16,': exit status is not 2"
grep -q -- "\[config\] $dir/c.json: --hidden: '16,' has an empty size" "$dir/out_config.txt" ||
  fail "--config with hidden '16,': not the expected error"
# Lists without empty items still work, split as before.
"$cli" bench --hidden 16 --precisions 32-true,bf16-true --steps 1 --rounds 1 --untimed-steps 0 \
  --json "$dir/b.json" >"$dir/out_bench_ok.txt" 2>&1 || fail "bench with two precisions failed"
[ "$(grep -c '"precision": ' "$dir/b.json")" -eq 2 ] || fail "bench did not run both precisions"
exit 0
