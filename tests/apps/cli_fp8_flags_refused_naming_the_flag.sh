#!/bin/sh
# A bad --fp8-* value is refused while the command line is parsed (exit 2), by the plugin's
# own checks, naming the flag; a non-integer in the integer flags' wording, and a module
# named twice in --fp8-exclude.
# Usage: cli_fp8_flags_refused_naming_the_flag.sh MANTISSA
. "$(dirname "$0")/cli_test_lib.sh"
M=$1
cd "$dir" || exit 1

out=$("$M" train --precision transformer-engine --fp8-amax-history-len 0 2>&1)
test $? -eq 2 &&
  echo "$out" | grep -q -- '--fp8-amax-history-len: .*amax_history_len must be at least 1' &&
  out=$("$M" eval --checkpoint x --fp8-margin 1.5 2>&1)
test $? -eq 2 &&
  echo "$out" | grep -q -- "--fp8-margin: '1.5' is not an integer (expected a whole number such as 0, the default)" &&
  out=$("$M" compare --precisions transformer-engine --fp8-amax-history-len abc 2>&1)
test $? -eq 2 &&
  echo "$out" | grep -q -- "--fp8-amax-history-len: 'abc' is not an integer (expected a whole number such as 1024, the default)" &&
  out=$("$M" train --precision transformer-engine --fp8-exclude net.0,net.0 2>&1)
test $? -eq 2 &&
  echo "$out" | grep -q -- "--fp8-exclude: 'net.0' is listed twice"
