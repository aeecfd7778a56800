#!/bin/sh
# Command-line and --config mistakes are mantissa errors with exit code 2, the --config file's
# own named as such; not CLI11's words and codes (103, 114, an abort for --config given twice,
# "internal error: stoll" for a switch's bad value).
# Usage: cli_config_and_switch_mistakes_exit_2.sh MANTISSA
. "$(dirname "$0")/cli_test_lib.sh"
M=$1
cd "$dir" || exit 1

printf '{\042epochs\042: \042two\042}' > cli_cfg_type.json &&
  printf '{\042no-progress-bar\042: \042banana\042}' > cli_cfg_switch.json &&
  out=$("$M" train --config cli_cfg_type.json --config cli_cfg_type.json 2>&1)
test $? -eq 2 &&
  echo "$out" | grep -q -- '--config was given 2 times; give it once' &&
  out=$("$M" train --config cli_no_such_cfg.json 2>&1)
test $? -eq 2 &&
  echo "$out" | grep -q -- '\[config\] cli_no_such_cfg.json: no such file' &&
  out=$("$M" train --config cli_cfg_type.json 2>&1)
test $? -eq 2 &&
  echo "$out" | grep -q -- "\[config\] cli_cfg_type.json: --epochs: 'two' is not an integer" &&
  out=$("$M" train --no-progress-bar=banana 2>&1)
test $? -eq 2 &&
  echo "$out" | grep -q -- '--no-progress-bar is a switch' &&
  out=$("$M" train --config cli_cfg_switch.json 2>&1)
test $? -eq 2 &&
  echo "$out" | grep -q -- "\[config\] cli_cfg_switch.json: key 'no-progress-bar' is a switch: give true or false, not 'banana'" &&
  out=$("$M" train --seed 1 --seed 2 2>&1)
test $? -eq 2 &&
  echo "$out" | grep -q -- '--seed was given 2 times'
