#!/bin/sh
# A binary --config is "not valid JSON" and a too deeply nested one says so, both naming the
# file (they said "[command line] [config] the config file nests arrays/objects more than 2
# levels deep" without it, the binary one counting its stray brackets).
# Usage: cli_config_not_json_or_too_deep_names_the_file.sh MANTISSA
. "$(dirname "$0")/cli_test_lib.sh"
M=$1
cd "$dir" || exit 1

printf '\000\001[garbage{[\377' > cli_c6.json &&
  out=$("$M" train --config cli_c6.json 2>&1)
test $? -eq 2 &&
  echo "$out" | grep -q '^mantissa: error: \[config\] cli_c6.json: the config file is not valid JSON: byte 0x00 at offset 0' &&
  echo '{"hidden": [[1]]}' > cli_c7.json &&
  out=$("$M" train --config cli_c7.json 2>&1)
test $? -eq 2 &&
  echo "$out" | grep -q '^mantissa: error: \[config\] cli_c7.json: the config file nests arrays/objects more than 2 levels deep' &&
  printf '{"max-steps": 1,' > cli_c8.json &&
  out=$("$M" train --config cli_c8.json 2>&1)
test $? -eq 2 &&
  echo "$out" | grep -q 'cli_c8.json: the config file is not valid JSON: .*unexpected end of input'
