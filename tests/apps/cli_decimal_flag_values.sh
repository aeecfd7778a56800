#!/bin/sh
# Float flags read hex and more (CLI11 converts with strtold): --lr 0x10 trained at 16, and
# "0x1p3", "inf", "nan" were numbers too. Every float flag of every command, as --help lists them,
# now takes decimal and exponent forms only; whole-number flags refuse hex as before. A --config
# value that the command line overrides is still checked ({"epochs": "1.5"} with --epochs 1
# passed), naming the key.
# Usage: cli_decimal_flag_values.sh <mantissa binary>
set -u
cli="$1"
. "$(dirname "$0")/cli_test_lib.sh"
. "$(dirname "$0")/cli_flag_list.sh"

floats=0
for command in $(commands); do
  value_flags "$command" >"$dir/flags"
  while read -r flag type; do
    case "$type" in
      FLOAT*) values="0x10 0x1p3 1e inf nan -inf 1,5" ;;
      INT* | UINT*) values="0x10" ;;
      *) continue ;;
    esac
    for v in $values; do
      "$cli" "$command" "$flag" "$v" >"$dir/out" 2>"$dir/err" </dev/null
      status=$?
      [ $status = 2 ] || fail "$command $flag $v: exit status $status, not 2"
      case "$type" in
        FLOAT*) expected="[command line] $flag: '$v' is not a number (expected a number" ;;
        *) expected="[command line] $flag: '$v' is not an integer" ;;
      esac
      grep -q -F -- "$expected" "$dir/err" || fail "$command $flag $v: not refused as '$expected'"
    done
    case "$type" in FLOAT*) floats=$((floats + 1)) ;; esac
  done <"$dir/flags"
done
[ $floats -ge 10 ] || fail "only $floats float flags found in --help"

# Decimal and exponent forms train (a one-step GPT).
yes 'the quick brown fox jumps over the lazy dog' | head -n 60 >"$dir/corpus"
gpt="train --model gpt --layers 1 --width 16 --heads 2 --context 8 --max-steps 1 --sample-tokens 0 --no-progress-bar --text $dir/corpus"
"$cli" $gpt --lr 2E-3 --weight-decay .5 --gradient-clip-val 1. >"$dir/out" 2>&1 ||
  fail "--lr 2E-3 --weight-decay .5 --gradient-clip-val 1.: refused"

# A --config value the command line overrides.
printf '{"epochs": "1.5"}\n' >"$dir/run.json"
"$cli" --config "$dir/run.json" $gpt --epochs 1 >"$dir/out" 2>"$dir/err"
[ $? = 2 ] || fail "config epochs \"1.5\" with --epochs 1: not exit status 2"
grep -q -x -F -- "mantissa: error: [config] $dir/run.json: config key 'epochs': '1.5' is not an integer (expected a whole number such as 2, the default) (--epochs on the command line overrides it, but the file's value must still be one the flag takes)" "$dir/err" ||
  fail "config epochs \"1.5\" with --epochs 1: the error does not name the key"
printf '{"lr": "0x10"}\n' >"$dir/run.json"
"$cli" --config "$dir/run.json" $gpt --lr 0.01 >"$dir/out" 2>"$dir/err"
[ $? = 2 ] || fail "config lr \"0x10\" with --lr: not exit status 2"
grep -q -F -- "[config] $dir/run.json: config key 'lr': '0x10' is not a number" "$dir/err" ||
  fail "config lr \"0x10\" with --lr: the error does not name the key"
# Not overridden: the flag's own check, as the file's error.
"$cli" --config "$dir/run.json" $gpt >"$dir/out" 2>"$dir/err"
[ $? = 2 ] || fail "config lr \"0x10\": not exit status 2"
grep -q -F -- "[config] $dir/run.json: --lr: '0x10' is not a number" "$dir/err" ||
  fail "config lr \"0x10\": not refused"
exit 0
