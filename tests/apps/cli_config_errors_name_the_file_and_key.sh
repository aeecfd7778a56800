#!/bin/sh
# --config errors name the file and the key (CLI11 said "INI was not able to parse
# train.bogus"), with a likely meant flag; a flag set twice (max-steps and max_steps) is an
# error; a switch set to false in the file stays off, also in the resolved config.json.
# Usage: cli_config_errors_name_the_file_and_key.sh MANTISSA
. "$(dirname "$0")/cli_test_lib.sh"
M=$1
cd "$dir" || exit 1

rm -rf cli_cfe &&
  mkdir cli_cfe &&
  echo '{"max_step": 1}' > cli_cfe/a.json &&
  out=$("$M" --config cli_cfe/a.json train 2>&1)
test $? -ne 0 &&
  echo "$out" | grep -q "error: \[config\] cli_cfe/a.json: unknown key 'max-step'.*did you mean 'max-steps'" &&
  echo '{"max-steps": 2, "max_steps": 5}' > cli_cfe/b.json &&
  out=$("$M" --config cli_cfe/b.json train 2>&1)
test $? -ne 0 &&
  echo "$out" | grep -q 'sets max-steps more than once' &&
  echo '{"no-progress-bar": false, "max-steps": 1, "train-subset": 256, "epochs": 1, "checkpoint-dir": "cli_cfe/ck"}' > cli_cfe/c.json &&
  "$M" --config cli_cfe/c.json train >/dev/null 2>&1 &&
  grep -q '"no-progress-bar": false' cli_cfe/ck/config.json
