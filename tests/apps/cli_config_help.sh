#!/bin/sh
# --config is listed in `mantissa train --help` (it belongs to the main app, so CLI11 alone
# would list it only in `mantissa --help`); the commands that do not read it say so when given it, and do not
# list it.
# Usage: cli_config_help.sh <mantissa binary>
set -u
cli="$1"
. "$(dirname "$0")/cli_test_lib.sh"
"$cli" train --help >"$dir/out_help.txt" 2>&1 || fail "train --help failed"
grep -q -- '^  --config FILE  *Read flags from a JSON object {"flag-name": value, ...} in FILE' \
  "$dir/out_help.txt" || fail "train --help does not list --config with its description"
echo '{"max-steps": 1}' >"$dir/c.json"
for command in info bench compare eval plan; do
  "$cli" $command --help >"$dir/out_$command.txt" 2>&1 || fail "$command --help failed"
  grep -q -- '--config' "$dir/out_$command.txt" && fail "$command --help lists --config"
  "$cli" $command --config "$dir/c.json" >"$dir/err_$command.txt" 2>&1
  [ $? -eq 2 ] || fail "$command --config: exit status is not 2"
  grep -q "unknown option --config (only .mantissa train. reads a --config file)" \
    "$dir/err_$command.txt" || fail "$command --config: not the expected error"
  grep -q 'did you mean --config' "$dir/err_$command.txt" && fail "$command: did you mean --config"
done
# Before the command, the file was read into train's flags and bench ran without them.
"$cli" --config "$dir/c.json" bench --hidden 16 --precisions 32-true --steps 1 --rounds 1 \
  >"$dir/out_bench_run.txt" 2>&1
[ $? -eq 2 ] || fail "--config before bench: exit status is not 2"
grep -q -- "--config is read by .mantissa train. only; give .mantissa bench. its flags" \
  "$dir/out_bench_run.txt" || fail "--config before bench: not the expected error"
grep -q 'samples/s' "$dir/out_bench_run.txt" && fail "--config before bench: bench ran"
exit 0
