#!/bin/sh
# An empty value (an unset shell variable: --max-steps "$STEPS") became 0 for a number
# (--max-steps '' trained 0 steps, --lr '' at 0) and "not given" for a path (--resume '' started
# afresh, --text '' read the default corpus), in silence. Every flag of every command that takes
# a value, as --help lists them (a flag added later is covered too), now refuses it naming the
# flag; so does --config '', and a --config file's "".
# (--sample-prompt and generate --prompt take "": a prompt from a newline, from BOS.)
# Usage: cli_empty_flag_values.sh <mantissa binary>
set -u
cli="$1"
. "$(dirname "$0")/cli_test_lib.sh"
. "$(dirname "$0")/cli_flag_list.sh"

checked=0
for command in $(commands); do
  value_flags "$command" >"$dir/flags"
  # (info takes no value.)
  while read -r flag type; do
    [ "$flag" != --sample-prompt ] || continue  # "" is a prompt: below
    # generate's "" starts from BOS (cli_generate_prompt_and_generation_config.sh).
    [ "$command $flag" != "generate --prompt" ] || continue
    for form in separate joined; do
      if [ $form = separate ]; then
        "$cli" "$command" "$flag" '' >"$dir/out" 2>"$dir/err" </dev/null
      else
        "$cli" "$command" "$flag=" >"$dir/out" 2>"$dir/err" </dev/null
      fi
      status=$?
      [ $status = 2 ] || fail "$command $flag '' ($form): exit status $status, not 2"
      if [ $form = separate ]; then
        expected="mantissa: error: [command line] $flag: the value is empty (an unset shell variable?); give "
      else
        expected="mantissa: error: [command line] $flag needs a value"  # CLI11's own check
      fi
      grep -q -F -- "$expected" "$dir/err" ||
        fail "$command $flag '' ($form): the error does not name the flag and the empty value"
      checked=$((checked + 1))
    done
  done <"$dir/flags"
done
# The commands' flags are many: a --help format the parser above misses would check none.
[ $checked -ge 200 ] || fail "only $checked flags checked"

# A flag whose "" means something: the GPT's sample starts from a newline.
yes 'the quick brown fox jumps over the lazy dog' | head -n 60 >"$dir/corpus"
"$cli" train --model gpt --layers 1 --width 16 --heads 2 --context 8 --max-steps 1 --no-progress-bar \
  --text "$dir/corpus" --sample-tokens 4 --sample-prompt '' >"$dir/out" 2>&1 ||
  fail "--sample-prompt '' refused"

# A flag with two names is named as typed (plan's --memory is --memory-limit too).
"$cli" plan --memory-limit '' >"$dir/out" 2>"$dir/err" </dev/null
[ $? = 2 ] || fail "plan --memory-limit '': not exit status 2"
grep -q -F -- "[command line] --memory-limit: the value is empty" "$dir/err" &&
  ! grep -q -F -- "--memory:" "$dir/err" || fail "plan --memory-limit '': not named as typed"

# The main app's --config.
"$cli" --config '' train --max-steps 1 >"$dir/out" 2>"$dir/err" </dev/null
[ $? = 2 ] || fail "--config '': not exit status 2"
grep -q -F -- "[command line] --config: the value is empty" "$dir/err" || fail "--config '': not named"

# A --config file's "" is the file's error, naming the key.
printf '{"max-steps": 1, "text": ""}\n' >"$dir/run.json"
"$cli" --config "$dir/run.json" train --model gpt >"$dir/out" 2>"$dir/err" </dev/null
[ $? = 2 ] || fail "config \"text\": \"\": not exit status 2"
grep -q -F -- "mantissa: error: [config] $dir/run.json: --text: the value is empty" "$dir/err" ||
  fail "config \"text\": \"\": the error does not name the file and the flag"
# A switch's "" was on.
printf '{"no-progress-bar": ""}\n' >"$dir/run.json"
"$cli" --config "$dir/run.json" train --max-steps 1 >"$dir/out" 2>"$dir/err" </dev/null
[ $? = 2 ] || fail "config \"no-progress-bar\": \"\": not exit status 2"
grep -q -x -F -- "mantissa: error: [config] $dir/run.json: key 'no-progress-bar' is a switch: give true or false, not ''" "$dir/err" ||
  fail "config \"no-progress-bar\": \"\": the error does not name the key"
# Also when the command line gives the flag (and so overrides the file's value).
printf '{"max_steps": ""}\n' >"$dir/run.json"
"$cli" --config "$dir/run.json" train --max-steps 1 >"$dir/out" 2>"$dir/err" </dev/null
[ $? = 2 ] || fail "config \"max_steps\": \"\" overridden: not exit status 2"
grep -q -F -- "mantissa: error: [config] $dir/run.json: config key 'max_steps': the value is empty" "$dir/err" ||
  fail "config \"max_steps\": \"\" overridden: the error does not name the key"
exit 0
